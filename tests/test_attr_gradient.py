"Captum parity, identities, hygiene, determinism and bad-input errors of attribkit.attr.gradient."
import math
import numpy as np
import pytest
import torch
from torch import nn
from attribkit.core import attribute
from attribkit.attr.gradient import (Saliency, InputXGradient, GradientXSign, PositiveInputXGradient,
                                     IntegratedGradients, SmoothGrad, VarGrad, GuidedIG, quadrature_points)

captum_attr = pytest.importorskip("captum.attr")


from conftest import make_cnn, make_inputs, make_linear
def relu_cnn(bias=True, seed=0): return make_cnn(2, 3, 6, 4, pool="max", bias=bias, seed=seed)
def smooth_cnn(seed=0): return make_cnn(2, 3, 6, 4, pool="avg", act=nn.Softplus, seed=seed)
def data(n=3, seed=1): return make_inputs(n, 2, 6, seed=seed), torch.tensor([0, 3, 1, 2, 0][:n])


def close(a, b, atol=1e-7, rtol=1e-7):
    "Shapes equal and |a − b| ≤ atol + rtol·|b| (torch.testing.assert_close costs seconds of lazy imports)."
    assert a.shape == b.shape, (a.shape, b.shape)
    err = (a - b).abs() - rtol * b.abs()
    assert err.max().item() <= atol, f"max excess error {err.max().item():.3g} > {atol}"


def logit(m, x, y):
    with torch.no_grad():
        return m(x).gather(1, y[:, None])[:, 0]


# ---------------------------------------------------------------- Captum parity (float64, 1e-6)
def test_saliency_gxi_match_captum():
    m, (x, y) = relu_cnn(), data()
    close(Saliency(m).attribute(x, y, abs=False),
                               captum_attr.Saliency(m).attribute(x, target=y, abs=False), atol=1e-6, rtol=0)
    close(Saliency(m).attribute(x, y), captum_attr.Saliency(m).attribute(x, target=y), atol=1e-6, rtol=0)   # |∇| by default
    close(attribute(m, x, y, method="saliency"), Saliency(m).attribute(x, y, abs=False), atol=0, rtol=0)   # the name keeps the sign
    close(InputXGradient(m).attribute(x, y),
                               captum_attr.InputXGradient(m).attribute(x, target=y), atol=1e-6, rtol=0)
    close(Saliency(m, abs=True).attribute(x, y),
                               captum_attr.Saliency(m).attribute(x, target=y, abs=True), atol=1e-6, rtol=0)


@pytest.mark.parametrize("quad", ["riemann_left", "riemann_right", "riemann_middle", "gausslegendre"])
def test_ig_matches_captum(quad):
    m, (x, y) = relu_cnn(), data()
    b = torch.randn(1, 2, 6, 6, dtype=torch.float64) * 0.1
    ours, d = IntegratedGradients(m, n_steps=20, quadrature=quad).attribute(x, target=y, baselines=b, return_convergence_delta=True)
    ref, dref = captum_attr.IntegratedGradients(m).attribute(x, baselines=b.expand_as(x), target=y, n_steps=20,
                                                             method=quad, return_convergence_delta=True)
    close(ours, ref, atol=1e-6, rtol=0)
    close(d, dref, atol=1e-6, rtol=0)


def test_ig_trapezoid_weights_sum_to_one_unlike_captum():
    a, w = quadrature_points(10, "riemann_trapezoid")
    assert math.isclose(w.sum().item(), 1.0) and a[0] == 0 and a[-1] == 1
    # on a linear model IG is exact for weights summing to 1
    lin = make_linear(4, 72, bias=True)
    x, y = data()
    ours = IntegratedGradients(lin, n_steps=10, quadrature="riemann_trapezoid").attribute(x, target=y)
    close(ours, InputXGradient(lin).attribute(x, y), atol=1e-12, rtol=0)


