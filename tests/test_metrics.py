"Oracle, hand-computed, control and bad-input tests of attribkit.metrics."
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score

from attribkit import core
from attribkit.metrics import (pixel_flipping, insertion_deletion, perturbation_rows, fill_values, removal_ranks,
                               pointing_game, point_acc, mask_auc, roc_auc, multilabel_map, multilabel_f1,
                               roar, mprt, spearman, ssim, evaluate_pixel_flipping)

D = torch.float64


from conftest import make_cnn, make_linear
def linear(k=3, c=1, h=2, w=2, seed=0): return make_linear(k, c * h * w, seed)


def true_attr(m, x, t):
    "Exact attribution of a bias-free linear model: W_t ⊙ x."
    return m[1].weight.detach()[t].view_as(x) * x


# ---------------------------------------------------------------- hand-computed curves


def test_hand_computed_logit_and_prob_curves():
    m = linear(k=2)
    with torch.no_grad(): m[1].weight.copy_(torch.tensor([[4., 1., 3., 2.], [0., 0., 0., 0.]], dtype=D))
    x = torch.ones(1, 1, 2, 2, dtype=D)
    a = true_attr(m, x, torch.tensor([0]))
    morf = pixel_flipping(m, x, a, 0, steps=4, softmax=False)
    assert torch.allclose(morf.curves, torch.tensor([[10., 6., 3., 1., 0.]], dtype=D))
    assert torch.allclose(morf.auc, torch.tensor([3.75], dtype=D))
    lerf = pixel_flipping(m, x, a, 0, order="lerf", steps=4, softmax=False)
    assert torch.allclose(lerf.curves, torch.tensor([[10., 9., 7., 4., 0.]], dtype=D))
    assert torch.allclose(lerf.auc, torch.tensor([6.25], dtype=D))
    # two classes with logits (s, 0): the target probability is sigmoid(s)
    p = pixel_flipping(m, x, a, 0, steps=4)
    s = torch.tensor([10., 6., 3., 1., 0.], dtype=D)
    assert torch.allclose(p.curves[0], torch.sigmoid(s))
    assert torch.allclose(p.auc[0], torch.trapezoid(torch.sigmoid(s), torch.linspace(0, 1, 5, dtype=D)))
    # 2 steps over 4 pixels: two pixels per step
    assert torch.allclose(pixel_flipping(m, x, a, 0, steps=2, softmax=False).curves, torch.tensor([[10., 3., 0.]], dtype=D))
    # element unit on 2 channels: relevance per element, channels removed separately
    m2 = nn.Sequential(nn.Flatten(), nn.Linear(2, 1, bias=False)).double()
    with torch.no_grad(): m2[1].weight.copy_(torch.tensor([[1., 2.]], dtype=D))
    x2 = torch.ones(1, 2, 1, 1, dtype=D)
    e = pixel_flipping(m2, x2, x2 * torch.tensor([1., 2.], dtype=D).view(1, 2, 1, 1), 0, steps=2, unit="element", softmax=False)
    assert torch.allclose(e.curves, torch.tensor([[3., 1., 0.]], dtype=D))
    px = pixel_flipping(m2, x2, torch.ones_like(x2), 0, steps=1, unit="pixel", softmax=False)
    assert torch.allclose(px.curves, torch.tensor([[3., 0.]], dtype=D))


def test_insertion_deletion_hand_and_blur_start():
    m = linear(k=2)
    with torch.no_grad(): m[1].weight.copy_(torch.tensor([[4., 1., 3., 2.], [0., 0., 0., 0.]], dtype=D))
    x = torch.ones(1, 1, 2, 2, dtype=D)
    a = true_attr(m, x, torch.tensor([0]))
    ins = insertion_deletion(m, x, a, 0, mode="insertion", steps=4, baseline=0.0, softmax=False)
    assert torch.allclose(ins.curves, torch.tensor([[0., 4., 7., 9., 10.]], dtype=D))
    assert torch.allclose(ins.auc, torch.tensor([0.25 * (4 + 7 + 9 + 5)], dtype=D))
    dele = insertion_deletion(m, x, a, 0, steps=4, softmax=False)
    assert torch.allclose(dele.curves, pixel_flipping(m, x, a, 0, steps=4, softmax=False).curves)
    # default insertion baseline is the blurred image: the first point scores the blurred input
    g = torch.Generator().manual_seed(0)
    m3, x3 = linear(k=3, c=3, h=8, w=8), torch.randn(4, 3, 8, 8, generator=g, dtype=D)
    c = insertion_deletion(m3, x3, torch.randn(x3.shape, generator=g, dtype=D), 1, mode="insertion", steps=5)
    blurred = fill_values(x3, "blur")
    assert torch.allclose(c.curves[:, 0], m3(blurred).softmax(1)[:, 1].detach())
    assert torch.allclose(c.curves[:, -1], m3(x3).softmax(1)[:, 1].detach())


