"Parity (Captum 0.9), identities, functional-ReLU handling, hygiene and bad-input errors of attribkit.attr.backprop."
import warnings
import pytest, torch
import torch.nn.functional as F
import torch.fx.experimental.symbolic_shapes  # noqa: F401  (torch imports it lazily on the first custom backward; pay it at collection)
from torch import nn
from attribkit.core import target_grad, attribute, _HOOK_DICTS
from attribkit.attr.backprop import GuidedBackprop, DeepLift, LRP, ExcitationBackprop, LRP_COMPOSITES

captum_attr = pytest.importorskip("captum.attr")
TOL = 1e-6


def cnn(bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, bias=bias), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(3, 4, 3, padding=1, bias=bias), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 4 * 4, 8, bias=bias), nn.ReLU(), nn.Linear(8, 3, bias=bias)).double()


from conftest import make_mlp
def mlp(bias=True, seed=0): return make_mlp((6, 10, 8, 3), bias=bias, seed=seed)


class FunctionalCnn(nn.Module):
    "Same weights as `cnn()`, but ReLUs called functionally (mode='functional') or one ReLU module reused."
    def __init__(self, seq, mode):
        super().__init__(); self.seq, self.mode, self.act = seq, mode, nn.ReLU()
    def forward(self, x):
        s = self.seq
        r = (lambda t: F.relu(t)) if self.mode == "functional" else self.act
        x = s[2](r(s[0](x)))
        x = s[5](torch.relu(s[3](x)) if self.mode == "functional" else r(s[3](x)))
        return s[8](r(s[6](x)) if self.mode != "functional" else s[6](x).relu())


X = torch.randn(4, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
Y = torch.tensor([0, 1, 2, 1])


# ---------------------------------------------------------------- Guided Backprop
def test_gbp_matches_captum_module_relus():
    m = cnn()
    ours = GuidedBackprop(m).attribute(X, Y)
    ref = captum_attr.GuidedBackprop(m).attribute(X.clone().requires_grad_(), target=Y).detach()
    torch.testing.assert_close(ours, ref, atol=TOL, rtol=0)
    assert (ours - target_grad(m, X, Y)).abs().max() > 1e-3  # guided differs from the plain gradient here


@pytest.mark.parametrize("mode", ["functional", "reused"])
def test_gbp_functional_and_reused_relu_equal_module_twin(mode):
    m = cnn()
    twin = FunctionalCnn(m, mode)
    ref = GuidedBackprop(m).attribute(X, Y)
    torch.testing.assert_close(GuidedBackprop(twin).attribute(X, Y), ref, atol=TOL, rtol=0)


def test_gbp_without_relu_raises_instead_of_plain_gradient():
    with pytest.raises(ValueError, match="no relu"):
        GuidedBackprop(nn.Linear(6, 3).double()).attribute(torch.randn(2, 6, dtype=torch.float64), 0)


# ---------------------------------------------------------------- DeepLIFT
def pool_mid_cnn(seed=0):
    "conv → relu → conv → maxpool → linear: the pool is not next to a ReLU."
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 3)).double()


# Captum 0.9 is not a valid oracle next to max pooling in two cases, where its own attributions miss
# summation-to-delta (we meet it to 1e-15, test_deeplift_summation_to_delta_with_maxpool): (1) its maxpool rule falls
# back to `grad_input[0]`, the first sample's gradient, where the pool input difference is zero (captum issue #1276),
# which happens after a ReLU with a non-zero baseline; (2) a ReLU module right after a MaxPool module (Δ mismatch of
# ~1e-2 in our runs). Parity is checked where Captum is self-consistent: relu → maxpool with a zero baseline, and a
# pool that is not adjacent to a ReLU with any baseline.
@pytest.mark.parametrize("net, baseline", [("cnn", None), ("pool_mid", None), ("pool_mid", "tensor"),
                                           ("mlp", None), ("mlp", "tensor")])
