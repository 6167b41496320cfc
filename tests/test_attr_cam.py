"Grad-CAM parity with Captum, FullGrad/UFG completeness, bad inputs and hook hygiene of attribkit.attr.cam."
import pytest, torch
import torch.nn.functional as F
from torch import nn
from captum.attr import LayerGradCam, LayerAttribution  # dev dependency, the oracle
from attribkit.core import attribute
from attribkit.attr.cam import GradCAM, FullGrad, UniformFullGrad, fullgrad_decompose
from attribkit.core import find_layer


def assert_close(a, b, rtol=1e-7, atol=1e-9):
    "Shape- and value-equality check (torch.testing.assert_close lazily imports torch.distributed, ~1-4 s)."
    assert a.shape == b.shape, (a.shape, b.shape)
    assert torch.allclose(a, b, rtol=rtol, atol=atol), (a - b).abs().max()


def cnn(bn: bool = True):
    "Conv + BN + ReLU + maxpool + conv + linear head, float64, with non-trivial BN statistics, in eval mode."
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4) if bn else nn.Identity(), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(4, 5, 3, padding=1), nn.ReLU(),
                      nn.Flatten(), nn.Linear(5 * 4 * 4, 6), nn.ReLU(), nn.Linear(6, 3)).double()
    if bn:
        with torch.no_grad():
            m[1].running_mean.normal_(); m[1].running_var.uniform_(0.5, 2.0)
            m[1].weight.normal_(); m[1].bias.normal_()
    return m.eval()


def x_(n=3):
    return torch.randn(n, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("layer", ["0", "4", None, nn.Conv2d])
def test_gradcam_matches_captum(layer):
    m, x, t = cnn(), x_(), torch.tensor([0, 2, 1])
    mod = find_layer(m, layer, x)
    if layer in (None, nn.Conv2d): assert mod is m[4]   # the default on a flat CNN is its last conv (a ReLU has no parameters)
    ref = LayerGradCam(m, mod).attribute(x, t, relu_attributions=True)
    ref = LayerAttribution.interpolate(ref, (8, 8), "bilinear")
    ours = GradCAM(m, layer, channels="one").attribute(x, t)
    assert ours.dtype == torch.float64 and ours.shape == (3, 1, 8, 8)
    assert_close(ours, ref, atol=1e-10, rtol=1e-8)
    rep = GradCAM(m, layer).attribute(x, t)
    assert rep.shape == x.shape and not rep.requires_grad
    assert_close(rep, ref.expand_as(x))


def test_gradcam_raw_and_no_relu():
    m, x = cnn(), x_()
    ref = LayerGradCam(m, m[4]).attribute(x, 1, relu_attributions=False)
    assert_close(GradCAM(m, "4", relu=False, upsample=False)(x, 1), ref)
    assert (ref < 0).any()


def test_gradcam_with_inplace_relu_matches_functional_definition():
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(4 * 64, 2)).double().eval()
    x = x_(2)
    a = m[0](x).detach().requires_grad_(True)
    f = m[3](m[2](F.relu(a)))[:, 1].sum()
    g, = torch.autograd.grad(f, a)
    ref = F.relu((g.mean((2, 3), keepdim=True) * a.detach()).sum(1, keepdim=True))
    assert_close(GradCAM(m, "0", upsample=False)(x, 1), ref)


def test_fullgrad_decomposition_is_complete():
    m, x = cnn(), x_(4)
    gi, terms, fk = fullgrad_decompose(m, x, [0, 1, 2, 0])
    assert len(terms) == 5  # conv, BN, conv, linear, linear
    total = gi.flatten(1).sum(1) + sum(t.flatten(1).sum(1) for t in terms)
    with torch.no_grad():
        f = m(x)[torch.arange(4), torch.tensor([0, 1, 2, 0])]
    assert_close(fk, f, atol=1e-12, rtol=1e-12)
    assert_close(total, f, atol=1e-10, rtol=1e-10)
    # the BN term really carries β − μγ/√(var+eps): dropping it breaks completeness
    no_bn = gi.flatten(1).sum(1) + sum(t.flatten(1).sum(1) for i, t in enumerate(terms) if i != 1)
    assert (no_bn - f).abs().max() > 1e-3


