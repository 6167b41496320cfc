"The model zoo's table, its floors and seeds, and how a cpu-tier record writes and shows it (no training here)."
import dataclasses
import json

import pytest

from attribkit import reproduce
from attribkit.papers import distillation, zoo
from attribkit.report import students_table, summary_markdown, zoo_table


def test_floors_follow_the_issue():
    "NIB VGGs ≥ 88 %, LeNet-300-100 ≥ 89 %, every other Fashion-MNIST classifier ≥ 90 %; at least 3 seeds each."
    for name, e in zoo.ZOO.items():
        if not e.data.startswith("fashion_mnist"): continue
        want = 0.88 if e.model == "nib_vgg" else 0.89 if e.model == "lenet_300_100" else 0.90
        assert e.floor == want, name
        assert e.seeds >= 3 and e.recipe["epochs"] >= 1, name


def test_unknown_stand_in_names_the_choices():
    with pytest.raises(ValueError, match="`name` must be a stand-in of the zoo"):
        zoo.get("VGG-99")


ROWS = [dict(model="LeNet-300-100", stands_for="LeNet-300-100", data="Fashion-MNIST 28×28", seeds=2, metric="top-1 test accuracy",
             value=0.885, values=[0.89, 0.88], floor=0.89, train_seconds=10.4, recipe={})]
CONTROLS = dict(images=512, version=2, classifier="Mosaic VGG-6-BN/2", seed=0, test_map=0.69, layer="features.20",
                intensity=0.51, abs_intensity=0.49, intensity_v1=0.91, abs_intensity_v1=0.11, gradcam=0.84)


STUDENTS = [dict(width="x2", variant="naive", knobs={}, seed=s, mAP=m, F1=30.0, collapsed="", teacher_mAP=77.0, seconds=100.0,
                 cached=False) for s, m in enumerate([75.0, 73.0])]


def test_students_table_marks_a_student_out_of_reach_and_leaves_collapsed_seeds_out():
    far = [dict(r, width="x4", mAP=60.0) for r in STUDENTS] + [dict(STUDENTS[0], width="x4", seed=2, mAP=20.0, collapsed="collapsed")]
    t = students_table(distillation.student_rows(far))
    assert "| x4 | naive | 3 (1) | 60.0 (60.0, 60.0, 20.0) | 77.0 | 17.0 | 10 | **no** | 100 |" in t
    sweep = distillation.student_rows([dict(r, variant="swa", knobs={"lam": 1.0}) for r in STUDENTS])
    assert "| x2 | swa lam=1.0 | 2 (0) | 74.0 (75.0, 73.0) | 77.0 | 3.0 | — | — | 100 |" in students_table(sweep)


def test_zoo_table_marks_a_stand_in_under_its_floor():
    t = zoo_table(ROWS)
    assert "| LeNet-300-100 | LeNet-300-100 | Fashion-MNIST 28×28 | 2 | top-1 accuracy 88.5 (89.0, 88.0) | 89 | **no** | 10 |" in t
    assert "| yes |" in zoo_table([dict(ROWS[0], values=[0.9, 0.89], value=0.895)])


def test_record_writes_zoo_json_and_summary_shows_it(tmp_path, monkeypatch):
    seen, devices = [], []
    def submit_zoo(pool, data_root=None, seconds=None, device="cpu"):
        seen.append(seconds); devices.append(device)
        return {("LeNet-300-100", s): pool.submit(dict, name="LeNet-300-100", seed=s, value=v, train_seconds=10.0, cached=True)
                for s, v in enumerate([0.89, 0.9])}
    monkeypatch.setattr(zoo, "submit_zoo", submit_zoo)
    monkeypatch.setattr(zoo, "localisation_controls", lambda data_root=None, device="cpu": CONTROLS)
    students = lambda pool, data_root=None: [pool.submit(dict, r) for r in STUDENTS]
    monkeypatch.setattr(distillation, "PRE_PASS", dataclasses.replace(distillation.PRE_PASS, submit=students))
    rec, counts = reproduce.train_zoo_record(tmp_path, dict(data_root=None), progress=False)
    assert counts == {"trained": 0, "cached": 2}                # what run.json records of the zoo
    on_disk = json.loads((tmp_path / "zoo.json").read_text())
    assert on_disk == rec and on_disk["stand_ins"][0]["value"] == 0.895 and on_disk["localisation_set"] == CONTROLS
    assert seen == [{}]                                        # no earlier record here: no training times to order by
    assert devices == ["cpu"]                                  # device auto on a machine without CUDA
    reproduce.train_zoo_record(tmp_path, dict(data_root=None), progress=False)
    assert seen[-1] == {"LeNet-300-100": 10.0}                  # the next run orders by the last record's zoo.json
    md = summary_markdown([], dict(scale="cpu", device="cpu"), zoo=on_disk)
    assert "## Stand-ins (the model zoo)" in md and "| LeNet-300-100 |" in md
    assert on_disk["students"] == distillation.student_rows(STUDENTS) and "| x2 | naive | 2 (0) | 74.0 (75.0, 73.0) | 77.0 | 3.0 | 5 | yes |" in md
    assert "input intensity 0.510, |intensity| 0.490 (version 1: 0.910, 0.110)" in md and "meets the design targets" in md
    assert "**misses**" in summary_markdown([], dict(scale="cpu", device="cpu"),
                                             zoo=dict(on_disk, localisation_set=dict(CONTROLS, gradcam=0.7)))


def test_the_zoo_prepass_runs_only_for_paper_notebooks():
    "A cpu run of fixture notebooks (the tests) never trains the zoo; the papers' repro notebooks do."
    from pathlib import Path
    assert not reproduce._paper_notebooks([(Path("fixtures/ok.ipynb"), "k"), (Path("fixtures/fail.ipynb"), "k")])
    assert reproduce._paper_notebooks([(Path("nbs/repro/ok.ipynb"), "k"), (Path("nbs/repro/mask_table2_mia.ipynb"), "k")])


def test_zoo_tasks_start_the_longest_first():
    "With the last record's seconds per seed the zoo's tasks start the longest first, stand-ins without a time before them; without, in the zoo's order; the table keeps the zoo's order."
    names = ["LeNet-300-100", "ResNet-8/2", "Canvas VGG-16-BN/16"]
    order = [t[0] for t in zoo.zoo_tasks(names, seconds={"LeNet-300-100": 11.6, "ResNet-8/2": 210.2})]
    assert list(dict.fromkeys(order)) == ["Canvas VGG-16-BN/16", "ResNet-8/2", "LeNet-300-100"]
    assert len(order) == sum(zoo.ZOO[n].seeds for n in names)
    assert [t[0] for t in zoo.zoo_tasks(names)][:1] == ["LeNet-300-100"] and zoo.zoo_tasks(names)[0][1:] == (0, None, zoo.ZOO["LeNet-300-100"].seeds, "cpu")
    rows = zoo.zoo_rows([dict(name=n, seed=0, value=0.9, train_seconds=1.0, cached=True) for n in reversed(names)])
    assert [r["model"] for r in rows] == [n for n in zoo.ZOO if n in names]


def test_worker_pool_without_workers_runs_at_submit_and_hands_errors_back():
    with zoo.worker_pool(1) as pool:
        ok, bad = pool.submit(sum, [1, 2]), pool.submit(int, "x")
        assert ok.done() and ok.result() == 3
        with pytest.raises(ValueError, match="invalid literal"):
            bad.result()
