"Recursive attribution masks and MIA: identities on no-implicit-bias models, batching, controls, bad input; the paper runner's steps on a hand-built setup and a reader's edit of a repro notebook."
import os
import pytest, torch
from torch import nn
import attribkit
from attribkit.core import attribute, target_grad
from attribkit.mask import attribution_mask, implicit_bias, mask_dataset, masked_input_accuracy
from attribkit.models import nib_vgg


def nib(**flags):
    torch.manual_seed(0)
    m = nib_vgg("vgg13-6", num_classes=4, input_size=8, width=8, hidden=128, dropout=0.0, init="kaiming", **flags).double().eval()
    for mod in m.modules():  # non-trivial running statistics, so BN is not the identity
        if hasattr(mod, "running_var") and mod.running_var is not None: mod.running_var.uniform_(0.5, 2.0)
    return m


def data(n=12):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, 8, 8, generator=g, dtype=torch.float64), torch.arange(n) % 4


def test_gxi_deeplift_ig_agree_on_nib_model():
    m, (x, y) = nib(), data()
    gxi = attribute(m, x, y, method="gxi")
    for method, kw in (("deeplift", {}), ("ig", dict(n_steps=64))):
        other = attribute(m, x, y, method=method, **kw)
        assert torch.allclose(other, gxi, rtol=1e-5, atol=1e-5 * gxi.abs().max()), method
    logits = m(x).gather(1, y[:, None])[:, 0]
    torch.testing.assert_close(gxi.flatten(1).sum(1), logits.detach(), rtol=1e-8, atol=1e-10)


def test_implicit_bias_zero_for_nib_nonzero_with_bias():
    x, y = data()
    assert implicit_bias(nib(), x, y).abs().max() < 1e-10
    for flags in (dict(layer_bias=True), dict(bn_bias=True)):
        m = nib(**flags)
        for name, p in m.named_parameters():  # biases start at zero: give them values
            if name.endswith("bias"): p.data.uniform_(-0.5, 0.5)
        assert m(x).abs().max() > 0
        assert implicit_bias(m, x, y).abs().max() > 1e-3, flags


def test_mask_in_unit_interval_and_constant_channel_gives_zero():
    m, (x, y) = nib(), data()
    ms = attribution_mask(m, x, y, "gxsi", iterations=4, return_all=True)
    assert ms.shape == (4, *x.shape) and ms.min() >= 0 and ms.max() <= 1
    const = lambda model, inp, t: torch.ones_like(inp)
    assert attribution_mask(m, x, y, const, iterations=1).abs().max() == 0


def test_callable_equals_registry_name():
    m, (x, y) = nib(), data()
    gxsi = lambda model, inp, t: inp.sign() * target_grad(model, inp, t)
    torch.testing.assert_close(attribution_mask(m, x, y, gxsi, 3), attribution_mask(m, x, y, "gxsi", 3))


def test_batched_mia_equals_per_sample_loop():
    m, (x, y) = nib(), data(10)
    q = masked_input_accuracy(m, (x, y), "gxi", iterations=3, batch_size=4, progress=False)
    per = torch.zeros(4)
    for j in range(10):
        per[0] += float(m(x[j:j + 1]).argmax(1) == y[j])
        for i in range(1, 4):
            mk = attribution_mask(m, x[j:j + 1], y[j:j + 1], "gxi", i)
            per[i] += float(m(x[j:j + 1] * mk).argmax(1) == y[j])
    torch.testing.assert_close(q, per / 10)


def test_rescaling_changes_nothing_on_a_nib_model():
    "A NIB model is positively homogeneous: rescaling the masked input to ‖z0‖ leaves every Q_i unchanged."
    m, (x, y) = nib(), data()
    a = masked_input_accuracy(m, (x, y), "gxsi", 4, progress=False)
    b = masked_input_accuracy(m, (x, y), "gxsi", 4, rescale=True, progress=False)
    torch.testing.assert_close(a, b)


def test_mask_dataset_cache_roundtrip(tmp_path):
    m, (x, y) = nib(), data()
    ds = mask_dataset(m, (x, y), "gxsi", 2, cache=tmp_path / "c.pt", progress=False)
    again = mask_dataset(m, None, "gxsi", 2, cache=tmp_path / "c.pt", progress=False)
    assert torch.equal(ds.tensors[0], again.tensors[0]) and torch.equal(ds.tensors[1], y)


def test_model_untouched():
    m, (x, y) = nib(), data()
    m.train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    masked_input_accuracy(m, (x, y), "gxsi", 2, progress=False)
    assert m.training and all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert all(len(mod._forward_hooks) == 0 for mod in m.modules())


@pytest.mark.parametrize("kw, exc, msg", [(dict(iterations=0), ValueError, "`iterations`"),
                                          (dict(target="gt"), ValueError, "`target`"),
                                          (dict(method="nope"), ValueError, "unknown attribution")])
def test_bad_input(kw, exc, msg):
    m, (x, y) = nib(), data()
    args = dict(method="gxsi", iterations=2) | kw
    with pytest.raises(exc, match=msg):
        masked_input_accuracy(m, (x, y), progress=False, **args)


def test_nan_inputs_rejected():
    m, (x, y) = nib(), data()
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        attribution_mask(m, x, y, "gxsi", 1)


