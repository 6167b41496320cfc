"attribkit-reproduce on two fixture notebooks (one raises), the results schema, and the offline HTML index."
import json, os, shutil, subprocess, tempfile
from pathlib import Path
import pytest
import attribkit
from attribkit.claims import claim
from attribkit.reproduce import STATE_FILE, main
from attribkit.results import SCHEMA_VERSION, fmt_value, save_results, validate_results, load_results, table

FIXTURES = Path(__file__).parent / "fixtures"


def _three_runs(root: Path) -> list[dict]:
    "First (2 jobs), plain rerun, `--force --only ok` of the fixture notebooks under `root`: a snapshot of the outputs after each."
    pkg_parent = str(Path(attribkit.__file__).resolve().parent.parent)  # kernels must import this checkout's attribkit
    common = ["--nbs-dir", str(FIXTURES), "--out", "out", "--seed", "3", "--device", "cpu", "--data-root", str(root / "data"),
              "--scale", "cpu"]   # the fixture's claim gets a verdict (at smoke it would be not evaluable)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("PYTHONPATH", os.pathsep.join([pkg_parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        mp.setenv("OMP_NUM_THREADS", "1")
        out, snap = root / "out", []
        def snapshot(rc):
            ok = json.loads((out / "ok.json").read_text())
            snap.append(dict(rc=rc, summary=(out / "summary.md").read_text(), page=(out / "other.md").read_text(), created=ok["created"],
                             ok_mtime=(out / "executed" / "ok.ipynb").stat().st_mtime_ns,
                             fail_mtime=(out / "executed" / "fail.ipynb").stat().st_mtime_ns, ok=ok,
                             index=(out / "html" / "index.html").read_text()))
        snapshot(main(common + ["--jobs", "2"]))
        snapshot(main(common))
        snapshot(main(common + ["--only", "ok", "--force"]))
    return snap


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "The three runs in one temporary root, made once per session: under xdist the first worker to ask makes them in the workers' common folder, the others wait for it and read its snapshots."
    if "PYTEST_XDIST_WORKER" not in os.environ:
        root = tmp_path_factory.mktemp("repro")
        return root, _three_runs(root)
    from filelock import FileLock
    root = tmp_path_factory.getbasetemp().parent / "repro"
    with FileLock(f"{root}.lock"):
        done = root / "snapshots.json"
        if not done.exists():
            root.mkdir()
            done.write_text(json.dumps(_three_runs(root)))
    return root, json.loads(done.read_text())


def test_summary_lists_both_and_failure_names_cell(runs):
    root, (first, *_) = runs
    s, page = first["summary"], first["page"]                # the fixtures belong to no paper: their page is other.md
    assert "| fail | failed in cell 3: `RuntimeError: fixture failure at seed 3`" in s
    assert "| [ok](other.md#ok) | ok | holds 1 · fails 0 · underpowered 0 · inconclusive 0 · not evaluable 0 |" in s
    assert "## ok" in page and "## fail" in page
    # fail.ipynb: cell 0 parameters, 1 markdown, 2 `x = seed + 1`, 3 raises
    assert 'cell 3 (0-based, `raise RuntimeError(f"fixture failure at seed {seed}")`)' in page
    assert "| value | 0.5 | 0.6 |" in page and "**holds** · measured value below the paper's · +0.1 ± 0.012 (n = 3 seeds)" in page
    assert "**not tied to a paper claim**" in page
    assert "![ok](figures/ok.png)" in page                    # the figure, linked relative to the page


def test_exit_code_nonzero_when_a_notebook_fails(runs):
    _, snap = runs
    assert snap[0]["rc"] == 1 and snap[1]["rc"] == 1   # fail.ipynb is in both
    assert snap[2]["rc"] == 0                          # only ok.ipynb


def test_parameters_reach_notebook(runs):
    root, (first, *_) = runs
    ok = first["ok"]
    assert ok["seed"] == 3 and ok["measured"]["seed x 2"] == 6
    assert ok["extra"] == {"data_root": str((root / "data").resolve()), "device": "cpu"}
    assert (root / "out" / "figures" / "ok.png").exists()   # figures go to <out>/figures unless --figures names a folder
    validate_results(ok)