def test_deeplift_matches_captum(net, baseline):
    m = {"cnn": cnn, "pool_mid": pool_mid_cnn, "mlp": mlp}[net]()
    x = X if net != "mlp" else torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    b = None if baseline is None else 0.5 * torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    ours = DeepLift(m).attribute(x, target=Y, baselines=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = captum_attr.DeepLift(m).attribute(x.clone().requires_grad_(), target=Y, baselines=b).detach()
    torch.testing.assert_close(ours, ref, atol=TOL, rtol=0)


def test_deeplift_summation_to_delta_with_maxpool():
    m = cnn()
    b = 0.5 * torch.randn(X.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    attr, delta = DeepLift(m).attribute(X, target=Y, baselines=b, return_convergence_delta=True)
    assert delta.abs().max() < 1e-9
    assert (attr - (X - b) * target_grad(m, X, Y)).abs().max() > 1e-4  # not simply G×(x-b)


def test_deeplift_zero_baseline_is_gxi_on_bias_free_relu_model():
    m = cnn(bias=False)
    torch.testing.assert_close(DeepLift(m).attribute(X, target=Y), X * target_grad(m, X, Y), atol=TOL, rtol=0)


def test_deeplift_functional_relu_equals_module_twin():
    m = cnn()
    b = 0.3 * torch.ones_like(X)
    torch.testing.assert_close(DeepLift(FunctionalCnn(m, "functional")).attribute(X, target=Y, baselines=b),
                               DeepLift(m).attribute(X, target=Y, baselines=b), atol=TOL, rtol=0)


def test_deeplift_unsupported_nonlinearity_names_it():
    m = make_mlp((6, 4, 3), act=nn.Tanh)
    with pytest.raises(TypeError, match=r"`1` \(Tanh\)"):
        DeepLift(m).attribute(torch.randn(2, 6, dtype=torch.float64), target=0)

    class Sig(nn.Module):
        def __init__(self): super().__init__(); self.l = nn.Linear(6, 3).double()
        def forward(self, x): return self.l(torch.sigmoid(x))
    with pytest.raises(TypeError, match="sigmoid"):
        DeepLift(Sig()).attribute(torch.randn(2, 6, dtype=torch.float64), target=0)


def test_deeplift_bad_baselines():
    with pytest.raises(ValueError, match="`baselines`"):
        DeepLift(mlp()).attribute(torch.randn(2, 6, dtype=torch.float64), target=0, baselines=torch.zeros(5, dtype=torch.float64))


# ---------------------------------------------------------------- LRP
def test_lrp_epsilon_zero_is_gxi_on_bias_free_relu_mlp():
    m = mlp(bias=False)
    x = torch.randn(5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(LRP(m, "epsilon", epsilon=0.0).attribute(x, 1), x * target_grad(m, x, 1), atol=TOL, rtol=0)


def bn_cnn(shift=False):
    torch.manual_seed(6)
    bn = nn.BatchNorm2d(3)
    bn.running_var.uniform_(0.5, 2.0); nn.init.uniform_(bn.weight, 0.5, 1.5)
    if shift: bn.running_mean.uniform_(-0.3, 0.3); nn.init.uniform_(bn.bias, -0.2, 0.2)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, bias=False), bn, nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.5),
                         nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.ReLU(), nn.AvgPool2d(2),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 3, bias=False)).double()


# α2β1 conserves only where every neuron has both positive and negative contributions (else β·R is lost), so it is
# not in this list; test_lrp_alpha2beta1_closed_form checks it instead.
@pytest.mark.parametrize("composite", ["epsilon", "gamma", "alpha1beta0", "epsilon_plus", "epsilon_gamma_box"])
def test_lrp_conservation_bias_free(composite):
    m = bn_cnn()
    rel = LRP(m, composite, epsilon=1e-12).attribute(X, Y)
    with torch.no_grad(): logits = m.eval()(X).gather(1, Y[:, None])[:, 0]
    torch.testing.assert_close(rel.flatten(1).sum(1), logits, atol=1e-8, rtol=0)