def test_random_control_draws_a_fresh_field_every_iteration():
    "The random control's m*_2 / m*_1 is a new field, not m*_1 again (one seeded field reused would give m*_1²)."
    m, (x, y) = nib(), data()
    ms = attribution_mask(m, x, y, "random", iterations=2, return_all=True)
    assert not torch.allclose(ms[1], ms[0] ** 2)
    q = masked_input_accuracy(m, (x, y), "random", 3, progress=False, seed=1)
    assert torch.equal(q, masked_input_accuracy(m, (x, y), "random", 3, progress=False, seed=1))


def test_per_sample_hits_average_to_mia():
    m, (x, y) = nib(), data(10)
    hits = masked_input_accuracy(m, (x, y), "gxsi", 3, batch_size=4, progress=False, per_sample=True)
    assert hits.shape == (4, 10) and hits.dtype == torch.bool
    torch.testing.assert_close(hits.float().mean(1), masked_input_accuracy(m, (x, y), "gxsi", 3, batch_size=4, progress=False))


def test_prediction_targeted_mia_starts_at_clean_accuracy():
    m, (x, y) = nib(), data()
    q = masked_input_accuracy(m, (x, y), "gxsi", 2, target="pred", progress=False)
    assert abs(float(q[0]) - float((m(x).argmax(1) == y).double().mean())) < 1e-6


def test_paper_module_lists_every_mask_notebook_and_caps_the_dry_run():
    from pathlib import Path
    from attribkit.papers import attribution_masks as P
    names = {p.stem for p in (Path(__file__).resolve().parents[1] / "nbs" / "repro").glob("mask_*.ipynb")}
    assert set(P.PAPER_FILES) == names
    b = P.start("mask_table2_mia", P.BUDGETS, "paper", dry_run=True).budget
    assert b["seeds"] == 1
    assert max(b["n_mia"], b["n_mia_table2"], b["n_score"], b["n_test"], b["test_images"]) <= 4
    assert b["train_images"] <= 2 * b["recipe"]["cifar10"]["batch_size"] and b["recipe"]["cifar100"]["epochs"] == 1
    assert {f.path for f in P.WEIGHT_FILES} == {p for ps in P.PAPER_FILES.values() for p in ps if p.startswith("weights/")}


def test_paper_nib_weights_of_another_architecture_fail_before_training(tmp_path, monkeypatch):
    "A pre-trained NIB VGG file that holds another model: setup at paper scale fails naming the file instead of loading or training."
    from attribkit.fake_data import write_cifar10
    from attribkit.models import lenet_300_100
    from attribkit import models as M
    from attribkit.papers import attribution_masks as P
    write_cifar10(tmp_path, n_train=10, n_test=10)
    p = tmp_path / "weights" / P.weights_name("vgg13-6", "cifar10", 0); p.parent.mkdir()
    torch.save(lenet_300_100().state_dict(), p)
    monkeypatch.setattr(M, "train_cached", lambda *a, **k: pytest.fail("trained instead of failing"))
    run = P.start("mask_table3_depth", P.BUDGETS, "paper", data_root=tmp_path, device="cpu")
    with pytest.raises(ValueError) as e:
        P.setup(run, {"NIB VGG13-6": dict(cfg="vgg13-6")})
    msg = str(e.value)
    assert msg.startswith(f"weights file {p} does not fit attribkit.models.nib_vgg(**{{'cfg': 'vgg13-6', 'num_classes': 10")
    assert "missing " in msg and "features.0.weight" in msg


# ---- the paper runner's steps on a hand-built setup: untrained tiny NIB VGGs on 16 random 8×8 images of 4 classes ----

def tiny_setup(tmp_path, names=("NIB VGG16",), acc=0.9, num_classes=4, **knobs):
    from torch.utils.data import TensorDataset
    from attribkit import data as D
    from attribkit.papers import attribution_masks as P
    run = P.start("mask_test", P.BUDGETS, "cpu", device="cpu", out_dir=str(tmp_path), **{"seeds": 3, **knobs})   # 3 tiny models
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 3, 8, 8, generator=g), torch.arange(16) % 4
    data = D.DataSplits(TensorDataset(x, y), TensorDataset(x, y), num_classes, (0.0,) * 3, (1.0,) * 3, "tiny")
    torch.manual_seed(0)
    models = {("cifar10", n, k): nib_vgg("vgg13-6", num_classes=4, input_size=8, width=8, hidden=32, dropout=0.0,
                                         init="kaiming").eval() for n in names for k in run.seeds}
    return P.Setup(run, {"cifar10": data}, models, {n: {} for n in names}, dict.fromkeys(models, acc))


def saved(res) -> dict:
    import json
    return json.loads(res.save().read_text())


