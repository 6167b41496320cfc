"The dry run (issue 18): format-faithful fake data, `attribkit-reproduce --dry-run` on a probe notebook, and every repro notebook's paper path."
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import attribkit
from attribkit import data as D
from attribkit.fake_data import write_fake_data_root
from attribkit.reproduce import discover, list_notebooks, main
from attribkit.report import RECORD_FILES

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).parent / "fixtures" / "dry_run"
REPRO = ROOT / "nbs" / "repro"


@pytest.fixture
def kernel_env(monkeypatch, tmp_path):
    "Kernels import this checkout's attribkit; the test runs in `tmp_path`."
    pkg_parent = str(Path(attribkit.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([pkg_parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_fake_data_root_is_deterministic_and_readable(tmp_path):
    a, b = write_fake_data_root(tmp_path / "a"), write_fake_data_root(tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert sum((a / f).stat().st_size for f in files) < 5 * 2**20
    assert (len(D.fashion_mnist(a).train), len(D.cifar10(a).train), len(D.cifar100(a).test)) == (256, 64, 100)
    assert D.imagenet_folder(a, "val")[0][0].shape == (3, 224, 224)
    cl, seg = D.voc2012(a, "classification"), D.voc2012(a, "segmentation")
    assert (len(cl.test), len(seg.test)) == (10, 4)                    # Main val for mAP/F1, Segmentation val for masks
    assert np.isin(cl.test.ids, seg.test.ids).sum() == 4


@pytest.mark.slow
def test_dry_run_probe_on_temporary_data_root(kernel_env):
    "`--dry-run` writes a temporary fake data root, passes scale=paper and dry_run=True, removes the root, exits 0."
    tmp = kernel_env
    assert main(["--dry-run", "--nbs-dir", str(PROBE), "--device", "cpu", "--out", str(tmp / "out")]) == 0
    d = json.loads((tmp / "out" / "probe_paper_data.json").read_text())   # the probe asserts scale, dry_run and the cache
    m = d["measured"]
    assert d["scale"] == "paper" and any(f.startswith("VOCdevkit/VOC2012/Annotations/") for f in d["extra"]["files"])
    assert (m["imagenet_val input side"], m["imagenet_train_299 input side"], m["voc_main_val input side"]) == (224, 299, 227)
    assert (m["voc_main_val images"], m["voc_seg_val images"], m["cifar10 images"]) == (10, 4, 64)
    assert not Path(d["extra"]["data_root"]).exists()                     # a temporary data root is removed
    assert "**dry run**" in (tmp / "out" / "summary.md").read_text()
    (tmp / "real").mkdir(); (tmp / "real" / "VOCdevkit").mkdir()
    assert main(["--dry-run", "--nbs-dir", str(PROBE), "--data-root", str(tmp / "real")]) == 2   # never beside real data
    assert [p.name for p in (tmp / "real").iterdir()] == ["VOCdevkit"]


def test_list_names_paper_files(monkeypatch):
    import attribkit.papers as P
    monkeypatch.setattr(P, "paper_files", lambda nb: ["cifar-10-batches-py", "weights/vgg16_cifar10.pth"])
    text = list_notebooks(PROBE)
    assert "probe_paper_data — " in text and "    dry_run = False" in text
    assert "    paper scale reads under data_root: cifar-10-batches-py, weights/vgg16_cifar10.pth" in text


@pytest.mark.slow
def test_every_notebook_paper_path_dry_run(tmp_path):
    "`attribkit-reproduce --scale paper --dry-run --jobs 2` runs all repro notebooks' paper paths on fake data; none gives a verdict (30 min: a guard against a hang, not a speed test)."
    notebooks = discover(REPRO)
    import papermill as pm
    no_param = [nb.stem for nb in notebooks if "dry_run" not in pm.inspect_notebook(str(nb))]
    assert not no_param, f"repro notebooks without a `dry_run` parameter: {no_param}"
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    try:
        r = subprocess.run([sys.executable, "-m", "attribkit.reproduce", "--scale", "paper", "--dry-run", "--jobs", "2", "--device", "cpu",
                            "--out", str(tmp_path / "out")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the dry run took more than 30 minutes (hung?); its output so far:\n{(e.stdout or b'')[-4000:]}")
    tail = r.stdout[-6000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    assert f"{len(notebooks)} notebooks, 0 failed" in r.stdout and len(notebooks) >= 24, tail
    judged = {p.stem: [c["claim"] for c in json.loads(p.read_text())["claims"] if c["verdict"] != "not evaluable"]
              for p in (tmp_path / "out").glob("*.json") if not p.name.startswith(".") and p.name not in RECORD_FILES}   # results files only
    assert len(judged) == len(notebooks) and not any(judged.values()), f"verdicts from fake data: { {k: v for k, v in judged.items() if v} }"