def test_rerun_skips_finished_and_force_reruns(runs):
    _, (first, second, third) = runs
    assert "status: **reused (" in second["page"].split("## ok")[1] and "| reused (" in second["summary"]
    assert second["ok_mtime"] == first["ok_mtime"] and second["created"] == first["created"]
    assert second["fail_mtime"] != first["fail_mtime"]          # failed notebooks always run again
    assert "status: **ok**" in third["page"] and "## fail" not in third["page"]
    assert third["ok_mtime"] != second["ok_mtime"]


def test_html_report_offline_links(runs):
    root, (first, *_) = runs
    h, idx = root / "out" / "html", first["index"]
    assert "src='figures/ok.png'" in idx and (h / "figures" / "ok.png").exists()
    assert "href='ok.html'" in idx and "href='fail.html'" in idx and (h / "ok.html").exists()
    assert "http" not in idx and idx.index("id='papers'") < idx.index("<nav>") < idx.index("id='notebooks'")
    page = (h / "ok.html").read_text()
    assert "<script" not in page and "http" not in page and "value" in page   # nothing from a CDN: no MathJax, no require.js


def test_report_rebuilds_the_pages_without_running(runs):
    "`--report DIR` rewrites summary.md, the pages and the HTML from DIR's results: no notebook runs, every JSON file stays byte for byte, the machine and the runner's times stay as run.json has them."
    root, _ = runs
    out = root / "out"
    before = {p.name: p.read_bytes() for p in out.glob("*.json")}
    executed = (out / "executed" / "ok.ipynb").stat().st_mtime_ns
    run = json.loads(before["run.json"])
    for page in ("summary.md", "other.md", "html/index.html"): (out / page).unlink()
    assert main(["--report", str(out)]) == 0
    assert {p.name: p.read_bytes() for p in out.glob("*.json")} == before and (out / "executed" / "ok.ipynb").stat().st_mtime_ns == executed
    s = (out / "summary.md").read_text()
    assert f"machine: {run['machine']} · sum of the notebooks' wall times" in s and f"the runner's wall time {run['wall_time'] / 60:.1f} min" in s
    wall = fmt_value(json.loads(before["ok.json"])["wall_time"])   # the results file's wall time (the fixture records none: "—")
    assert f"| [ok](other.md#ok) | ok | holds 1 · fails 0 · underpowered 0 · inconclusive 0 · not evaluable 0 | {wall} |" in s
    assert (out / "other.md").exists() and (out / "html" / "index.html").exists()


def good():
    return {"schema": SCHEMA_VERSION, "name": "x", "scale": "cpu", "seed": 0, "measured": {"a": 1.0}, "paper": {"a": 2},
            "claims": [claim("a-below-paper", "a < paper", [1.0, 0.9, 1.1], units="seeds")],
            "versions": {"python": "3", "torch": "2", "attribkit": "0"}, "wall_time": 1.0,
            "created": "2026-01-01T00:00:00+00:00", "extra": {}, "provenance": {"code": "x", "seeds": [0]}}


@pytest.mark.parametrize("change, msg", [
    (lambda d: d.pop("seed"), "miss the keys"),
    (lambda d: d.update(foo=1), "unknown keys"),
    (lambda d: d.update(provenance={"commit": None}), "`provenance`"),
    (lambda d: d["versions"].update(commit=3), "`versions['commit']`"),
    (lambda d: d["claims"][0].update(role="control?"), "['role']"),
    (lambda d: d.update(scale="huge"), "`scale`"),
    (lambda d: d.update(seed=True), "`seed`"),
    (lambda d: d.update(measured={}), "`measured` is empty"),
    (lambda d: d["measured"].update(b=float("nan")), "non-finite"),
    (lambda d: d["measured"].update(b=[1, 2]), "must be a number"),
    (lambda d: d["paper"].update(b={"mean": 1.0}), "'mean', 'se' or 'std'"),
    (lambda d: d["claims"][0].update(verdict="yes"), "verdict"),
    (lambda d: d["claims"][0].update(verdict="fails"), "does not follow"),
    (lambda d: d.update(scale="smoke"), "toy data give no verdicts"),
    (lambda d: d["claims"][0].update(se=float("inf")), "finite number or null"),
    (lambda d: d["claims"][0].update(n=2.5), "integer >= 0"),
    (lambda d: d["claims"][0].pop("detail"), "exactly the keys"),
    (lambda d: d["claims"][0].update(reasons=["a model at chance"]), "exactly when it has reasons"),
    (lambda d: d["claims"][0].update(gated_by="ctrl"), "['gated_by']"),
    (lambda d: d["claims"][0].update(fragile="no"), "['fragile']"),
    (lambda d: d["claims"][0].update(margin=float("nan")), "`margin` must be"),
    (lambda d: d["claims"][0].update(verdict="underpowered"), "does not follow"),
    (lambda d: d.update(versions={"python": "3"}), "`versions`"),
    (lambda d: d.update(wall_time=-1.0), "`wall_time`"),
    (lambda d: d.update(name="../x"), "`name`"),
    (lambda d: d.update(schema=1), "`schema`"),
])
def test_validate_rejects_bad_dicts(change, msg):
    validate_results(good())
    d = good(); change(d)
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace("[", r"\[")):
        validate_results(d)