def test_lrp_alpha2beta1_closed_form():
    torch.manual_seed(8)
    m = make_mlp((5, 4, 3))
    x = torch.randn(3, 5, dtype=torch.float64)
    def ab(a, w, b, r):                                           # explicit contribution matrices
        zij = a[:, :, None] * w.T[None]
        zp, zn = zij.clamp(min=0).sum(1) + b.clamp(min=0), zij.clamp(max=0).sum(1) + b.clamp(max=0)
        share = (2 * zij.clamp(min=0) / zp[:, None]).nan_to_num() - (zij.clamp(max=0) / zn[:, None]).nan_to_num()
        return share.mul(r[:, None]).sum(2)                       # 0/0 (no contribution of that sign) counts as 0
    with torch.no_grad():
        a1 = torch.relu(m[0](x)); f = m(x)
        r2 = torch.zeros_like(f); r2[:, 1] = f[:, 1]
        ref = ab(x, m[0].weight, m[0].bias, ab(a1, m[2].weight, m[2].bias, r2))
    torch.testing.assert_close(LRP(m, "alpha2beta1").attribute(x, 1), ref, atol=TOL, rtol=0)


def test_lrp_batchnorm_folding_equals_fused_conv():
    m = bn_cnn(shift=True).eval()
    conv, bn = m[0], m[1]
    scale = bn.weight / (bn.running_var + bn.eps).sqrt()
    fused = nn.Conv2d(1, 3, 3, padding=1).double()
    with torch.no_grad():
        fused.weight.copy_(conv.weight * scale[:, None, None, None]); fused.bias.copy_(bn.bias - bn.running_mean * scale)
    twin = nn.Sequential(fused, *list(m)[2:])
    for comp in ("epsilon", "alpha1beta0", "epsilon_gamma_box"):
        torch.testing.assert_close(LRP(m, comp).attribute(X, Y), LRP(twin, comp).attribute(X, Y), atol=TOL, rtol=0)


