"The committed cpu record: one snapshot, every claim tied to a registry claim, a summary that answers per paper in one screen."
import json
from pathlib import Path
from attribkit.papers import registry
from attribkit.report import RECORD_FILES
from attribkit.results import load_results

CPU = Path(__file__).resolve().parents[1] / "reproduction" / "cpu"
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
    assert all(r["verdict"] in ("holds", "fails", "inconclusive", "not evaluable") and r["support"] for r in rows)
    assert all(r["evidence"] for r in rows), [r["id"] for r in rows if not r["evidence"]]   # every paper claim is tested somewhere

def test_summary_is_short_and_opens_with_the_papers():
    "summary.md ≤ 40 KB; its first section after the header is a paper's registry table; each paper has its page."
    text = (CPU / "summary.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 40_000, len(text.encode())
    assert text.split("\n## ", 2)[1].startswith("000 ·")
    for prefix, (title, _) in registry().items():
        assert title in text
    from attribkit.papers import PAPERS
    assert all((CPU / f"{m}.md").exists() for m in PAPERS.values())