def test_chunking_does_not_change_results():
    g = torch.Generator().manual_seed(1)
    m, x = linear(k=4, c=3, h=5, w=5), torch.randn(7, 3, 5, 5, generator=g, dtype=D)
    a = torch.randn(x.shape, generator=g, dtype=D)
    ref = pixel_flipping(m, x, a, 2, steps=6, internal_batch_size=1000)
    for ibs in (1, 5, 7, 20):
        r = pixel_flipping(m, x, a, 2, steps=6, internal_batch_size=ibs)
        assert torch.allclose(r.curves, ref.curves, rtol=1e-10, atol=1e-12)
    assert torch.allclose(pixel_flipping(m, x, a, 2, steps=6).curves, ref.curves)  # auto batch size


# ---------------------------------------------------------------- controls


def _aten_ops(fn) -> list[str]:
    "The top-level aten operators one call of `fn` runs (CPU profiler): what a GPU would launch, kernel for kernel."
    from torch.profiler import profile, ProfilerActivity
    fn()                                                   # first call: per-model probes and caches
    with profile(activities=[ProfilerActivity.CPU]) as p: fn()
    return [e.name for e in p.events() if e.name.startswith("aten::")
            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]

@pytest.mark.parametrize("metric", [pixel_flipping, insertion_deletion])
def test_operator_count_is_flat_in_steps_and_images(metric):
    "Ranking, building the perturbed rows and scoring are a fixed set of batched operators: no per-step or per-image loop."
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
    def ops(n, steps):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, 3, 8, 8, generator=g); a = torch.randn(x.shape, generator=g)
        return _aten_ops(lambda: metric(model, x, a, target=1, steps=steps, internal_batch_size=4096))
    small = ops(2, 3)
    for n, steps in ((2, 40), (64, 3), (64, 40)): assert ops(n, steps) == small, (n, steps)
    assert small.count("aten::conv2d") == 1                # one forward pass over all rows

def test_true_weights_beat_random_on_morf_and_lerf():
    g = torch.Generator().manual_seed(0)
    m, x = linear(k=5, c=3, h=6, w=6), torch.randn(32, 3, 6, 6, generator=g, dtype=D)
    t = core.predict_target(m, x)
    a = core.attribute(m, x, t, method=true_attr)
    r = torch.randn(x.shape, generator=g, dtype=D)
    for sm in (False, True):
        tm, rm = pixel_flipping(m, x, a, t, "morf", softmax=sm).mean_auc, pixel_flipping(m, x, r, t, "morf", softmax=sm).mean_auc
        tl, rl = pixel_flipping(m, x, a, t, "lerf", softmax=sm).mean_auc, pixel_flipping(m, x, r, t, "lerf", softmax=sm).mean_auc
        assert tm < rm - 0.05 * abs(rm) and tl > rl + 0.05 * abs(rl), (sm, tm, rm, tl, rl)


def test_fill_variants_change_only_removed_pixels():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 3, 6, 6, generator=g, dtype=D)
    a = torch.randn(x.shape, generator=g, dtype=D)
    tensor_fill = torch.full((3, 6, 6), 7.0, dtype=D)
    for fill in ("zero", "mean", "blur", tensor_fill, 2.5):
        rows = perturbation_rows(x, a, steps=4, fill=fill, seed=0)
        fv = fill_values(x, fill)
        ranks = removal_ranks(a.sum(1).flatten(1), seed=0).view(3, 1, 6, 6)
        for j, n in enumerate((0, 9, 18, 27, 36)):
            removed = (ranks < n).expand_as(x)
            assert torch.equal(rows[:, j][~removed], x[~removed]), fill
            assert torch.equal(rows[:, j][removed], fv[removed]), fill
            assert int(removed[:, 0].sum()) == 3 * n
    assert torch.allclose(fill_values(x, "mean")[:, :, 0, 0], x.mean((2, 3)))
    assert torch.equal(fill_values(x, tensor_fill)[1], tensor_fill)


