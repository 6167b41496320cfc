"""Captum code runs unchanged on attribkit's classes named as Captum's: the parameters of `__init__` and `attribute`
(names, order of the positional ones, defaults) and the outputs of Captum-style calls, against Captum's own."""
import inspect
import pytest
import torch
from torch import nn
import attribkit.attr as ours

captum_attr = pytest.importorskip("captum.attr")

SHARED = sorted(n for n in dir(ours) if inspect.isclass(getattr(ours, n)) and inspect.isclass(getattr(captum_attr, n, None)))
P = inspect.Parameter
ALIAS = {"method": "quadrature"}   # Captum's name of a call parameter -> the constructor's attribute holding its default


class Net(nn.Module):
    "Two convolutions and a linear layer on 1×8×8 inputs; ReLU modules (Captum's DeepLift and GuidedBackprop need them)."
    def __init__(self, seed=0):
        super().__init__(); torch.manual_seed(seed)
        self.c1, self.r1, self.c2, self.r2 = nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()
        self.fc = nn.Linear(4 * 8 * 8, 3)
    def forward(self, x): return self.fc(self.r2(self.c2(self.r1(self.c1(x)))).flatten(1))


def net(): return Net().double().eval()
X = torch.randn(4, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
B = 0.1 * torch.randn(4, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
T = torch.tensor([0, 1, 2, 1])


def close(a, b, atol=1e-6, rtol=0.0):
    assert a.shape == b.shape, (a.shape, b.shape)
    err = ((a - b).abs() - rtol * b.abs()).max().item()
    assert err <= atol, f"max excess error {err:.3g} > {atol}"


def params(f):
    return [p for p in inspect.signature(f).parameters.values()
            if p.name != "self" and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]


# ---------------------------------------------------------------- signatures
def test_the_shared_classes():
    assert set(SHARED) >= {"DeepLift", "GuidedBackprop", "InputXGradient", "IntegratedGradients", "LRP", "Saliency"}


@pytest.mark.parametrize("fn", ["__init__", "attribute"])
@pytest.mark.parametrize("name", SHARED)
def test_signature_accepts_captums(name, fn):
    cls = getattr(ours, name)
    theirs, mine = params(getattr(getattr(captum_attr, name), fn)), params(getattr(cls, fn))
    pos = {p.name: i for i, p in enumerate(mine)}
    by_name = {p.name: p for p in mine}
    for i, p in enumerate(theirs):
        assert p.name in by_name, f"{name}.{fn} lacks Captum's parameter `{p.name}`"
        q = by_name[p.name]
        if p.kind is P.POSITIONAL_OR_KEYWORD:   # Captum code may pass it by position
            assert (pos[p.name], q.kind) == (i, P.POSITIONAL_OR_KEYWORD), f"{name}.{fn}: `{p.name}` is not at position {i}"
        if p.default is P.empty: continue
        if q.default is None and p.default is not None:   # None: the constructor's setting, whose default must be Captum's
            assert getattr(cls(net()), ALIAS.get(p.name, p.name)) == p.default, f"{name}.{fn}: default of `{p.name}`"
        else:
            assert q.default == p.default, f"{name}.{fn}: default of `{p.name}` is {q.default!r}, Captum's {p.default!r}"
    extra = [q.name for q in mine if q.name not in {p.name for p in theirs} and q.default is P.empty]
    assert not extra, f"{name}.{fn} requires parameters Captum does not have: {extra}"


# ---------------------------------------------------------------- Captum's calls, Captum's results
IG_METHODS = ["riemann_right", "riemann_left", "riemann_middle", "riemann_trapezoid", "gausslegendre"]


def test_ig_captum_method_keyword():   # the call of the issue: `method=` raised TypeError
    m = net()
    got = ours.IntegratedGradients(m).attribute(X, target=T, n_steps=24, method="gausslegendre")
    close(got, captum_attr.IntegratedGradients(m).attribute(X, target=T, n_steps=24, method="gausslegendre"))


@pytest.mark.parametrize("method", IG_METHODS)
def test_ig_matches_captum_for_each_method(method):
    m, n = net(), 24
    a, d = ours.IntegratedGradients(m).attribute(X, B, T, None, n, method, return_convergence_delta=True)
    ra, rd = captum_attr.IntegratedGradients(m).attribute(X, B, T, None, n, method, return_convergence_delta=True)
    if method == "riemann_trapezoid":   # Captum's end-halved weights of 1/n sum to 1 − 1/n; attribkit's sum to 1
        close(a * (n - 1) / n, ra)
    else:
        close(a, ra); close(d, rd)


def test_ig_multiply_by_inputs_false_matches_captum():
    m = net()
    a, d = ours.IntegratedGradients(m, multiply_by_inputs=False).attribute(X, B, target=T, n_steps=8,
                                                                             return_convergence_delta=True)
    ra, rd = captum_attr.IntegratedGradients(m, multiply_by_inputs=False).attribute(X, B, target=T, n_steps=8,
                                                                                    return_convergence_delta=True)
    close(a, ra); close(d, rd)


def test_ig_method_and_quadrature_are_one_rule():
    m = net()
    ig = ours.IntegratedGradients(m, n_steps=6)
    close(ig.attribute(X, target=T, method="riemann_left"), ig.attribute(X, target=T, quadrature="riemann_left"), atol=0)
    with pytest.raises(ValueError, match="unknown `method`"): ig.attribute(X, target=T, method="simpson")
    with pytest.raises(ValueError, match="`method`.*`quadrature`"):
        ig.attribute(X, target=T, method="riemann_left", quadrature="gausslegendre")
    with pytest.raises(TypeError, match="`baselines`"): ig.attribute(X, T)   # a target where Captum's order has the baselines


def test_saliency_matches_captum():
    m = net()
    for kw in ({}, dict(abs=True), dict(abs=False)):
        close(ours.Saliency(m).attribute(X, target=T, **kw), captum_attr.Saliency(m).attribute(X, target=T, **kw))
    close(ours.Saliency(m).attribute(X, T, False, None), captum_attr.Saliency(m).attribute(X, T, False, None))
    close(ours.Saliency(forward_func=m).attribute(inputs=X, target=T), captum_attr.Saliency(forward_func=m).attribute(inputs=X, target=T))


def test_input_x_gradient_and_guided_backprop_match_captum():
    m = net()
    close(ours.InputXGradient(m).attribute(X, T, None), captum_attr.InputXGradient(m).attribute(X, T, None))
    close(ours.GuidedBackprop(m).attribute(X, target=T), captum_attr.GuidedBackprop(m).attribute(X, target=T))


@pytest.mark.parametrize("mul", [True, False])
def test_deeplift_matches_captum(mul):
    m = net()
    a, d = ours.DeepLift(m, mul).attribute(X, B, T, None, True)
    ra, rd = captum_attr.DeepLift(m, mul).attribute(X, B, T, None, True)
    close(a, ra); close(d, rd)


def test_lrp_matches_captum():
    m = net()
    a, d = ours.LRP(m, epsilon=1e-9).attribute(X, T, None, True)   # Captum's LRP: ε = 1e-9 on every layer with a rule
    ra, rd = captum_attr.LRP(m).attribute(X, T, None, True)
    close(a, ra, atol=1e-8); close(d, rd, atol=1e-8)
    close(ours.LRP(m).attribute(X, target=T), ra, atol=1e-4)   # attribkit's default ε = 1e-6: 1e-5 apart here


@pytest.mark.parametrize("call, arg", [
    (lambda m: ours.Saliency(m).attribute(X, target=T, additional_forward_args=(1,)), "`additional_forward_args`"),
    (lambda m: ours.InputXGradient(m).attribute(X, T, (1,)), "`additional_forward_args`"),
    (lambda m: ours.IntegratedGradients(m).attribute(X, target=T, additional_forward_args=(1,)), "`additional_forward_args`"),
    (lambda m: ours.GuidedBackprop(m).attribute(X, T, (1,)), "`additional_forward_args`"),
    (lambda m: ours.DeepLift(m).attribute(X, target=T, additional_forward_args=(1,)), "`additional_forward_args`"),
    (lambda m: ours.LRP(m).attribute(X, T, (1,)), "`additional_forward_args`"),
    (lambda m: ours.DeepLift(m).attribute(X, target=T, custom_attribution_func=lambda *a: a), "`custom_attribution_func`"),
    (lambda m: ours.LRP(m).attribute(X, target=T, verbose=True), "`verbose`"),
])
def test_unsupported_captum_options_raise(call, arg):
    with pytest.raises(ValueError, match=arg): call(net())