def test_fullgrad_postprocessing_matches_reference_recipe():
    m, x = cnn(), x_(2)
    gi, terms, _ = fullgrad_decompose(m, x, 1)
    def psi(t):
        t = t.abs(); lo = t.flatten(1).min(1).values.view(-1, 1, 1, 1); t = t - lo
        return t / (t.flatten(1).max(1).values.view(-1, 1, 1, 1) + 1e-6)
    ref = psi(gi).sum(1, keepdim=True)
    for t in terms[:3]:  # the three spatial terms; linear biases are not in the map
        ref = ref + F.interpolate(psi(t), size=(8, 8), mode="bilinear", align_corners=True).sum(1, keepdim=True)
    assert_close(FullGrad(m, channels="one")(x, 1), ref)
    out = attribute(m, x, 1, method="fullgrad")
    assert out.shape == x.shape and (out >= 0).all()


@pytest.mark.parametrize("bn", [True, False])
def test_ufg_sums_to_logit(bn):
    m, x = cnn(bn), x_(4)
    u = attribute(m, x, 2, method="ufg")
    assert u.shape == x.shape and u.dtype == x.dtype and not u.requires_grad
    with torch.no_grad():
        assert_close(u.flatten(1).sum(1), m(x)[:, 2], atol=1e-10, rtol=1e-10)
    # the input term is the signed G×I; the rest is one constant per sample
    gi, _, _ = fullgrad_decompose(m, x, 2)
    d = (u - gi).flatten(1)
    assert_close(d, d[:, :1].expand_as(d))


def test_ufg_default_target_is_prediction():
    m, x = cnn(), x_(4)
    with torch.no_grad(): pred = m(x).argmax(1)
    assert_close(UniformFullGrad(m)(x), UniformFullGrad(m)(x, pred))


def test_layer_not_found_lists_close_names():
    m = nn.Sequential()
    m.add_module("features", nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()))
    m.add_module("head", nn.Sequential(nn.Flatten(), nn.Linear(4 * 36, 2)))
    with pytest.raises(ValueError, match=r"`layer` 'feature.0' not found.*closest names:.*features\.0"):
        GradCAM(m, "feature.0")
    with pytest.raises(ValueError, match="not a submodule"):
        GradCAM(m, nn.Conv2d(3, 4, 3))
    with pytest.raises(ValueError, match="no submodule with parameters outputs a spatial activation"):
        GradCAM(nn.Sequential(nn.Flatten(), nn.Linear(4, 2)).double())(torch.ones(2, 1, 2, 2, dtype=torch.float64), 0)
    with pytest.raises(ValueError, match="has no Conv1d"):
        GradCAM(m, nn.Conv1d)
    with pytest.raises(ValueError, match="`channels`"):
        GradCAM(m, channels="sum")


def test_bad_inputs():
    m = cnn()
    with pytest.raises(ValueError, match="`inputs` must have 4 dimensions"):
        GradCAM(m)(torch.randn(2, 3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="`inputs` must have 4 dimensions"):
        FullGrad(m)(torch.randn(2, 3 * 64, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating dtype"):
        UniformFullGrad(m)(torch.ones(2, 3, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="`target` out of range"):
        GradCAM(m)(x_(2), 7)
    bad_bn = nn.Sequential(nn.Conv2d(3, 2, 3), nn.BatchNorm2d(2, track_running_stats=False), nn.Flatten(),
                           nn.Linear(72, 2)).double()
    with pytest.raises(ValueError, match="running statistics"):
        UniformFullGrad(bad_bn)(x_(2), 0)
    with pytest.raises(ValueError, match="ran 2 times"):
        conv = nn.Conv2d(3, 3, 3, padding=1)
        GradCAM(nn.Sequential(conv, conv, nn.Flatten(), nn.Linear(192, 2)).double(), conv)(x_(2), 0)


def _state(m):
    return ({k: v.clone() for k, v in m.state_dict().items()}, [p.requires_grad for p in m.parameters()],
            [mod.training for mod in m.modules()],
            sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) + len(mod._backward_hooks) for mod in m.modules()))


@pytest.mark.parametrize("method", ["gradcam", "fullgrad", "ufg"])
def test_hygiene_also_after_error(method):
    m = cnn().train()
    m[0].weight.requires_grad_(False)
    before = _state(m)
    attribute(m, x_(2), 1, method=method)
    with pytest.raises(ValueError):
        attribute(m, x_(2), 9, method=method)
    after = _state(m)
    assert all(torch.equal(before[0][k], after[0][k]) for k in before[0])
    assert before[1:] == after[1:] and after[3] == 0