def test_gallery_steps_on_a_hand_built_setup(tmp_path):
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attribkit.papers import attribution_masks as P
    s = tiny_setup(tmp_path)
    res = P.gallery_masks(s, {"G×SI": "gxsi", "GBP": "gbp", "random (control)": "random"}, iterations=[1, 3], n_scored=8, n_shown=2)
    assert list(res.measured) == [f"{m} object coverage of m*_3 (%)" for m in ("G×SI", "GBP", "random (control)")] + \
        [f"NIB VGG16 test accuracy seed {k} (%)" for k in (0, 1, 2)]
    assert [c["key"] for c in res.claims] == ["fig3/gxsi-over-pgxi", "fig3/gxsi-over-gbp", "fig3/gxsi-over-random",
                                              "fig3/gxsi-over-intensity"]
    assert res.claim("fig3/gxsi-over-gbp")["n"] == 3 and res.claim("fig3/gxsi-over-pgxi")["verdict"] == "not evaluable"
    res.figures["mask_test"] = P.gallery_figures(res)
    d = saved(res)
    assert d["name"] == "mask_test" and d["claims"][1]["key"] == "fig3/gxsi-over-gbp" and (tmp_path / "figures").exists()
    plt.close("all")


def test_mia_step_adapts_to_the_methods_given(tmp_path, capsys):
    "Without DL and IG the step runs (the G×I = DL = IG identity check says what it needs); a claim on a dropped method is not evaluable and names it."
    from attribkit.papers import attribution_masks as P
    s = tiny_setup(tmp_path)
    res = P.mia_curves(s, {"G×SI": "gxsi", "G×I": "gxi", "GBP": "gbp", "random (control)": "random"}, iterations=3,
                       pred_methods={"G×SI": "gxsi"}, n_images=8)
    assert "identity check skipped: it needs G×I and DL or IG" in capsys.readouterr().out
    assert len(res.claims) == 24 and all(c["key"].endswith("/cifar10") for c in res.claims)
    assert res.claim("mia/c-falls/gbp/cifar10")["n"] == 3
    assert res.claim("mia/c-falls/pgxi/cifar10")["reasons"] == ["not run: pgxi(abs) removed from the methods"]
    assert "G×SI Q3" in res.measured and "G×SI (prediction-targeted) Q3" in res.measured and "DL Q3" not in res.measured
    res2 = P.mia_curves(s, {"G×I": "gxi", "DL": "deeplift", "random (control)": "random"}, iterations=2, n_images=8)
    assert "identity check (not a claim): max |Q(G×I) − Q(DL)| = 0.00 pt" in capsys.readouterr().out
    assert res2.extra["curves"]["cifar10"]["random (control)"] == \
        P.mia_curves(s, {"random (control)": "random"}, iterations=2, n_images=8).extra["curves"]["cifar10"]["random (control)"]
    assert saved(res)["extra"]["object_mass_share"]["cifar10"].keys() == {"G×SI", "G×I", "GBP", "random (control)"}
    one = saved(P.mia_curves(s, {"G×SI": "gxsi", "G×I": "gxi"}, iterations=1, n_images=8))   # one iteration: Q_0 and Q_1 only
    assert all(c["detail"] is not None for c in one["claims"])


def test_chance_is_the_shared_rule(tmp_path):
    "A model at chance makes its claims not evaluable by `claims.chance_reason`: 15 % is chance for 4 classes, not for 100."
    from attribkit.papers import attribution_masks as P
    methods = {"G×SI": "gxsi", "G×I": "gxi"}
    low = P.mia_curves(tiny_setup(tmp_path, acc=0.15), methods, iterations=2, n_images=8)
    assert "NIB VGG16 at chance: test accuracy 0.150 < 0.325" in low.claim("mia/b2-gxsi-over-gxi/cifar10")["reasons"][0]
    many = P.mia_curves(tiny_setup(tmp_path, acc=0.15, num_classes=100), methods, iterations=2, n_images=8)
    assert many.claim("mia/b2-gxsi-over-gxi/cifar10")["n"] == 3


def test_depth_step_on_a_hand_built_setup(tmp_path):
    from attribkit.papers import attribution_masks as P
    s = tiny_setup(tmp_path, names=["NIB VGG13-6", "NIB VGG16"])
    res = P.depth_curves(s, {"G×SI": "gxsi", "random": "random"}, iterations=3, n_images=8)
    assert [c["key"] for c in res.claims][:3] == ["depth/q1-over-q0/vgg13-6", "depth/qi-over-q0/vgg13-6",
                                                  "depth/over-random/vgg13-6"]
    assert (res.claim("depth/deeper-slower")["n"], res.claim("depth/deeper-slower")["units"]) == (3, "seeds")
    assert "NIB VGG16 random Q3" in res.measured and "NIB VGG13-6 test accuracy (%)" in res.measured
    assert not [c for c in res.claims if "/vgg16" in c["key"]], "NIB VGG16's rise is mask_table2_mia's claim, not repeated here"
    no_random = P.depth_curves(s, {"G×SI": "gxsi"}, iterations=3, n_images=8)
    assert no_random.claim("depth/over-random/vgg13-6")["verdict"] == "not evaluable"