def test_lrp_sign_flip_and_alpha1beta0_sign():
    m = mlp()
    x = torch.rand(6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad(): f = m(x)[:, 0]
    r = LRP(m, "alpha1beta0").attribute(x, 0)
    rf = LRP(m, "alpha1beta0").attribute(x, 0, sign_flip=True)
    torch.testing.assert_close(rf, r * f.sign()[:, None], atol=TOL, rtol=0)
    assert (rf >= -1e-12).all()


def test_lrp_unsupported_layer_and_composite():
    m = make_mlp((6, 4, 3), act=nn.GELU)
    with pytest.raises(TypeError, match=r"`1` \(GELU\)"):
        LRP(m).attribute(torch.randn(2, 6, dtype=torch.float64), 0)
    with pytest.raises(ValueError, match="composite"):
        LRP(m, "nope")
    assert "epsilon_gamma_box" in LRP_COMPOSITES


# ---------------------------------------------------------------- Excitation Backprop
def test_ebp_probability_bias_free_without_renormalisation():
    m = cnn(bias=False)
    p = ExcitationBackprop(m, normalize=False).attribute(X, Y)
    assert (p >= 0).all()
    torch.testing.assert_close(p.flatten(1).sum(1), torch.ones(4, dtype=torch.float64), atol=TOL, rtol=0)


def test_ebp_with_biases_and_layer():
    m = cnn()
    p = ExcitationBackprop(m).attribute(X, Y)
    assert (p >= 0).all() and p.shape == X.shape
    # with biases a logit can be positive with no excitatory input: no winning path, an all-zero map; others sum to 1
    with torch.no_grad(): a = m[:8](X); alive = (a * m[8].weight[Y]).clamp(min=0).sum(1) > 0
    assert alive.any() and (~alive).any()
    torch.testing.assert_close(p.flatten(1).sum(1), alive.double(), atol=TOL, rtol=0)
    X2, Y2 = X[alive], Y[alive]
    q = ExcitationBackprop(m, layer="4").attribute(X2, Y2)         # the last conv ReLU (seed 000 uses such a layer)
    assert q.shape == X2.shape and (q >= 0).all()
    torch.testing.assert_close(q.flatten(1).sum(1), torch.ones(len(X2), dtype=torch.float64), atol=TOL, rtol=0)
    with pytest.raises(ValueError, match="not a submodule"):
        ExcitationBackprop(cnn(bias=False), layer=m[4], upsample=False, normalize=False)
    m0 = cnn(bias=False)
    raw = ExcitationBackprop(m0, layer=m0[4], upsample=False, normalize=False).attribute(X, Y)
    assert raw.shape == (4, 4, 4, 4)
    torch.testing.assert_close(raw.flatten(1).sum(1), torch.ones(4, dtype=torch.float64), atol=TOL, rtol=0)


def test_ebp_no_winning_path_gives_zeros():
    m = mlp()
    with torch.no_grad(): m[4].weight[0] = -m[4].weight[0].abs()   # class 0 has only inhibitory inputs
    p = ExcitationBackprop(m).attribute(torch.rand(3, 6, dtype=torch.float64), 0)
    assert (p == 0).all()


def test_ebp_layer_not_found_lists_close_names():
    with pytest.raises(ValueError, match="closest names"):
        ExcitationBackprop(cnn(), layer="44")


# ---------------------------------------------------------------- hygiene, registry, bad input
def snapshot(m):
    return ({k: v.clone() for k, v in m.state_dict().items()}, [p.requires_grad for p in m.parameters()],
            [mod.training for mod in m.modules()],
            sum(len(getattr(mod, d)) for mod in m.modules() for d in _HOOK_DICTS if hasattr(mod, d)))


def same(a, b):
    return (all(torch.equal(a[0][k], b[0][k]) for k in a[0]) and a[1:] == b[1:])


METHODS = [("gbp", {}), ("deeplift", {}), ("lrp", {"composite": "epsilon_gamma_box"}), ("ebp", {"layer": "4"})]


@pytest.mark.parametrize("name, kw", METHODS)
def test_hygiene_after_success_and_after_error(name, kw):
    m = cnn().train()
    m[3].weight.requires_grad_(False)
    before = snapshot(m)
    out = attribute(m, X, Y, method=name, **kw)
    assert out.shape == X.shape and out.dtype == X.dtype and not out.requires_grad
    assert same(snapshot(m), before)
    assert torch._C._len_torch_function_stack() == 0
    with pytest.raises(ValueError, match="out of range"):
        attribute(m, X, 7, method=name, **kw)
    assert same(snapshot(m), before) and torch._C._len_torch_function_stack() == 0


def test_hygiene_after_error_raised_inside_forward():
    class Sig(nn.Module):
        def __init__(self): super().__init__(); self.l, self.r = nn.Linear(6, 3).double(), nn.ReLU()
        def forward(self, x): return self.l(torch.sigmoid(self.r(x)))
    m = Sig().train(); before = snapshot(m)
    with pytest.raises(TypeError, match="sigmoid"):
        DeepLift(m).attribute(torch.randn(2, 6, dtype=torch.float64), target=0)
    assert same(snapshot(m), before) and torch._C._len_torch_function_stack() == 0


@pytest.mark.parametrize("name, kw", METHODS)
def test_bad_inputs_name_the_argument(name, kw):
    m = cnn()
    with pytest.raises(TypeError, match="`inputs`"): attribute(m, X.tolist(), 0, method=name, **kw)
    with pytest.raises(TypeError, match="`inputs`"): attribute(m, X.long(), 0, method=name, **kw)
    with pytest.raises(ValueError, match="`target`"): attribute(m, X, [0, 1], method=name, **kw)