def test_lerf_ranks_least_relevant_first_and_ties_random():
    a = torch.tensor([[[[3., 1.], [2., 0.]]]])
    rows = perturbation_rows(torch.ones(1, 1, 2, 2), a, steps=4, order="lerf")
    assert rows[0, 1, 0, 1, 1] == 0 and rows[0, 1].sum() == 3     # the least relevant pixel goes first
    ties = torch.zeros(2, 1, 10, 10)
    r1 = perturbation_rows(torch.ones(2, 1, 10, 10), ties, steps=10, seed=1)
    r2 = perturbation_rows(torch.ones(2, 1, 10, 10), ties, steps=10, seed=2)
    assert not torch.equal(r1, r2)


# ---------------------------------------------------------------- reproducibility


def test_seeded_reproducibility():
    g = torch.Generator().manual_seed(3)
    m, x = linear(k=3, c=3, h=6, w=6), torch.randn(8, 3, 6, 6, generator=g, dtype=D)
    a = torch.relu(torch.randn(x.shape, generator=g, dtype=D))          # many exact zeros → ties
    c1 = pixel_flipping(m, x, a, 0, order="lerf", seed=11).curves
    c2 = pixel_flipping(m, x, a, 0, order="lerf", generator=torch.Generator().manual_seed(11)).curves
    c3 = pixel_flipping(m, x, a, 0, order="lerf", seed=12).curves
    assert torch.equal(c1, c2) and not torch.equal(c1, c3)
    ev = [evaluate_pixel_flipping(m, (x, torch.zeros(8, dtype=torch.long)), true_attr, batch_size=3, progress=False,
                                  seed=4).auc for _ in range(2)]
    assert torch.equal(ev[0], ev[1])


def test_evaluate_matches_single_call_and_uses_registry():
    @core.register("_metrics_test_gxi")
    class _G(core.Attribution):
        def attribute(self, inputs, target=None):
            with core.model_scope(self.model): return core.target_grad(self.model, inputs, target) * inputs
    try:
        g = torch.Generator().manual_seed(5)
        m, x = linear(k=3, c=3, h=4, w=4), torch.randn(10, 3, 4, 4, generator=g, dtype=D)
        y = torch.randint(0, 3, (10,), generator=g)
        ds = evaluate_pixel_flipping(m, (x, y), "_metrics_test_gxi", batch_size=10, progress=False, seed=0, steps=8)
        one = pixel_flipping(m, x, true_attr(m, x, y), y, steps=8, seed=0)
        assert torch.allclose(ds.auc, one.auc) and torch.equal(ds.fractions, one.fractions)
    finally:
        core._REGISTRY.pop("_metrics_test_gxi", None)


# ---------------------------------------------------------------- localisation


def test_mask_auc_matches_sklearn_with_ties_and_skips_empty():
    g = torch.Generator().manual_seed(0)
    h = torch.randint(0, 5, (6, 1, 8, 8), generator=g).double()        # many ties
    mk = torch.rand(6, 8, 8, generator=g) < 0.3
    mk[4] = False; mk[5] = True                                         # empty and full masks
    res = mask_auc(h, mk)
    for i in range(4):
        ref = roc_auc_score(mk[i].flatten().numpy(), h[i, 0].flatten().numpy())
        assert abs(res.scores[i].item() - ref) < 1e-12
    assert math.isnan(res.scores[4]) and math.isnan(res.scores[5]) and res.skipped == 2
    assert abs(res.mean - np.mean([roc_auc_score(mk[i].flatten(), h[i, 0].flatten()) for i in range(4)])) < 1e-12
    s = torch.randn(3, 50, generator=g); y = torch.rand(3, 50, generator=g) < 0.5
    assert np.allclose(roc_auc(s, y).numpy(), [roc_auc_score(y[i], s[i]) for i in range(3)])