def test_smoothgrad_noise_zero_matches_noisetunnel_stdev_zero():
    m, (x, y) = relu_cnn(), data()
    ref = captum_attr.NoiseTunnel(captum_attr.Saliency(m)).attribute(x, nt_type="smoothgrad", nt_samples=4,
                                                                     stdevs=0.0, target=y, abs=False)
    close(SmoothGrad(m, n_samples=4, noise_level=0.0).attribute(x, y), ref, atol=1e-6, rtol=0)
    ref = captum_attr.NoiseTunnel(captum_attr.InputXGradient(m)).attribute(x, nt_type="vargrad", nt_samples=4,
                                                                           stdevs=0.0, target=y)
    close(VarGrad(m, base="gxi", n_samples=4, noise_level=0.0).attribute(x, y), ref,
                               atol=1e-6, rtol=0)


def test_smoothgrad_noise_scale_relative_to_range():
    "With a linear model, SmoothGrad(gxi) = x⊙w + E[ε]⊙w: the empirical noise std must be level·(max−min)."
    lin = make_linear(4, 72)
    with torch.no_grad(): lin[1].weight.fill_(1.0)
    x, y = data(2)
    x[1] *= 10
    n = 400
    v = VarGrad(lin, base="gxi", n_samples=n, noise_level=0.1).attribute(x, y, seed=0)  # Var(ε)·w² = σ²
    sigma = 0.1 * (x.flatten(1).amax(1) - x.flatten(1).amin(1))
    close(v.flatten(1).mean(1).sqrt(), sigma, rtol=0.05, atol=0)


# ---------------------------------------------------------------- identities
def test_ig_completeness_n64_smooth_model():
    m, (x, y) = smooth_cnn(), data()
    a = IntegratedGradients(m, n_steps=64).attribute(x, target=y)
    df = logit(m, x, y) - logit(m, torch.zeros_like(x), y)
    assert ((a.flatten(1).sum(1) - df).abs() <= 1e-3 * df.abs()).all()


def test_nib_relu_gxi_equals_ig0_and_is_complete():
    m, (x, y) = relu_cnn(bias=False), data()
    gxi = InputXGradient(m).attribute(x, y)
    close(gxi, IntegratedGradients(m, n_steps=7).attribute(x, target=y), atol=1e-10, rtol=0)
    close(gxi.flatten(1).sum(1), logit(m, x, y), atol=1e-10, rtol=0)


def test_gxsi_pgxi_definitions():
    m, (x, y) = relu_cnn(), data()
    g = Saliency(m, abs=False).attribute(x, y)
    close(GradientXSign(m).attribute(x, y), torch.sign(x) * g)
    close(PositiveInputXGradient(m).attribute(x, y), g.clamp_min(0) * x)
    close(PositiveInputXGradient(m, variant="abs").attribute(x, y), g.abs() * x)


def test_ig_relu_inside_is_integral_of_relu():
    m, (x, y) = relu_cnn(), data()
    b = 0.2
    p2 = IntegratedGradients(m, n_steps=5, quadrature="riemann_left", relu_inside=True).attribute(x, target=y, baselines=b)
    ref = sum(0.2 * ((x - b) * Saliency(m, abs=False).attribute(b + a * (x - b), y)).clamp_min(0) for a in (0, .2, .4, .6, .8))
    close(p2, ref, atol=1e-12, rtol=0)


def _pair_guided_ig(x_input, x_baseline, grad_func, steps=200, fraction=0.25, max_dist=0.02):
    "Per-sample NumPy transcription of PAIR saliency's guided_ig_impl (the reference)."
    x, l1_total = x_baseline.copy(), np.abs(x_input - x_baseline).sum()
    attr = np.zeros_like(x_input)
    if l1_total == 0: return attr
    for step in range(steps):
        grad_actual = grad_func(x); grad = grad_actual.copy()
        alpha = (step + 1.0) / steps
        a_min, a_max = max(alpha - max_dist, 0.0), min(alpha + max_dist, 1.0)
        x_min, x_max = x_baseline + (x_input - x_baseline) * a_min, x_baseline + (x_input - x_baseline) * a_max
        l1_target = l1_total * (1 - (step + 1) / steps)
        gamma = np.inf
        while gamma > 1.0:
            x_old = x.copy()
            with np.errstate(divide="ignore", invalid="ignore"):
                x_alpha = np.where(x_input != x_baseline, (x - x_baseline) / (x_input - x_baseline), np.nan)
            x_alpha[np.isnan(x_alpha)] = a_max
            x[x_alpha < a_min] = x_min[x_alpha < a_min]
            l1_current = np.abs(x - x_input).sum()
            if math.isclose(l1_target, l1_current, rel_tol=1e-9, abs_tol=1e-9):
                attr += (x - x_old) * grad_actual; break
            grad[x == x_max] = np.inf
            thr = np.quantile(np.abs(grad), fraction, method="lower")
            s = np.logical_and(np.abs(grad) <= thr, grad != np.inf)
            l1_s = (np.abs(x - x_max) * s).sum()
            gamma = (l1_current - l1_target) / l1_s if l1_s > 0 else np.inf
            x[s] = x_max[s] if gamma > 1.0 else (x + (x_max - x) * gamma)[s]
            attr += (x - x_old) * grad_actual
    return attr