def test_save_results_atomic_and_plain(tmp_path):
    import numpy as np, torch
    p = save_results("r", {"a": np.float32(0.5), "b": torch.tensor(2), "c": {"mean": np.float64(1), "std": 0.1, "n": 3}},
                     {"a": 0.6}, [claim("c", "c", torch.tensor([0.5, 0.4, 0.6]), detail="d")], "cpu", np.int64(4), out_dir=tmp_path)
    d = load_results(p)
    assert d["measured"] == {"a": 0.5, "b": 2, "c": {"mean": 1.0, "std": 0.1, "n": 3}} and d["seed"] == 4
    assert d["claims"][0]["verdict"] == "holds" and d["versions"]["attribkit"] == attribkit.__version__
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]       # no temporary file left behind
    with pytest.raises(ValueError, match="exactly the keys"):
        save_results("r", {"a": 1}, {}, [{"claim": "c", "holds": False, "detail": ""}], "cpu", 0, out_dir=tmp_path)
    assert load_results(p)["seed"] == 4                               # a rejected save leaves the old file intact
    assert table({"a": 1}, {"b": 2}).splitlines()[2:] == ["| a | 1 | — |", "| b | — | 2 |"]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_index_screenshot_not_blank(runs, tmp_path):
    root, _ = runs
    png = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={png}", "--window-size=1200,900", (root / "out" / "html" / "index.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    from PIL import Image
    im = Image.open(png).convert("RGB")
    colors = im.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50                     # text, table and the bar chart, not one flat colour
    # the figure's orange bar (tab:orange, #ff7f0e) is on screen, so the <img> loaded from the relative path
    assert any(abs(r - 255) < 20 and abs(g - 127) < 30 and b < 60 for _, (r, g, b) in colors)