def test_students_step_on_a_hand_built_setup(tmp_path, monkeypatch):
    from attribkit import models as M
    from attribkit.papers import attribution_masks as P
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path / "cache"))
    recipe = dict(epochs=1, lr=1e-3, optimizer="adam", weight_decay=0.0, batch_size=8, schedule="cosine")
    no_floor = dict(P.BUDGETS["cpu"]["students"], floor=None)  # no students' floor here: the shared chance rule speaks
    s = tiny_setup(tmp_path, recipe={"cifar10": recipe, "cifar100": recipe}, seeds=2, students=no_floor)
    students = {"NIB VGG13-6": (M.nib_vgg, dict(cfg="vgg13-6", num_classes=4, input_size=8, width=8, hidden=32, dropout=0.0,
                                                init="kaiming")),
                "WRN-10-2": (M.wrn, dict(depth=10, widen=1, num_classes=4, in_channels=3, width=8))}
    arms = {"w/o": None, "w/ i=3": ("gxsi", 3, "label"), "random w/ i=3": ("random", 3, "label")}
    res = P.train_students(s, students, arms, control_arms=["random w/ i=3"], n_train=16, n_test=8)
    assert set(res.extra["accuracy"]["WRN-10-2"]) == {"w/o", "w/ i=3"}
    assert "NIB VGG13-6 random w/ i=3" in res.measured and "WRN-10-2 random w/ i=3" not in res.measured
    assert "arm w/ i=10 not trained for NIB VGG13-6" in res.claim("students/masked-over-plain/vgg13-6/i10")["reasons"][0]
    # one epoch on 16 images teaches the tiny students nothing: the shared chance rule makes their claims not evaluable,
    # and the diagnosis says the student did not learn
    assert "NIB VGG13-6 (arms w/ i=3, random w/ i=3) at chance" in res.claim("students/over-random/vgg13-6")["reasons"][0]
    assert "is at chance on the plain data too" in res.diagnoses["students/over-random/vgg13-6"]
    d = saved(res)
    assert d["extra"]["student_train_images"] == 16
    # with the cpu budget's floor (80 % plain accuracy) a student under it speaks for none of its claims, before chance
    s2 = tiny_setup(tmp_path / "floor", recipe={"cifar10": recipe, "cifar100": recipe}, seeds=2)
    low = P.train_students(s2, students, arms, control_arms=["random w/ i=3"], n_train=16, n_test=8)
    assert low.claim("students/over-random/vgg13-6")["reasons"][0].startswith("NIB VGG13-6 under its floor: plain test accuracy")


def test_bias_step_on_a_hand_built_setup(tmp_path):
    from attribkit.papers import attribution_masks as P
    s = tiny_setup(tmp_path, names=list(P.BIAS_VARIANTS))
    res = P.bias_curves(s, {"G×I": "gxi", "G×SI": "gxsi", "random": "random"}, iterations=5, rescaled={"G×SI": "gxsi"},
                        n_images=8)
    assert len(res.claims) == 16 and res.claims[0]["key"] == "bias/premise-implicit-bias/vgg16+lb"
    assert "NIB VGG16 + LB G×SI (rescaled) Q5" in res.measured
    assert res.measured["NIB VGG16 median implicit bias / |f_k|"] < 1e-5    # the hand-built models have no biases
    no_gxi = P.bias_curves(s, {"G×SI": "gxsi", "random": "random"}, iterations=5, n_images=8)
    assert [c["key"] for c in no_gxi.claims] == [c["key"] for c in res.claims]   # G×SI vs G×I is mask_table2_mia's claim
    assert no_gxi.claim("bias/rescaling-raises/vgg16+lb")["verdict"] == "not evaluable"


# ---- the registry: every claim of the five steps serves a claim of the paper (PAPER_CLAIMS) in a role ----

def all_step_claims(tmp_path, monkeypatch) -> dict:
    "Each step's Result on hand-built setups, run with the methods and arms the repro notebooks use (smaller budgets)."
    from attribkit import models as M
    from attribkit.papers import attribution_masks as P
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path / "cache"))
    s = tiny_setup(tmp_path)
    g = P.gallery_masks(s, {"PG×I (|∇|⊙z)": ("pgxi", dict(variant="abs")), "GBP": "gbp", "G×SI": "gxsi",
                            "random (control)": "random", "input intensity (baseline)": P.input_intensity},
                        iterations=[1, 2], n_scored=8, n_shown=1)
    mia = {P.PGXI: ("pgxi", dict(variant="abs")), "GBP": "gbp", "G×I": "gxi", "G×SI": "gxsi", "G (control)": "saliency",
           "random (control)": "random"}
    recipe = dict(epochs=1, lr=1e-3, optimizer="adam", weight_decay=0.0, batch_size=8, schedule="cosine")
    st = tiny_setup(tmp_path, recipe={"cifar10": recipe, "cifar100": recipe}, seeds=2)
    students = {"NIB VGG13-6": (M.nib_vgg, dict(cfg="vgg13-6", num_classes=4, input_size=8, width=8, hidden=32, dropout=0.0,
                                                init="kaiming")),
                "WRN-10-2": (M.wrn, dict(depth=10, widen=1, num_classes=4, in_channels=3, width=8))}
    return {"mask_fig3_gallery": g,
            "mask_table2_mia": P.mia_curves(s, mia, iterations=3, pred_methods={"G×SI": "gxsi", "GBP": "gbp"}, n_images=8),
            "mask_table3_depth": P.depth_curves(tiny_setup(tmp_path, names=list(P.DEPTH_CFGS)),
                                                {"G×SI": "gxsi", "random": "random"}, iterations=2, n_images=8),
            "mask_table4_students": P.train_students(st, students, P.STUDENT_ARMS, n_train=16, n_test=8),
            "mask_table5_bias": P.bias_curves(tiny_setup(tmp_path, names=list(P.BIAS_VARIANTS)),
                                              {"G×I": "gxi", "G×SI": "gxsi", "random": "random"}, iterations=5,
                                              rescaled={"G×SI": "gxsi"}, n_images=8)}