def test_guided_ig_matches_pair_reference_and_is_complete():
    m, (x, y) = smooth_cnn(), data(2)
    b = torch.zeros_like(x); b[:, 0] = 0.3   # some features equal to the baseline → exercised nan branch
    x[0, 0, 0, 0] = 0.3
    ours = GuidedIG(m, n_steps=25).attribute(x, y, baselines=b)
    for i in range(2):
        def gf(z, i=i):
            zt = torch.tensor(z).view(1, 2, 6, 6).requires_grad_(True)
            g, = torch.autograd.grad(m(zt)[0, y[i]], zt); return g.view(-1).numpy()
        ref = _pair_guided_ig(x[i].flatten().numpy(), b[i].flatten().numpy(), gf, steps=25)
        np.testing.assert_allclose(ours[i].flatten().numpy(), ref, atol=1e-12)


def test_guided_ig_sums_to_delta_f():
    m, (x, y) = smooth_cnn(), data(2)
    full = GuidedIG(m).attribute(x, y)   # PAIR defaults: 200 steps, fraction 0.25, max_dist 0.02, zero baseline
    df = logit(m, x, y) - logit(m, torch.zeros_like(x), y)
    assert ((full.flatten(1).sum(1) - df).abs() <= 1e-2 * df.abs()).all()


def test_guided_ig_sample_equal_to_baseline_is_zero():
    m, (x, y) = smooth_cnn(), data(2)
    x[1] = 0
    a = GuidedIG(m, n_steps=10).attribute(x, y)
    assert a[1].abs().sum() == 0 and a[0].abs().sum() > 0


# ---------------------------------------------------------------- contract, hygiene, determinism
ALL = ["saliency", "gxi", "gxsi", "pgxi", "ig", "smoothgrad", "vargrad", "gig"]
FAST = {"ig": dict(n_steps=4), "smoothgrad": dict(n_samples=3, seed=0), "vargrad": dict(n_samples=3, seed=0),
        "gig": dict(n_steps=5)}


@pytest.mark.parametrize("name", ALL)
def test_contract_and_hygiene(name):
    m, (x, y) = relu_cnn(), data()
    m.train(); m[0].weight.requires_grad_(False)
    m[1].register_forward_hook(lambda *a: None)
    weights = {k: v.clone() for k, v in m.state_dict().items()}
    xf = x.float(); mf = relu_cnn().float().train()
    a = attribute(mf, xf, y, method=name, **FAST.get(name, {}))
    assert a.shape == xf.shape and a.dtype == torch.float32 and a.device == xf.device and not a.requires_grad
    assert a.abs().sum() > 0
    a = attribute(m, x, None, method=name, **FAST.get(name, {}))
    assert m.training and all(mm.training for mm in m.modules())
    assert not m[0].weight.requires_grad and m[0].bias.requires_grad and m[4].weight.requires_grad
    assert len(m[1]._forward_hooks) == 1 and all(len(mm._backward_hooks) == 0 for mm in m.modules())
    assert all(torch.equal(v, weights[k]) for k, v in m.state_dict().items())
    with pytest.raises(ValueError):
        attribute(m, x, 9, method=name, **FAST.get(name, {}))   # raises inside the scope
    assert m.training and not m[0].weight.requires_grad and m[0].bias.requires_grad
    assert len(m[1]._forward_hooks) == 1 and all(torch.equal(v, weights[k]) for k, v in m.state_dict().items())