def test_pointing_game_matches_dilation_brute_force():
    g = torch.Generator().manual_seed(1)
    h = torch.rand(20, 3, 24, 24, generator=g)
    mk = torch.zeros(20, 24, 24, dtype=torch.bool)
    for i in range(20):
        r, c = torch.randint(0, 20, (2,), generator=g).tolist()
        mk[i, r:r + 4, c:c + 4] = True
    for tol in (0, 3, 7.5):
        res = pointing_game(h, mk, tolerance=tol)
        for i in range(20):
            idx = int(h[i].sum(0).flatten().argmax()); p = (idx // 24, idx % 24)
            pts = mk[i].nonzero().double()
            hit = float(((pts - torch.tensor(p, dtype=D)) ** 2).sum(1).min() <= tol ** 2)
            assert res.scores[i].item() == hit
    assert torch.equal(pointing_game(h, mk, tolerance=0).scores, point_acc(h, mk).scores)


def test_point_acc_first_argmax_and_union_quirk():
    h = torch.zeros(2, 4, 4); h[:, 0, 1] = 1; h[:, 3, 3] = 1           # two maxima: the first in row-major order counts
    mk = torch.zeros(2, 4, 4, dtype=torch.bool); mk[0, 3, 3] = True; mk[1, 0, 1] = True
    assert point_acc(h, mk).scores.tolist() == [0.0, 1.0]
    assert point_acc(h, mk.flip(0), image_ids=[7, 7]).scores.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- multi-label


def _multilabel(seed=0, n=40, k=6):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, k)) < 0.35).astype(int)
    y[np.arange(n), rng.integers(0, k, n)] = 1                          # every sample has a positive
    s = np.round(rng.normal(size=(n, k)) + 1.5 * y, 1)                  # rounding makes ties
    return torch.tensor(s), torch.tensor(y), s, y


def test_map_matches_sklearn_class_and_sample():
    ts, ty, s, y = _multilabel()
    assert abs(multilabel_map(ts, ty, "class") - average_precision_score(y, s, average="macro")) < 1e-12
    ref = np.mean([average_precision_score(y[i], s[i]) for i in range(len(y))])
    assert abs(multilabel_map(ts, ty, "sample") - ref) < 1e-12
    assert abs(multilabel_map(ts, ty, average="sample") - average_precision_score(y, s, average="samples")) < 1e-12


def test_f1_matches_sklearn():
    ts, ty, s, y = _multilabel(1)
    for avg, sk in (("sample", "samples"), ("class", "macro"), ("micro", "micro")):
        for thr in (0.0, 0.5, 1.0):
            ref = f1_score(y, (s >= thr).astype(int), average=sk, zero_division=0)
            assert abs(multilabel_f1(ts, ty, thr, on="logit", average=avg) - ref) < 1e-12
        ref = f1_score(y, (1 / (1 + np.exp(-s)) >= 0.7).astype(int), average=sk, zero_division=0)
        assert abs(multilabel_f1(ts, ty, 0.7, on="prob", average=avg) - ref) < 1e-12
    seed000 = f1_score(y, (s >= 0.5).astype(int), average="samples", zero_division=0)    # raw logit >= 0.5
    assert abs(multilabel_f1(ts, ty, threshold=0.5, on="logit", average="sample") - seed000) < 1e-12
    with pytest.warns(DeprecationWarning, match="average='sample'"):          # scikit-learn's spelling still works
        assert abs(multilabel_f1(ts, ty, on="logit", average="samples") - seed000) < 1e-12


def test_every_metric_declares_its_direction():
    from attribkit.metrics import METRICS, higher_is_better
    assert {"pixel_flipping_morf", "pixel_flipping_lerf", "deletion", "insertion", "pointing_game", "point_acc",
            "mask_auc", "map_class", "map_sample", "f1_sample", "roar", "mprt"} <= set(METRICS)
    down = {n for n in METRICS if not higher_is_better(n)}
    assert down == {"pixel_flipping_morf", "deletion", "roar", "mprt"}
    for m in METRICS.values():                                   # the docstring says the same
        assert "better" in m.fn.__doc__, m.name
    m, x = linear(), torch.randn(1, 1, 2, 2, dtype=D)
    a = true_attr(m, x, 0)
    assert torch.equal(METRICS["deletion"](m, x, a, 0).auc, insertion_deletion(m, x, a, 0, mode="deletion").auc)
    with pytest.raises(ValueError, match="unknown metric"): higher_is_better("accuracy")


# ---------------------------------------------------------------- ROAR and MPRT


from roar_toy import roar_data as _roar_data, roar_factory as _factory, roar_train
_train = roar_train(60)