def test_every_claim_serves_a_registry_claim_and_every_registry_claim_has_evidence(tmp_path, monkeypatch):
    from attribkit.claims import ROLES, check_distinct, paper_verdict
    from attribkit.papers import attribution_masks as P, registry
    ids = [pc.id for pc in P.PAPER_CLAIMS]
    assert len(ids) == len(set(ids)) and registry()["mask"][1] == P.PAPER_CLAIMS
    results = all_step_claims(tmp_path, monkeypatch)
    pairs = [(nb, c) for nb, res in results.items() for c in res.claims]
    for nb, c in pairs:
        assert c["paper_claim"] in ids, f"{nb}: {c['key']} serves {c['paper_claim']!r}, not a PAPER_CLAIMS id"
        assert c["role"] in ROLES, f"{nb}: {c['key']} has role {c['role']!r}"
    keys = [c["key"] for _, c in pairs]
    assert len(keys) == len(set(keys)), "a claim is made in two notebooks"
    for pc in P.PAPER_CLAIMS:
        row = paper_verdict(pc, pairs)
        assert row["evidence"] or "not measured here: needs" in pc.stand_ins, f"{pc.id} has no evidence and does not say what it needs"
    # every evidence claim states its configuration; no two registry claims rest on the same measured cells
    assert not [c["key"] for _, c in pairs if c["role"] == "evidence" and not c["configuration"]]
    check_distinct(pairs)
    roles = {c["key"]: c["role"] for _, c in pairs}
    # the diagnostics that were signed toward the critique and counted: never evidence
    assert roles["mia/label-leakage/cifar10"] == roles["students/label-leakage/vgg13-6"] == "diagnostic"
    assert {roles[k] for k in roles if k.startswith("bias/rescaling-raises/")} == {"diagnostic"}
    assert roles["fig3/gxsi-over-random"] == roles["mia/over-random/gxi/cifar10"] == roles["bias/over-random"] == "control"
    # the paper's PG×I numbers are |∇|⊙z: its claim compares that variant and says so
    assert "|∇|⊙z" in results["mask_table2_mia"].claim("mia/c-falls/pgxi/cifar10")["claim"]
    for nb, res in results.items():
        assert res.stand_ins and all(0 <= v <= 1 for v in res.stand_ins.values()), nb


def test_first_iteration_gain_is_no_claim_on_cifar100(tmp_path):
    "The paper's own CIFAR-100 row has G×SI's Q_1 below Q_0: there b1-q1 is a diagnostic, on CIFAR-10 evidence."
    from attribkit.papers import attribution_masks as P
    s = tiny_setup(tmp_path)
    both = P.Setup(s.run, {d: s.splits["cifar10"] for d in ("cifar10", "cifar100")},
                   {(d, n, k): m for (_, n, k), m in s.models.items() for d in ("cifar10", "cifar100")}, s.flags,
                   {(d, n, k): a for (_, n, k), a in s.accuracy.items() for d in ("cifar10", "cifar100")})
    res = P.mia_curves(both, {"G×SI": "gxsi"}, iterations=2, n_images=8)
    assert res.claim("mia/b1-q1/cifar10")["role"] == "evidence" and res.claim("mia/b1-q1/cifar100")["role"] == "diagnostic"
    assert res.claim("mia/b1-qi/cifar100")["role"] == "evidence" and len(res.stand_ins) == 2


