"The committed cpu record: one snapshot, every claim tied to a registry claim, a summary that answers per paper in one screen, a README whose results at a glance are the record's."
import json, re
from pathlib import Path
import mistune
from attribkit.claims import VERDICTS
from attribkit.papers import PAPERS, registry
from attribkit.report import README_MARKS, RECORD_FILES, readme_with_glance
from attribkit.results import load_results

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "reproduction" / "cpu"
RESULTS = {p.stem: load_results(p) for p in sorted(CPU.glob("*.json")) if p.name not in RECORD_FILES and not p.name.startswith(".")}

def test_record_is_one_snapshot():
    "Every results file was made by the same commit and code (provenance), with the seeds it says."
    prov = {(d["versions"]["commit"], d["provenance"]["code"]) for d in RESULTS.values()}
    assert len(RESULTS) >= 24 and len(prov) == 1, prov
    commit, _ = prov.pop()
    assert commit and not commit.endswith("+dirty"), commit

def test_every_claim_serves_a_registry_claim():
    "Each notebook claim has a key, a registry id of its paper and a role; keys are unique within a notebook."
    ids = {prefix: {pc.id for pc in pcs} for prefix, (_, pcs) in registry().items()}
    for name, d in RESULTS.items():
        keys = [c["key"] for c in d["claims"]]
        assert len(keys) == len(set(keys)), name
        for c in d["claims"]:
            assert c["paper_claim"] in ids[name.split("_", 1)[0]], (name, c["key"], c["paper_claim"])
            assert c["role"] in ("evidence", "control", "diagnostic")

def test_paper_claims_cover_the_registry():
    "paper_claims.json has one row per registry claim, each with a verdict and support."
    rows = json.loads((CPU / "paper_claims.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in rows] == [pc.id for _, pcs in registry().values() for pc in pcs]
    assert all(r["verdict"] in VERDICTS and r["support"] for r in rows)
    untested = [r["id"] for r in rows if not r["evidence"] and not r["stand_ins"].startswith("not measured here: ")]
    assert not untested, untested   # every paper claim is tested somewhere, or its row says what testing it needs

def test_summary_is_short_and_opens_with_the_papers():
    "summary.md ≤ 48 KB (60 claims of the papers); its first section after the header is the papers' overview, then a section per paper; each paper has its page."
    text = (CPU / "summary.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 48_000, len(text.encode())
    sections = text.split("\n## ")
    assert sections[1].startswith("The papers\n") and sections[2].startswith("000 ·")
    for prefix, (title, _) in registry().items():
        assert title in text
    assert all((CPU / f"{m}.md").exists() for m in PAPERS.values())


def _render(md: str) -> str:
    "Markdown as HTML by a CommonMark renderer with tables (mistune 3, which the HTML report uses)."
    return mistune.create_markdown(plugins=["table"])(md)


def test_summary_answers_every_paper_on_its_first_screen():
    "Rendered, summary.md opens with the overview within its first 60 lines: one list item per paper, linked to its page, with its verdict counts and a generated answer; no cell of its tables is a wall of text."
    text = (CPU / "summary.md").read_text(encoding="utf-8")
    head = "\n".join(text.splitlines()[:60])
    html = _render(head)
    overview = html.split("<h2>The papers</h2>", 1)[1].split("</ul>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", overview, flags=re.S)
    assert len(items) == len(PAPERS) == 5, len(items)
    for (prefix, (title, pcs)), item, module in zip(registry().items(), items, PAPERS.values()):
        assert f'<a href="{module}.md">' in item and (CPU / f"{module}.md").exists(), item[:120]
        if all(pc.design_check for pc in pcs):   # a seed with no finding of its own: its rows are design checks, apart
            assert f"{len(pcs)} design checks of this implementation" in item; continue
        assert f"{sum(not pc.design_check for pc in pcs)} claims, holds " in item and "<strong>Reproduces:</strong>" in item and "<strong>Does not:</strong>" in item
    cells = re.findall(r"<td>(.*?)</td>", _render(text), flags=re.S)
    assert cells and max(len(re.sub(r"<[^>]+>", "", c)) for c in cells) <= 320, max(cells, key=len)


def test_record_pages_speak_in_words():
    "The summary names no notebook claim key (those are on the paper pages), and no page prints a comparison that rounding made false ('0.190 < 0.190')."
    summary = (CPU / "summary.md").read_text(encoding="utf-8")
    keys = [f"{nb}:{c['key']}" for nb, d in RESULTS.items() for c in d["claims"]]
    assert not [k for k in keys if k in summary.replace("\\_", "_")]
    for page in CPU.glob("*.md"):
        false = [m.group(0) for m in re.finditer(r"(?<![\d.])(\d+(?:\.\d+)?) \\?< \1(?![\d.])", page.read_text(encoding="utf-8"))]
        assert not false, (page.name, false[:3])


def test_readme_shows_the_records_results():
    "README's results at a glance are what attribkit.report.update_readme writes from the committed record (rerun `attribkit-reproduce --report reproduction/cpu` after changing the record or the report)."
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_with_glance(readme, CPU, "reproduction/cpu") == readme


def test_readme_glance_counts_each_papers_claims_once():
    "Each paper's row of the results at a glance: its verdict counts add up to the claims it names, design checks apart, every count named by its verdict."
    a, b = README_MARKS
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [r for r in readme[readme.index(a):readme.index(b)].splitlines() if r.startswith("| 00")]
    assert len(rows) == 5
    for r in rows:
        tested, verdicts = r.split(" | ")[1:3]
        claims, checks = re.match(r"(?:(\d+) claims)?(?: and )?(?:(\d+) design checks?)?", tested).groups()
        counts = re.findall(r"(holds|fails|underpowered|inconclusive|not evaluable|not measured here) (\d+)", verdicts.split(" (design checks")[0])
        assert sum(int(n) for _, n in counts) == int(claims or 0), r
        assert len(dict(counts)) == len(counts), r
        if checks:
            assert sum(int(n) for n in re.findall(r"(?:holds|fails|underpowered|inconclusive|not evaluable) (\d+)", verdicts.split(" (design checks")[1])) == int(checks), r