def test_roar_true_attribution_beats_random_and_is_seeded(tmp_path):
    g = torch.Generator().manual_seed(0)
    tr, te = _roar_data(200, g), _roar_data(100, g)
    w = torch.zeros(1, 5, 5); w[0, 1:3, 1:3] = 1
    fn = lambda x, y: w * x * (2.0 * y - 1).view(-1, 1, 1, 1)
    kw = dict(fractions=(0.2,), fill="zero", progress=False, seed=3, cache_dir=str(tmp_path))
    r1 = roar(tr, te, fn, _factory, _train, **kw)
    assert r1.fractions.tolist() == [0.0, 0.2]
    m = r1.mean()
    assert m["attribution"][0] > 0.9 and m["attribution"][1] < 0.7 and m["random"][1] > 0.8, m
    assert (tmp_path / "roar_train_attribution.pt").exists()
    r2 = roar(tr, te, fn, _factory, _train, **kw)                    # second run reads the cached ranks
    assert all(torch.equal(r1.scores[k], r2.scores[k]) for k in r1.scores)
    r3 = roar(tr, te, fn, _factory, _train, **kw, baseline=False)    # without the unmasked baseline run
    assert r3.fractions.tolist() == [0.2] and all(torch.equal(r3.scores[k], r1.scores[k][1:]) for k in r1.scores)


def test_mprt_untouched_model_seeded_and_sensitive():
    g = torch.Generator().manual_seed(0)
    m = make_cnn(1, 4, 8, 3)
    x = torch.randn(4, 1, 8, 8, generator=g, dtype=D)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    def sal(model, inputs, target):
        with core.model_scope(model): return core.target_grad(model, inputs, target)
    r = mprt(m, x, method=sal, seed=1)
    assert r.layers == ["3", "0"] and r.similarity.shape == (2, 4)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert all(len(mod._forward_hooks) == 0 for mod in m.modules())
    assert torch.equal(r.similarity, mprt(m, x, method=sal, seed=1).similarity)
    assert r.mean()[-1] < 0.9                                          # fully randomised → map changed
    ri = mprt(m, x, method=sal, order="independent", similarity="ssim", seed=1)
    assert ri.similarity.shape == (2, 4) and (ri.similarity <= 1 + 1e-9).all()


def test_spearman_matches_scipy_and_ssim_identity():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 6, (3, 40), generator=g).double(); b = a + torch.randint(0, 4, (3, 40), generator=g)
    assert np.allclose(spearman(a, b).numpy(), [spearmanr(a[i], b[i]).statistic for i in range(3)])
    x = torch.rand(2, 9, 9, generator=g)
    assert torch.allclose(ssim(x, x), torch.ones(2, dtype=D))
    assert (ssim(x, torch.rand(2, 9, 9, generator=g)) < 0.5).all()


# ---------------------------------------------------------------- bad input


def test_bad_inputs_name_the_argument():
    m, x = linear(k=2, c=1, h=4, w=4), torch.randn(2, 1, 4, 4, dtype=D)
    a = torch.randn_like(x)
    with pytest.raises(ValueError, match="`attributions` must have the shape"):
        pixel_flipping(m, x, a[:, :, :3], 0)
    with pytest.raises(ValueError, match="`attributions` contains NaN"):
        pixel_flipping(m, x, torch.full_like(x, float("nan")), 0)
    with pytest.raises(ValueError, match="`steps`"):
        pixel_flipping(m, x, a, 0, steps=0)
    with pytest.raises(ValueError, match="`order`"):
        pixel_flipping(m, x, a, 0, order="up")
    with pytest.raises(ValueError, match="`fill`"):
        pixel_flipping(m, x, a, 0, fill="gray")
    with pytest.raises(ValueError, match="`fill`"):
        pixel_flipping(m, x, a, 0, fill=torch.zeros(3, 3))
    with pytest.raises(ValueError, match="`mode`"):
        insertion_deletion(m, x, a, 0, mode="both")
    with pytest.raises(ValueError, match="`masks` must be binary"):
        mask_auc(a, torch.full((2, 4, 4), 0.5))
    with pytest.raises(ValueError, match="`masks`"):
        pointing_game(a, torch.ones(2, 5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="`attributions` contains NaN"):
        mask_auc(torch.full_like(a, float("nan")), torch.ones(2, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="`labels` must be binary"):
        multilabel_map(torch.randn(3, 2), torch.full((3, 2), 2))
    for f in ((0.0, 0.5), (0.5, 1.0), (1.2,)):
        with pytest.raises(ValueError, match="`fractions`"):
            roar((x, torch.zeros(2)), (x, torch.zeros(2)), lambda x, y: x, _factory, _train, fractions=f, progress=False)