@pytest.mark.slow
def test_reader_edit_drops_dl_and_ig_from_the_mia_methods(tmp_path, monkeypatch):
    "The issue's reader test: delete the DL and IG lines of mask_table2_mia's method list; the notebook runs at smoke and its result has neither."
    import json
    from pathlib import Path
    import papermill as pm
    root = Path(__file__).resolve().parents[1]
    src = root / "nbs" / "repro" / "mask_table2_mia.ipynb"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    nb = json.loads(src.read_text())
    cell = next(c for c in nb["cells"] if "methods = {" in "".join(c["source"]))
    lines = [l for l in cell["source"] if not l.lstrip().startswith(('"DL":', '"IG":'))]
    assert len(lines) == len(cell["source"]) - 2, "the method list no longer has one DL and one IG line"
    cell["source"] = lines
    edited = tmp_path / "mask_table2_mia.ipynb"
    edited.write_text(json.dumps(nb))
    pm.execute_notebook(str(edited), str(tmp_path / "out.ipynb"), parameters=dict(scale="smoke", out_dir=str(tmp_path), device="cpu"),
                        kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    d = json.loads((tmp_path / "mask_table2_mia.json").read_text())
    assert not any(k.startswith(("DL ", "IG ")) for k in d["measured"]) and "G×I Q10" in d["measured"]
    assert len(d["claims"]) == 24 and set(d["extra"]["curves"]["cifar10"]) == {
        "PG×I (|∇|⊙z, code)", "PG×I ([∇]⁺⊙z, text)", "GBP", "G×I", "G×SI", "G (control)", "random (control)"}


def fake_zoo(monkeypatch, values=(0.9, 0.85, 0.9)):
    "The zoo faked: 40 random 1×32×32 images as its data, an untrained zoo-config NIB VGG with test accuracy `values[seed % len(values)]` as each stand-in; training fails."
    from torch.utils.data import TensorDataset
    from attribkit import data as D, models as M
    from attribkit.papers import zoo
    x = torch.randn(40, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    fake = D.DataSplits(TensorDataset(x, torch.arange(40) % 10), TensorDataset(x[:20], torch.arange(20) % 10), 10, (0.5,), (0.5,), "f")
    calls = []

    def get(name, seed, data_root=None, device="auto"):
        calls.append((name, seed))
        torch.manual_seed(seed)
        return zoo.Trained(name, seed, zoo.ZOO[name].build().eval(), values[seed % len(values)], zoo.ZOO[name].floor, 1.0, True)

    monkeypatch.setattr(zoo, "get", get)
    monkeypatch.setattr(zoo, "splits", lambda key, root=None: fake)
    monkeypatch.setattr(M, "train", lambda *a, **k: (_ for _ in ()).throw(AssertionError("a stand-in was trained at cpu")))
    return calls


def test_cpu_setup_takes_the_zoo_stand_ins_and_their_floors(monkeypatch):
    "At cpu the NIB VGGs are the zoo's (nothing trains here), named as the zoo names them, with the zoo's seeds, accuracy and floor; a stand-in under its floor makes its claims not evaluable."
    from attribkit.papers import attribution_masks as am, zoo
    from attribkit.papers.experiment import start
    calls = fake_zoo(monkeypatch)
    run = start("mask_table2_mia", am.BUDGETS, "cpu", device="cpu")
    assert run.seeds == list(range(zoo.ZOO["NIB VGG16/16"].seeds))
    s = am.setup(run)
    assert calls == [("NIB VGG16/16", k) for k in run.seeds] and s.accuracy["cifar10", "NIB VGG16", 1] == 0.85
    assert s.stand_in() == "NIB VGG16/16 on Fashion-MNIST 32×32 (stand-in for NIB VGG16 on CIFAR-10)"
    assert "| 90.0%, 85.0%, 90.0%, 90.0%, 85.0%, 90.0%, 90.0%, 85.0%, 90.0%, 90.0% | 88% |" in s.describe()   # 10 seeds, the fake cycles 3 accuracies
    why = am._chance(s, ["NIB VGG16"])
    assert why == zoo.floor_reason(list(s.trained.values()), "NIB VGG16") and why.startswith("NIB VGG16 under its floor: top-1 test accuracy 0.85")
    assert why.endswith("in 3 of 10 seeds")
    res = am.mia_curves(s, {"G×SI": "gxsi", "G×I": "gxi"}, iterations=2, n_images=4)
    assert res.claim("mia/b2-gxsi-over-gxi/cifar10")["verdict"] == "not evaluable"
    assert "under its floor" in res.claim("mia/b2-gxsi-over-gxi/cifar10")["reasons"][0]
    assert res.extra["zoo"] == {s.stand_in(): dict(zoo="NIB VGG16/16", stands_for="NIB VGG16", data="Fashion-MNIST 32×32",
                                                   seeds=list(range(10)), values=[0.9, 0.85, 0.9] * 3 + [0.9], floor=0.88,
                                                   metric="top-1 test accuracy, full test split")}
    assert res.stand_ins == {s.stand_in(): pytest.approx(0.885, abs=1e-4)}
    s.trained = {k: zoo.Trained(t.name, t.seed, t.model, 0.9, 0.88, 1.0, True) for k, t in s.trained.items()}
    assert am._chance(s, ["NIB VGG16"]) is None


def test_cpu_setup_takes_only_zoo_models_with_the_zoo_seeds(monkeypatch):
    from attribkit.papers import attribution_masks as am
    from attribkit.papers.experiment import start
    calls = fake_zoo(monkeypatch)
    with pytest.raises(ValueError, match="`seeds` at cpu can be at most the zoo's count for NIB VGG16/16 \\+ BNB \\(5\\), got 6"):
        am.setup(start("mask_table5_bias", am.BUDGETS, "cpu", device="cpu", seeds=6), am.BIAS_VARIANTS)
    with pytest.raises(ValueError, match="stand-ins of the model zoo"):
        am.setup(start("mask_table2_mia", am.BUDGETS, "cpu", device="cpu"), {"NIB VGG11": dict(cfg="vgg11")})
    assert calls == []
    run = start("mask_table5_bias", am.BUDGETS, "cpu", device="cpu")
    s = am.setup(run, am.BIAS_VARIANTS)
    assert len(run.seeds) == 10 and s.seeds == [0, 1, 2, 3, 4]       # each setup: the seeds all its models have (the bias variants: 5)
    assert am.setup(start("mask_table2_mia", am.BUDGETS, "cpu", device="cpu")).seeds == list(range(10))   # the NIB VGG16 alone: 10
    assert am.setup(start("mask_table2_mia", am.BUDGETS, "cpu", device="cpu", seeds=4)).seeds == [0, 1, 2, 3]   # fewer when asked
    assert {n for n, _ in calls} == {"NIB VGG16/16", "NIB VGG16/16 + LB", "NIB VGG16/16 + BNB", "NIB VGG16/16 + BNB + LB"}
    assert s.stand_in("NIB VGG16 + BNB") == "NIB VGG16/16 + BNB on Fashion-MNIST 32×32 (stand-in for NIB VGG16 + BNB on CIFAR-10)"


def test_cpu_dry_run_runs_the_paper_protocol_never_the_zoo(tmp_path, monkeypatch):
    "A dry run at any scale runs the paper's protocol (the `dry_run` row of BUDGETS): never the zoo; the paper's data under data_root, the paper's NIB VGG trained on its few images."
    from attribkit import models as M
    from attribkit.fake_data import write_cifar10
    from attribkit.papers import attribution_masks as am, zoo
    from attribkit.papers.experiment import start
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path / "cache"))
    train = M.train
    fake_zoo(monkeypatch)
    monkeypatch.setattr(zoo, "get", lambda *a, **k: pytest.fail("a dry run called the zoo"))
    seen = []
    monkeypatch.setattr(M, "train", lambda model, data, **k: seen.append(len(data)) or train(model, data, **k))
    with pytest.raises(FileNotFoundError, match="data_root"):
        am.setup(start("mask_table3_depth", am.BUDGETS, "cpu", device="cpu", dry_run=True))
    write_cifar10(tmp_path, n_train=20, n_test=10)
    s = am.setup(start("mask_table3_depth", am.BUDGETS, "cpu", device="cpu", dry_run=True, data_root=tmp_path), {"NIB VGG13-6": dict(cfg="vgg13-6")},
                 ["cifar10"])
    assert seen == [16] and s.trained == {} and len(s.splits["cifar10"].test) == 4
    assert s.models["cifar10", "NIB VGG13-6", 0].features[0].in_channels == 3 and s.stand_in("NIB VGG13-6") == "NIB VGG13-6 on CIFAR-10"


