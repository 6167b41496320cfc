"RISE: ranking on a linear model, seeding, batching invariance, bad inputs and hygiene (attribkit.attr.perturbation)."
import pytest, torch
from torch import nn
from scipy.stats import spearmanr
from attribkit.core import attribute
from attribkit.attr.perturbation import RISE, rise_masks


def assert_close(a, b, rtol=1e-7, atol=1e-9):
    "Shape- and value-equality check (torch.testing.assert_close lazily imports torch.distributed, ~1-4 s)."
    assert a.shape == b.shape, (a.shape, b.shape)
    assert torch.allclose(a, b, rtol=rtol, atol=atol), (a - b).abs().max()


def bump_linear(H=8, centre=(2.5, 5.0), scale=1.0):
    "Linear 2-class model whose class-1 weights form a smooth bump; class 0 has zero weights."
    lin = nn.Sequential(nn.Flatten(), nn.Linear(H * H, 2)).double()
    i, j = torch.meshgrid(torch.arange(H), torch.arange(H), indexing="ij")
    w = torch.exp(-((i - centre[0]) ** 2 + (j - centre[1]) ** 2) / H).double().flatten() * scale
    with torch.no_grad():
        lin[1].weight.zero_(); lin[1].weight[1] = w; lin[1].bias.zero_()
    return lin, w


@pytest.mark.parametrize("centre, seed", [((2.5, 5.0), 0), ((6.0, 1.0), 3), ((4.0, 4.0), 11)])
def test_rise_ranks_linear_weights(centre, seed):
    lin, w = bump_linear(centre=centre)
    x = torch.ones(1, 1, 8, 8, dtype=torch.float64)
    s = RISE(lin).attribute(x, 1, n_masks=8000, cell_size=2, score="logit", seed=seed)
    assert s.shape == x.shape and s.dtype == x.dtype and not s.requires_grad
    assert spearmanr(s.flatten(), w).statistic > 0.9


def test_softmax_score_is_the_target_probability():
    lin, _ = bump_linear(scale=0.5)
    probs = nn.Sequential(lin, nn.Softmax(1))
    x = torch.rand(2, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    a = RISE(lin).attribute(x, [1, 0], n_masks=500, seed=4)
    b = RISE(probs).attribute(x, [1, 0], n_masks=500, seed=4, score="logit")
    assert_close(a, b)
    assert (a >= 0).all()


def test_seeded_deterministic_and_batching_invariant():
    lin, _ = bump_linear()
    lin = nn.Sequential(nn.Conv2d(2, 1, 1), lin).double()  # two input channels
    x = torch.rand(3, 2, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    r = RISE(lin)
    a = r.attribute(x, 1, n_masks=300, seed=5, internal_batch_size=64)
    assert_close(r.attribute(x, 1, n_masks=300, seed=5, internal_batch_size=64), a, rtol=0, atol=0)
    assert_close(r.attribute(x, 1, n_masks=300, seed=5, internal_batch_size=7), a)
    assert_close(r.attribute(x, 1, n_masks=300, generator=torch.Generator().manual_seed(5)), a)
    assert not torch.allclose(r.attribute(x, 1, n_masks=300, seed=6), a)
    one = attribute(lin, x, 1, method="rise", n_masks=300, seed=5, channels="one")
    assert one.shape == (3, 1, 8, 8)
    assert_close(one.expand_as(x), a)
    # each sample's map depends only on that sample
    assert_close(r.attribute(x[1:2], 1, n_masks=300, seed=5), a[1:2])


def test_masks_keep_probability_and_range():
    m = rise_masks(3000, (12, 10), cell_size=(3, 2), p=0.25, generator=torch.Generator().manual_seed(1))
    assert m.shape == (3000, 12, 10) and m.min() >= 0 and m.max() <= 1 + 1e-6
    assert abs(m.mean().item() - 0.25) < 0.01


@pytest.mark.parametrize("kw, msg", [
    (dict(n_masks=0), "`n_masks`"), (dict(internal_batch_size=0), "`internal_batch_size`"),
    (dict(p=0.0), "`p`"), (dict(cell_size=0), "`cell_size`"), (dict(score="prob"), "`score`"),
    (dict(channels="sum"), "`channels`"),
])
def test_bad_arguments(kw, msg):
    lin, _ = bump_linear()
    with pytest.raises(ValueError, match=msg):
        RISE(lin).attribute(torch.ones(1, 1, 8, 8, dtype=torch.float64), 1, **kw)


def test_bad_inputs():
    lin, _ = bump_linear()
    with pytest.raises(ValueError, match="`inputs` must have 4 dimensions"):
        RISE(lin).attribute(torch.ones(1, 64, dtype=torch.float64), 1)
    with pytest.raises(ValueError, match="`target` out of range"):
        RISE(lin).attribute(torch.ones(1, 1, 8, 8, dtype=torch.float64), 2, n_masks=10)


def test_hygiene_also_after_error():
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(72, 3)).double().train()
    m[0].bias.requires_grad_(False)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    flags = [p.requires_grad for p in m.parameters()]
    x = torch.rand(2, 1, 8, 8, dtype=torch.float64)
    RISE(m).attribute(x, 0, n_masks=50)
    with pytest.raises(ValueError):
        RISE(m).attribute(x, 5, n_masks=50)
    assert all(torch.equal(state[k], v) for k, v in m.state_dict().items())
    assert [p.requires_grad for p in m.parameters()] == flags
    assert all(mod.training for mod in m.modules())
    assert sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) for mod in m.modules()) == 0