def test_target_none_is_predicted_class():
    m, (x, _) = relu_cnn(), data()
    pred = m(x).argmax(1)
    for name in ALL:
        kw = FAST.get(name, {})
        close(attribute(m, x, None, method=name, **kw), attribute(m, x, pred, method=name, **kw))


def test_seeded_determinism():
    m, (x, y) = relu_cnn(), data()
    sg = SmoothGrad(m, n_samples=5, noise_level=0.2)
    close(sg.attribute(x, y, seed=3), sg.attribute(x, y, seed=3), atol=0, rtol=0)
    close(sg.attribute(x, y, generator=torch.Generator().manual_seed(3)),
                               sg.attribute(x, y, seed=3), atol=0, rtol=0)
    assert not torch.equal(sg.attribute(x, y, seed=3), sg.attribute(x, y, seed=4))


def test_chunking_invariance():
    m, (x, y) = relu_cnn(), data()
    ig = IntegratedGradients(m, n_steps=9)
    close(ig.attribute(x, target=y, internal_batch_size=1), ig.attribute(x, target=y, internal_batch_size=500))
    g = GuidedIG(m, n_steps=10)
    close(g.attribute(x, y, internal_batch_size=2), g.attribute(x, y))


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, exc, msg", [
    (lambda m, x, y: Saliency(m).attribute([[1.0]], y), TypeError, "`inputs`"),
    (lambda m, x, y: Saliency(m).attribute(x.long(), y), TypeError, "floating dtype"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x[0], target=y), ValueError, "batch"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x * float("nan"), target=y), ValueError, "NaN"),
    (lambda m, x, y: IntegratedGradients(m, n_steps=4).attribute(x, target=7), ValueError, "out of range"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=[0, 1]), ValueError, "length 2"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, baselines=torch.zeros(2, 2, 6, 6)), ValueError, "`baselines`"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, baselines="black"), TypeError, "`baselines`"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, baselines=lambda z: 0), TypeError, "`baselines`"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, n_steps=0), ValueError, "`n_steps`"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, internal_batch_size=0), ValueError, "`internal_batch_size`"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, quadrature="simpson"), ValueError, "unknown `quadrature`"),
    (lambda m, x, y: IntegratedGradients(m, quadrature="simpson"), ValueError, "unknown `quadrature`"),
    (lambda m, x, y: IntegratedGradients(m).attribute(x, target=y, method="simpson"), ValueError, "unknown `method`"),  # Captum's name
    (lambda m, x, y: IntegratedGradients(m).attribute(x, y), TypeError, "`baselines`"),  # Captum's order: baselines second
    (lambda m, x, y: SmoothGrad(m).attribute(x, y, n_samples=0), ValueError, "`n_samples`"),
    (lambda m, x, y: SmoothGrad(m).attribute(x, y, internal_batch_size=-1), ValueError, "`internal_batch_size`"),
    (lambda m, x, y: SmoothGrad(m).attribute(x, y, noise_level=float("inf")), ValueError, "`noise_level`"),
    (lambda m, x, y: SmoothGrad(m).attribute(x, y, generator=3), TypeError, "`generator`"),
    (lambda m, x, y: SmoothGrad(m, base="nope"), ValueError, "unknown attribution"),
    (lambda m, x, y: GuidedIG(m).attribute(x, y, n_steps=0), ValueError, "`n_steps`"),
    (lambda m, x, y: GuidedIG(m).attribute(x, y, max_dist=2), ValueError, "`max_dist`"),
    (lambda m, x, y: GuidedIG(m).attribute(x, y, baselines=torch.zeros(3)), ValueError, "`baselines`"),
    (lambda m, x, y: PositiveInputXGradient(m, variant="sq"), ValueError, "`variant`"),
])
def test_bad_inputs(call, exc, msg):
    m, (x, y) = relu_cnn(), data()
    with pytest.raises(exc, match=msg):
        call(m, x, y)


def test_model_output_wrong_shape_and_non_module():
    x, y = data()
    with pytest.raises(TypeError, match="`model`"):
        Saliency(lambda z: z)
    bad = nn.Sequential(nn.Conv2d(2, 3, 3)).double()   # 4-D output
    with pytest.raises(ValueError, match="model output"):
        IntegratedGradients(bad, n_steps=2).attribute(x, target=0)