def test_setup_honours_or_rejects_the_data_sets(monkeypatch):
    "Below the paper's data one stand-in data set stands for one paper data set: two are rejected, not silently cut to one."
    from attribkit.papers import attribution_masks as am
    from attribkit.papers.experiment import start
    calls = fake_zoo(monkeypatch)
    with pytest.raises(ValueError, match="`datasets` must be one data set"):
        am.setup(start("mask_table2_mia", am.BUDGETS, "cpu", device="cpu"), am.NIB16, ["cifar10", "cifar100"])
    assert calls == []
    assert am.setup(start("mask_table2_mia", am.BUDGETS, "cpu", device="cpu"), am.NIB16, ["cifar100"]).datasets == ["cifar100"]


def test_students_rest_on_the_teacher_and_its_floor(tmp_path, monkeypatch):
    "Every student claim is not evaluable when the teacher is under its zoo floor; the teacher's accuracy shown is the setup's (the zoo's at cpu)."
    from attribkit import models as M
    from attribkit.papers import attribution_masks as P, zoo
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path / "cache"))
    recipe = dict(epochs=1, lr=1e-3, optimizer="adam", weight_decay=0.0, batch_size=8, schedule="cosine")
    s = tiny_setup(tmp_path, recipe={"cifar10": recipe, "cifar100": recipe}, seeds=2, acc=0.8)
    s.trained = {k: zoo.Trained("NIB VGG16/16", k[2], m, 0.8, 0.88, 1.0, True) for k, m in s.models.items()}
    students = {"NIB VGG13-6": (M.nib_vgg, dict(cfg="vgg13-6", num_classes=4, input_size=8, width=8, hidden=32, dropout=0.0,
                                                init="kaiming"))}
    res = P.train_students(s, students, {"w/o": None, "w/ i=3": ("gxsi", 3, "label")}, n_train=16, n_test=8)
    c = res.claim("students/masked-over-plain/vgg13-6/i3")
    assert c["verdict"] == "not evaluable" and "the teacher NIB VGG16 under its floor: top-1 test accuracy 0.8" in c["reasons"][0]
    assert res.extra["teacher_accuracy"] == {"0": 0.8, "1": 0.8} and set(res.extra["teacher_accuracy_student_test"]) == {"0", "1"}
    assert res.extra["zoo"][s.stand_in()]["values"] == [0.8, 0.8]