def _tiny_notebook(path: Path, code: str) -> Path:
    "A repro-style notebook: a parameters cell `seed = 0`, then one code cell."
    nb = {"cells": [{"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]}, "execution_count": None, "outputs": [],
                     "source": ["seed = 0"]},
                    {"cell_type": "code", "id": "s", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": code.splitlines(keepends=True)}],
          "metadata": {"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))
    return path


def test_cell_timeout_fails_the_notebook(tmp_path, monkeypatch):
    "`--cell-timeout` (default 300 s in a dry run): a cell that runs longer fails its notebook instead of hanging the run."
    from attribkit.reproduce import run_notebook
    _tiny_notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(60)")
    rec = run_notebook(tmp_path / "slow.ipynb", {"seed": 1}, tmp_path / "ex", tmp_path, tmp_path, cell_timeout=2)
    assert rec["status"] == "failed" and rec["wall_time"] < 50, rec
    assert (rec["error"], rec["cell"], rec["cell_source"]) == ("CellTimeoutError: the cell ran longer than 2 s (--cell-timeout)", 1, "import time")


def test_kernel_uses_ipc_and_prints_no_tcp_warning(tmp_path, capfd):
    "The kernel talks over IPC sockets in a private temporary folder: no per-notebook unencrypted-TCP warning, no socket files left in the working folder."
    from attribkit.reproduce import run_notebook
    _tiny_notebook(tmp_path / "quiet.ipynb", "x = seed + 1")
    rec = run_notebook(tmp_path / "quiet.ipynb", {"seed": 1}, tmp_path / "ex", tmp_path, tmp_path)
    err = capfd.readouterr().err
    assert "without encryption" not in err and "IPKernelApp" not in err, err
    assert rec["status"] == "failed" and "wrote no results file" in rec["error"]   # the notebook ran; it saves no results
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ex", "quiet.ipynb"]


def test_papermill_sees_every_parameter_of_every_repro_notebook():
    "Each assignment of a repro notebook's parameters cell is a papermill parameter (a comment papermill cannot parse hides it from -p and --help-notebook)."
    import ast, papermill as pm
    for nb in sorted((Path(__file__).resolve().parent.parent / "nbs" / "repro").glob("*.ipynb")):
        cell = next(c for c in json.loads(nb.read_text())["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
        body = ast.parse("".join(cell["source"])).body
        names = {t.id for node in body if isinstance(node, ast.Assign) for t in node.targets}
        names |= {node.target.id for node in body if isinstance(node, ast.AnnAssign)}
        seen = pm.inspect_notebook(str(nb))
        assert names == set(seen), f"{nb.name}: papermill misses {sorted(names - seen)}"
        assert {"scale", "data_root", "device", "seed", "out_dir", "dry_run"} <= set(seen), nb.name
        untyped = [n for n, p in seen.items() if p["inferred_type_name"] in ("None", "") or not p["help"]]
        assert not untyped, f"{nb.name}: parameters without a type or a one-line help for --help-notebook: {untyped}"


def test_list_names_shared_parameters_once():
    "`attribkit-reproduce --list`: the six shared parameters once, with type and help; each notebook its own ones."
    from attribkit.reproduce import list_notebooks
    text = list_notebooks()
    head, *per_notebook = text.split("\n\n")
    assert head.startswith("every notebook takes") and "    scale: str = \"smoke\"    # smoke: toy data" in head
    assert "    data_root: Optional[str] = None    # " in head
    assert len(per_notebook) >= 24 and not any("    scale:" in b or "    seed:" in b for b in per_notebook)
    lenet = next(b for b in per_notebook if b.startswith("merging_lenet"))
    assert "    weights: Optional[str] = None    # the authors' checkpoint" in lenet


def _emphasis(md: str) -> list[str]:
    "The italic spans markdown renders from `md` (mistune, as the HTML report's converter does: CommonMark with tables)."
    import re, mistune
    return re.findall(r"<em>(.*?)</em>", mistune.create_markdown(plugins=["table"])(md), flags=re.S)


def test_generated_markdown_has_no_stray_emphasis():
    "Claim texts, details and table names with `*`, `_` and `|` render literally (one escaping function, results.md_escape)."
    from attribkit.report import summary_markdown
    from attribkit.results import fmt_claim, paper_table
    c = claim("dga-beats-gxi", "DGA(G*I) beats |G*I| and G*I's m*_10", [1.0, 1.1, 0.9], detail="per-seed Q_1 − Q_0; *not* emphasis")
    md = "\n".join([f"- {fmt_claim(c)}", "", paper_table({"G*I": {"m*_10": 1.0}, "PG×I (|∇|⊙z)": {"m*_10": 2.0}}, {"G*I": {"m*_10": 0.5}},
                                                    title="Object coverage of m*_10 (%)")])
    assert _emphasis(md) == [], _emphasis(md)
    assert "DGA(G*I) beats |G*I| and G*I's m*_10" in __import__("mistune").html(md)   # the text survives, unescaped on screen


def test_repro_notebooks_maths_reads_offline():
    "Every inline TeX formula in the repro notebooks' markdown becomes HTML that needs no MathJax: no `$`, backslash or brace left."
    import re
    from attribkit.report import tex_to_html
    nbs = sorted((Path(__file__).resolve().parent.parent / "nbs" / "repro").glob("*.ipynb"))
    spans = [m for nb in nbs for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"
             for m in re.findall(r"<span class='math'>(.*?)</span>", tex_to_html("".join(c["source"])))]
    assert len(spans) >= 20 and not [s for s in spans if re.search(r"[$\\{}]", s)], spans


def test_committed_summary_renders_without_stray_emphasis():
    "The committed record's summary.md and per-paper pages have no italic span (every generated string is escaped)."
    for page in (Path(__file__).resolve().parent.parent / "reproduction" / "cpu").glob("*.md"):
        assert _emphasis(page.read_text(encoding="utf-8")) == [], page.name



@pytest.mark.parametrize("missing, argv, rc", [
    ("papermill", ["--list"], 2), ("papermill", ["--only", "ok"], 2), ("ipykernel", ["--only", "ok"], 2),
    ("ipykernel", ["--list"], 0),                       # listing reads the notebooks with papermill only
    ("papermill", ["--copy-notebooks", "mine"], 0)])    # copying needs neither
def test_missing_papermill_or_kernel_is_one_line_not_a_traceback(missing, argv, rc, tmp_path, monkeypatch, capsys):
    import sys
    from attribkit.reproduce import MISSING_RUNTIME
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, missing, None)     # as if it were not installed (pip install --no-deps)
    assert main(argv + ["--nbs-dir", str(FIXTURES)]) == rc
    err = capsys.readouterr().err
    assert (err == MISSING_RUNTIME + "\n") == (rc == 2), err


def test_papermill_run_writes_only_under_out_dir(tmp_path):
    "A plain papermill run with `-p out_dir DIR` (no runner, no $ATTRIBKIT_FIGURES) writes its results and figure under DIR and nothing into the working folder."
    import papermill as pm
    root = Path(__file__).resolve().parent.parent
    status = lambda: subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    stamp = lambda p: p.stat().st_mtime_ns if p.exists() else None   # figures/ and results/ where a stray run would write
    watched = [root / "figures" / "merging_lenet.png", root / "results" / "merging_lenet.json", root / "results" / "figures" / "merging_lenet.png"]
    before = status(), [stamp(p) for p in watched]
    env = {k: v for k, v in os.environ.items() if k != "ATTRIBKIT_FIGURES"}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ATTRIBKIT_FIGURES", raising=False)
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.setenv("PYTHONPATH", os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]))
        pm.execute_notebook(str(root / "nbs" / "repro" / "merging_lenet.ipynb"), str(tmp_path / "executed.ipynb"), cwd=str(root),
                            parameters={"out_dir": str(tmp_path / "elsewhere"), "device": "cpu"}, kernel_name="python3",
                            progress_bar=False)
    assert (tmp_path / "elsewhere" / "merging_lenet.json").exists() and (tmp_path / "elsewhere" / "figures" / "merging_lenet.png").exists()
    assert (status(), [stamp(p) for p in watched]) == before, f"the run wrote into the repository:\n{status()}"


def _repro_nb(cells: list[str]) -> str:
    "A repro notebook: the parameters cell, then `cells`."
    cs = [{"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]}, "execution_count": None, "outputs": [],
           "source": 'scale = "smoke"; data_root = None; device = "auto"; seed = 0; out_dir = "results"'}]
    cs += [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": s} for i, s in enumerate(cells)]
    return json.dumps({"cells": cs, "metadata": {"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}},
                       "nbformat": 4, "nbformat_minor": 5})


def test_killed_run_resumes_and_leaves_no_result_of_the_killed_notebook(tmp_path):
    "A full run, then a --force run killed in notebook b after b saved its results: the rerun reuses a, runs b and c again, and never shows b's unfinished files."
    import signal, subprocess, sys, time
    nbs, out, hold = tmp_path / "nbs", tmp_path / "out", tmp_path / "hold"
    nbs.mkdir()
    save = 'from attribkit.results import save_results\nsave_results("{}", {{"v": 1}}, {{"v": 1}}, [], scale=scale, seed=seed, out_dir=out_dir)'
    (nbs / "a.ipynb").write_text(_repro_nb([save.format("a")]))
    (nbs / "b.ipynb").write_text(_repro_nb([save.format("b"), f'import pathlib, time\npathlib.Path({str(tmp_path)!r}, "b.saved").touch()\n'
                                            f'while pathlib.Path({str(hold)!r}).exists(): time.sleep(0.05)']))
    (nbs / "c.ipynb").write_text(_repro_nb([save.format("c")]))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(Path(attribkit.__file__).resolve().parent.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    argv = ["--nbs-dir", str(nbs), "--out", str(out), "--device", "cpu", "--jobs", "1"]
    with pytest.MonkeyPatch.context() as mp:   # the full run and the rerun in this process; the killed run in its own
        mp.setenv("OMP_NUM_THREADS", env["OMP_NUM_THREADS"]); mp.setenv("PYTHONPATH", env["PYTHONPATH"])
        assert main(argv) == 0
        hold.touch(); (tmp_path / "b.saved").unlink()
        p = subprocess.Popen([sys.executable, "-m", "attribkit.reproduce", *argv, "--force"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            t0 = time.monotonic()
            while not (tmp_path / "b.saved").exists():             # b's kernel saved b.json and now waits in its last cell
                assert p.poll() is None and time.monotonic() - t0 < 120, "the run ended before notebook b held"
                time.sleep(0.05)
        finally: os.killpg(p.pid, signal.SIGKILL); p.wait()          # the runner and its kernel, as `kill -9` or the OOM killer would
        state = json.loads((out / STATE_FILE).read_text())
        assert (state["a"]["status"], state["b"]["status"], state["c"]["status"]) == ("ok", "running", "running")
        assert not (out / "executed" / "b.ipynb").exists()          # neither the earlier run's copy nor this run's unfinished one
        for f in out.rglob("*.json"): json.loads(f.read_text())      # every JSON file is whole (parses)
        a_mtime = (out / "executed" / "a.ipynb").stat().st_mtime_ns
        hold.unlink()
        assert main(argv) == 0
    summary = out.joinpath("other.md").read_text()
    assert "status: **reused" in summary.split("## a")[1].split("## b")[0]         # a reused
    assert all("status: **ok**" in summary.split(f"## {n}")[1][:200] for n in "bc")  # b and c ran again
    assert (out / "executed" / "a.ipynb").stat().st_mtime_ns == a_mtime
    assert json.loads((out / STATE_FILE).read_text())["b"]["status"] == "ok"
    assert not [p for p in (out / "executed").glob(".*") if p != out / STATE_FILE] and load_results(out / "b.json")["name"] == "b"


def test_ctrl_c_exits_130_with_a_resume_hint(monkeypatch, capsys):
    import attribkit.reproduce as R
    def interrupted(*a, **k): raise KeyboardInterrupt
    monkeypatch.setattr(R, "run_all", interrupted)
    try: rc = main(["--out", "unused"])
    except KeyboardInterrupt: pytest.fail("Ctrl-C escaped main() with a traceback")
    assert rc == 130
    assert "interrupted; the finished notebooks are kept, the same command runs the rest" in capsys.readouterr().err


def test_compare_lists_changed_verdicts_by_key(tmp_path):
    "`compare_records` names each notebook claim whose verdict changed (by key) and skips paper claims whose notebooks did not run."
    from attribkit.report import compare_records
    from attribkit.results import save_results
    a, b = tmp_path / "a", tmp_path / "b"
    for d, e in ((a, [1.0, 1.1, 0.9]), (b, [1.0, -1.0, 0.2])):
        save_results("nb", {"x": 1.0}, {}, [claim("k/one", "one", e, units="seeds"), claim("k/two", "two", [1.0, 1.1, 0.9], units="seeds")],
                     "cpu", 0, out_dir=d)
    (a / "paper_claims.json").write_text(json.dumps([{"id": "p/x", "verdict": "holds", "evidence": ["nb:k/one"]}]))
    (b / "paper_claims.json").write_text(json.dumps([{"id": "p/x", "verdict": "not evaluable", "evidence": []}]))
    assert compare_records(a, b) == ["nb:k/one: holds → inconclusive"]


def test_last_wall_times_order_the_notebooks_longest_first(tmp_path):
    "With several jobs the notebooks start the longest first by their last results' wall times; missing or broken results count as unknown (started first)."
    for n, wt in (("short", 2.0), ("long", 90.0)):
        (tmp_path / f"{n}.json").write_text(json.dumps(dict(good(), name=n, wall_time=wt)))
    (tmp_path / "broken.json").write_text("{")
    from attribkit import reproduce
    last = reproduce._last_wall_times(tmp_path, ["short", "long", "broken", "new"])
    assert last == {"short": 2.0, "long": 90.0}
    assert sorted(["short", "long", "new"], key=lambda n: -last.get(n, float("inf"))) == ["new", "long", "short"]


def test_jobs_auto_is_one_per_core_on_a_cpu_and_integers_are_checked():
    "`--jobs auto` (the default) runs one notebook per CPU core without CUDA; an integer is kept; anything else is an error naming the option."
    import os, torch
    from attribkit.reproduce import auto_jobs, parse_args
    assert auto_jobs("cpu") == (os.cpu_count() or 1)
    if not torch.cuda.is_available(): assert parse_args([]).jobs == auto_jobs("cpu")
    assert parse_args(["--jobs", "3"]).jobs == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(SystemExit): parse_args(["--jobs", bad])
