"Recursive attribution masks and MIA: identities on no-implicit-bias models, batching, controls, bad input."
import pytest, torch
from torch import nn
import attribkit
from attribkit.core import attribute, target_grad
from attribkit.mask import attribution_mask, implicit_bias, mask_dataset, masked_input_accuracy
from attribkit.papers.attribution_masks import mia_curves
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


def test_mia_curves_random_control_is_seeded():
    m, (x, y) = nib(), data()
    c1 = mia_curves(m, (x, y), {"random": "random"}, 3, seed=5, progress=False)
    c2 = mia_curves(m, (x, y), {"random": "random"}, 3, seed=5, progress=False)
    assert c1 == c2


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
    b = P.budget("paper", dry_run=True)
    assert b["seeds"] == 1 and max(b["n_mia"], b["n_mia_table2"], b["n_score"], b["n_test"]) <= 4
    assert b["train_images"] <= 2 * b["train_batch"] and P.student_recipe("paper", dry_run=True)["epochs"] == 1


def test_paper_nib_weights_of_another_architecture_fail_before_training(tmp_path, monkeypatch):
    "A pre-trained NIB VGG file that holds another model: nib_setup at paper scale fails naming the file instead of loading or training."
    from attribkit.fake_data import write_cifar10
    from attribkit.models import lenet_300_100
    from attribkit.papers import attribution_masks as P
    write_cifar10(tmp_path, n_train=10, n_test=10)
    p = tmp_path / "weights" / P.weights_name("vgg13-6", "cifar10", 0); p.parent.mkdir()
    torch.save(lenet_300_100().state_dict(), p)
    monkeypatch.setattr(P.M, "train_cached", lambda *a, **k: pytest.fail("trained instead of failing"))
    with pytest.raises(ValueError) as e:
        P.nib_setup("paper", cfg="vgg13-6", data_root=tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"weights file {p} does not fit attribkit.models.nib_vgg(**{{'cfg': 'vgg13-6', 'num_classes': 10")
    assert "missing " in msg and "features.0.weight" in msg