def test_a_renamed_notebook_without_a_method_keeps_its_claims_not_evaluable(tmp_path, monkeypatch):
    "A copy of mask_fig3_gallery under another name, its GBP line removed, runs at smoke: the claim on GBP stays, not evaluable, naming the method."
    import json
    from pathlib import Path
    import papermill as pm
    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    nb = json.loads((root / "nbs" / "repro" / "mask_fig3_gallery.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "methods = {" in "".join(c["source"]))
    lines = [l for l in cell["source"] if not l.lstrip().startswith('"GBP":')]
    assert len(lines) == len(cell["source"]) - 1, "the method list no longer has one GBP line"
    cell["source"] = lines
    edited = tmp_path / "my_gallery_without_gbp.ipynb"
    edited.write_text(json.dumps(nb))
    pm.execute_notebook(str(edited), str(tmp_path / "out.ipynb"), parameters=dict(scale="smoke", out_dir=str(tmp_path), device="cpu"),
                        kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    d = json.loads(next(tmp_path.glob("*.json")).read_text())
    c = {c["key"]: c for c in d["claims"]}["fig3/gxsi-over-gbp"]
    assert c["verdict"] == "not evaluable" and "not run: gbp removed from the methods" in c["reasons"]
    assert not any(k.startswith("GBP ") for k in d["measured"]) and "G×SI object coverage of m*_10 (%)" in d["measured"]


def test_label_claims_are_the_papers_and_label_free_ones_test_the_words_without_it(tmp_path, monkeypatch):
    "Label-targeted evidence is the paper's protocol (configuration 'paper'); the prediction-targeted runs are evidence of the 'without the label' claims, or of a label claim at another configuration, never counted as the paper's."
    from attribkit.papers import attribution_masks as P
    results = all_step_claims(tmp_path, monkeypatch)
    by_key = {c["key"]: c for res in results.values() for c in res.claims}
    assert by_key["mia/b1-qi/cifar10"]["configuration"] == "paper"
    assert by_key["mia/label-free-qi/cifar10"]["paper_claim"] == "mask/label-free-mia-rise"
    assert by_key["mia/label-free-c-falls/gbp/cifar10"]["configuration"] == P.LABEL_FREE
    assert by_key["students/label-free-over-teacher/vgg13-6/i3"]["paper_claim"] == "mask/label-free-students"
    assert by_key["students/masked-over-plain/vgg13-6/i3"]["configuration"].startswith("other: ")   # not the paper's recipe
    assert "WRN-10-2 for WRN-40-4" in by_key["students/masked-over-plain/wrn-10-2/i3"]["configuration"]
    assert by_key["bias/noise-explains-fall/vgg16+lb"]["margin"] == P.NOISE_MARGIN
    keys = {(c.notebook, c.key) for c in P.CAVEATS}
    assert keys <= {(nb, c["key"]) for nb, res in results.items() for c in res.claims}, "a caveat names a key no step makes"


def test_students_parity_compares_two_students_on_one_arm(tmp_path):
    # Table 4's parity (mask/students-architecture-parity): the small student's masked accuracy minus the deeper one's on the
    # same masked test images, non-inferior at PARITY_MARGIN, gated by the premise that the deeper one wins on plain data
    from attribkit.papers import attribution_masks as P
    from attribkit.papers.attribution_masks.protocol import _students_result
    s = tiny_setup(tmp_path, students=dict(P.BUDGETS["cpu"]["students"], floor=None))
    small, deep = "NIB VGG13-6", "WRN-10-2"
    arms = {"w/o": None, "w/ i=3": ("gxsi", 3, "label"), "w/ i=10": ("gxsi", 10, "label")}
    hits = lambda n: (torch.arange(100) < n).double()   # n of the 100 shared test images right

    def result(correct: dict):
        m = dict(hit={}, acc={}, kept={}, teacher_te={}, teacher_hit={}, first=small, n_train=16, n_full=16)
        for k in s.seeds:
            m["teacher_hit"][k] = hits(90); m["teacher_te"][k] = 0.9
            for (sn, arm), per_seed in correct.items():
                m["hit"][sn, arm, k] = hits(per_seed[k]); m["acc"][sn, arm, k] = per_seed[k] / 100
        return _students_result(s, {small: (None, {}), deep: (None, {"width": 2})}, arms, m)

    same, pa = {0: 98, 1: 97, 2: 99}, "students/parity-premise/vgg13-6-vs-wrn-10-2"
    correct = {(small, "w/o"): {0: 80, 1: 82, 2: 81}, (deep, "w/o"): {0: 90, 1: 93, 2: 91},
               (small, "w/ i=3"): same, (deep, "w/ i=3"): same,                            # equal: parity
               (small, "w/ i=10"): {0: 90, 1: 91, 2: 89}, (deep, "w/ i=10"): {0: 95, 1: 97, 2: 94}}   # −5.3 pt: worse
    res = result(correct)
    c = {k: res.claim(k) for k in (pa, "students/parity/vgg13-6-vs-wrn-10-2/i3", "students/parity/vgg13-6-vs-wrn-10-2/i10")}
    assert [x["role"] for x in c.values()] == ["control", "evidence", "evidence"]
    assert c[pa]["verdict"] == "holds" and c[pa]["effect"] == pytest.approx((10 + 11 + 10) / 3)   # deep − small, plain
    i3, i10 = c["students/parity/vgg13-6-vs-wrn-10-2/i3"], c["students/parity/vgg13-6-vs-wrn-10-2/i10"]
    assert (i3["effect"], i3["margin"], i3["verdict"]) == (0.0, P.PARITY_MARGIN, "holds")
    assert i10["effect"] == pytest.approx(-16 / 3) and i10["verdict"] == "fails"
    assert list(i3["gated_by"]) == [pa]
    assert i3["configuration"].startswith("other: ") and "WRN-10-2 for WRN-40-4" in i3["configuration"]
    # without the premise (the deeper student no better on plain data) the parity speaks for nothing, and the diagnosis says so
    flat = {**correct, (deep, "w/o"): {0: 75, 1: 76, 2: 74}}
    res = result(flat)
    assert res.claim(pa)["verdict"] == "fails"
    p3 = res.claim("students/parity/vgg13-6-vs-wrn-10-2/i3")
    assert p3["verdict"] == "not evaluable" and pa in p3["reasons"][0]
    assert "premise of the parity is absent" in res.diagnoses["students/parity/vgg13-6-vs-wrn-10-2/i3"]
    assert "parity" not in " ".join(c["key"] for c in result({k: v for k, v in correct.items() if k[0] == small}).claims
                                    if c["verdict"] != "not evaluable")
