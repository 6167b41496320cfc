"Users' own models: every form of a Captum attribution plugs in, and wrong calls fail clearly, leaving the model as it was."
import warnings
import pytest, torch
from torch import nn
import captum.attr as ca
import attribkit
from attribkit.core import as_local, auto_batch_size, check_call, target_grad
from attribkit.dga import DGA


class SmallCNN(nn.Module):
    "A user's model: not an nn.Sequential, with batch norm and dropout (train-mode sensitive)."
    def __init__(self, classes=5):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6)
        self.drop, self.fc = nn.Dropout(0.5), nn.Linear(6 * 4 * 4, classes)
    def forward(self, x):
        z = torch.relu(self.bn(self.conv(x)))
        return self.fc(self.drop(nn.functional.max_pool2d(z, 2).flatten(1)))


def model_and_data(seed=0):
    torch.manual_seed(seed)
    m = SmallCNN().double()
    with torch.no_grad(): m.bn.running_var.uniform_(0.5, 2); m.bn.running_mean.normal_()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return m, x, torch.tensor([0, 1, 4, 2])


def five_forms(model):
    "The five ways a user may hand over Captum's InputXGradient (plus the equivalent native name)."
    return {"name": "gxi", "callable": lambda m, x, t: x * target_grad(m, x, t), "captum_class": ca.InputXGradient,
            "captum_object": ca.InputXGradient(model), "captum_bound": ca.InputXGradient(model).attribute}


@pytest.mark.parametrize("form", ["callable", "captum_class", "captum_object", "captum_bound"])
def test_captum_forms_equal_native_attribute(form):
    m, x, t = model_and_data()
    ref = attribkit.attribute(m, x, t, method="gxi")
    torch.testing.assert_close(attribkit.attribute(m, x, t, method=five_forms(m)[form]), ref)
    torch.testing.assert_close(as_local(five_forms(m)[form])(m, x, t), ref)


def test_captum_forms_equal_as_dga_local():
    m, x, t = model_and_data()
    outs = {k: DGA(m, local=f, n_steps=5).attribute(x, t) for k, f in five_forms(m).items()}
    for k, v in outs.items(): torch.testing.assert_close(v, outs["name"], msg=k)


@pytest.mark.parametrize("captum_cls, native, kw", [
    (ca.IntegratedGradients, "ig", dict(n_steps=16)),
    (ca.Saliency, "saliency", dict(abs=False)),
])
def test_captum_methods_equal_native(captum_cls, native, kw):
    m, x, t = model_and_data(1)
    torch.testing.assert_close(attribkit.attribute(m, x, t, method=captum_cls, **kw),
                               attribkit.attribute(m, x, t, method=native, **kw))
    torch.testing.assert_close(attribkit.attribute(m, x, None, method=captum_cls, **kw),   # None: predicted class
                               attribkit.attribute(m, x, None, method=native, **kw))


def test_captum_warnings_at_most_once_per_call():
    m, x, t = model_and_data()
    class Noisy(ca.InputXGradient):
        def attribute(self, inputs, target=None):
            warnings.warn("a per-step warning")
            return super().attribute(inputs, target=target)
    for local in (ca.InputXGradient, Noisy):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            DGA(m, local=local, n_steps=6).attribute(x, t)
            DGA(m, local=local, n_steps=6).attribute(x, t)
        msgs = [str(w.message) for w in got]
        assert not any("did not already require gradients" in s for s in msgs), msgs
        assert msgs.count("a per-step warning") == (2 if local is Noisy else 0), msgs  # once per call, two calls


def test_captum_object_for_another_model_refused():
    m, x, t = model_and_data()
    other, _, _ = model_and_data(1)
    with pytest.raises(ValueError, match="pass the class `InputXGradient`"):
        attribkit.attribute(m, x, t, method=ca.InputXGradient(other))


def test_callable_contract_checked():
    with pytest.raises(TypeError, match=r"method\(model, inputs, target\)"):
        as_local(lambda inputs, target: inputs)
    with pytest.raises(TypeError, match="registry name"):
        as_local(3.0)
    with pytest.raises(TypeError, match="neither an attribkit nor a Captum"):
        as_local(nn.Linear)


# ---------- errors users can act on, model untouched ----------

def snapshot(m):
    "Weights (values; shape only on the meta device), parameter identity, requires_grad, modes and hook counts."
    return ({k: v.clone() for k, v in m.state_dict().items()},
            {n: (id(p), p.requires_grad) for n, p in m.named_parameters()},
            {n: mod.training for n, mod in m.named_modules()},
            {(n, d): len(getattr(mod, d)) for n, mod in m.named_modules()
             for d in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")})


def assert_untouched(m, snap):
    state, grads, modes, hooks = snapshot(m)
    assert all(v.shape == state[k].shape if v.is_meta else torch.equal(state[k], v) for k, v in snap[0].items())
    assert (grads, modes, hooks) == snap[1:]


class NoHead(nn.Module):
    "A feature extractor: its output is (N, C, H, W), not (N, classes)."
    def __init__(self): super().__init__(); self.conv = nn.Conv2d(3, 4, 3)
    def forward(self, x): return self.conv(x)


class TupleOut(SmallCNN):
    def forward(self, x): return super().forward(x), x.mean()


METHODS = ["saliency", "gxi", "ig", "smoothgrad", "gradcam", "rise", "dga", ca.InputXGradient, "captum_object"]


def method_for(name, model):
    return ca.InputXGradient(model) if name == "captum_object" else name


def bad_calls():
    "(label, model, inputs, target, exception, message parts)"
    m, x, t = model_and_data()
    cpu_x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    return [
        ("batchless", m, x[0], 0, ValueError, ["`inputs`", "(3, 8, 8)", "inputs[None]"]),
        ("no_head", NoHead().double(), x, 0, ValueError, ["`model`: the model output has shape (1, 4, 6, 6)", "(N, classes)"]),
        ("tuple_out", TupleOut().double(), x, 0, TypeError, ["`model` returned a tuple", "out[0]"]),
        ("target_range", m, x, 7, ValueError, ["`target`", "5 classes", "[0, 5)"]),
        ("target_2d", m, x, torch.zeros(4, 5, dtype=torch.long), ValueError, ["`target`", "(4, 5)"]),
        ("device", SmallCNN().double().to("meta"), cpu_x, 0, ValueError, ["`inputs` are on cpu", "(2, 3, 8, 8)", "inputs.to('meta')"]),
    ]


@pytest.mark.parametrize("case", bad_calls(), ids=lambda c: c[0])
@pytest.mark.parametrize("method", METHODS, ids=lambda m: m if isinstance(m, str) else "captum_class")
def test_bad_calls_raise_clear_errors_and_leave_model_untouched(case, method):
    label, model, inputs, target, exc, parts = case
    model.train(); model.conv.weight.requires_grad_(False)
    handle = model.conv.register_forward_hook(lambda *a: None)
    snap = snapshot(model)
    kw = {"n_masks": 8} if method == "rise" else {"n_steps": 3} if method in ("ig", "dga") else \
        {"n_samples": 3} if method == "smoothgrad" else {}
    if method == "gradcam": kw["layer"] = "conv"
    with pytest.raises(exc) as e:
        attribkit.attribute(model, inputs, target, method=method_for(method, model), **kw)
    for p in parts: assert p in str(e.value), (p, str(e.value))
    assert_untouched(model, snap)
    handle.remove()


def test_direct_class_call_checks_batch_too():
    from attribkit.attr import IntegratedGradients
    m, x, _ = model_and_data()
    with pytest.raises(ValueError, match=r"inputs\[None\]"):
        IntegratedGradients(m).attribute(x[0], target=0)


def test_check_call_is_cached_per_shape():
    m, x, t = model_and_data()
    calls = []
    h = m.register_forward_pre_hook(lambda *a: calls.append(1))
    check_call(m, x, t); check_call(m, x, t); check_call(m, x[:2], t[:2])
    assert len(calls) == 1  # one probe for this row shape, dtype and device
    h.remove()


def test_auto_batch_size_follows_activation_bytes():
    "More activation bytes per row → fewer rows; an MLP gets many rows, a wide CNN few (no timing here)."
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, 10))
    wide = nn.Sequential(nn.Conv2d(3, 128, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(128 * 32 * 32, 10))
    x, llc = torch.randn(2, 3, 32, 32), 32 * 2**20   # a fixed 32 MiB cache: the rule, not this machine's cache size
    assert auto_batch_size(wide, x, budget=llc) < 64 < auto_batch_size(mlp, x, budget=llc) <= 4096
    assert auto_batch_size(wide, x, budget=2**20) == max(1, 2**20 // ((3 + 128 + 128 + 128) * 32 * 32 * 4 + 40))


# ---------- Grad-CAM's default layer on a user's torchvision model ----------

TORCHVISION = {  # architecture: (the layer pytorch-grad-cam recommends, the module attribkit's default must be)
    "resnet18": (lambda m: m.layer4[-1], "layer4"),
    "resnet50": (lambda m: m.layer4[-1], "layer4"),
    "vgg16": (lambda m: m.features[-1], "features"),
    "densenet121": (lambda m: m.features[-1], "features"),
    "mobilenet_v3_small": (lambda m: m.features[-1], "features"),
    "efficientnet_b0": (lambda m: m.features[-1], "features"),
}


@pytest.mark.parametrize("arch", TORCHVISION)
def test_gradcam_default_layer_is_the_last_feature_block_as_captum_users_pick(arch):
    "Random weights (no download), two 64² images: the default is the recommended layer, and the maps equal Captum's there."
    import torchvision
    from captum.attr import LayerAttribution, LayerGradCam
    from attribkit.attr import GradCAM
    from attribkit.core import find_layer
    torch.manual_seed(0)
    m = getattr(torchvision.models, arch)(weights=None).eval()
    x, t = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1)), torch.tensor([3, 7])
    recommended, name = TORCHVISION[arch]
    snap = snapshot(m)
    assert find_layer(m, None, x) is dict(m.named_modules())[name]
    cap = LayerGradCam(m, recommended(m))
    raw = cap.attribute(x, t, relu_attributions=False).detach()         # (N, 1, h, w) at the layer's resolution
    assert raw.abs().amax() > 0
    torch.testing.assert_close(GradCAM(m, relu=False, upsample=False)(x, t), raw, rtol=1e-4, atol=1e-6 * float(raw.abs().amax()))
    ref = LayerAttribution.interpolate(cap.attribute(x, t, relu_attributions=True), (64, 64), "bilinear").detach()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a random model's positive part may be empty: tested below
        ours = GradCAM(m, channels="one")(x, t)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-6 * float(ref.abs().amax()) + 1e-12)
    assert_untouched(m, snap)


def test_gradcam_zero_map_at_default_layer_warns_naming_it():
    from attribkit.attr import GradCAM
    m, x, t = model_and_data()
    m.eval()
    with torch.no_grad(): m.bn.weight.zero_(); m.bn.bias.fill_(-1.0)   # the ReLU after `bn` is off everywhere
    with pytest.warns(UserWarning, match=r"zero everywhere for 4 of 4 inputs at the default layer 'bn'.*pass `layer=`"):
        out = GradCAM(m)(x, t)
    assert (out == 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GradCAM(m, "bn")(x, t)   # a layer the caller names: no warning


# ---------- progress on long calls: silent in tests unless asked for ----------

def long_calls(m, x, t):
    "{the bar's label: a call of a chunked attribution or metric taking `progress=`} on a user's model."
    from attribkit.attr import IntegratedGradients, RISE, SmoothGrad
    from attribkit.metrics import evaluate_pixel_flipping, insertion_deletion, pixel_flipping
    a = None if x is None else x.abs()
    return {"IG": lambda **kw: IntegratedGradients(m).attribute(x, target=t, n_steps=4, **kw),
            "SmoothGrad": lambda **kw: SmoothGrad(m, n_samples=3).attribute(x, t, seed=0, **kw),
            "RISE": lambda **kw: RISE(m).attribute(x, t, n_masks=8, **kw),
            "pixel flipping (MoRF)": lambda **kw: pixel_flipping(m, x, a, t, steps=4, **kw).curves,
            "insertion": lambda **kw: insertion_deletion(m, x, a, t, mode="insertion", steps=4, **kw).curves,
            "pixel flipping": lambda **kw: evaluate_pixel_flipping(m, (x, t), "gxi", batch_size=2, steps=4, **kw).curves}


@pytest.mark.parametrize("label", list(long_calls(None, None, None)))
def test_long_calls_are_silent_by_default_in_tests_and_show_a_bar_with_progress_true(label, capfd, monkeypatch):
    import attribkit.core as core
    m, x, t = model_and_data(); m.eval()
    call = long_calls(m, x, t)[label]
    ref = call()
    assert capfd.readouterr().err == ""                              # 'auto' under pytest: nothing on stderr
    torch.testing.assert_close(call(progress=True), ref)
    assert f"{label}:" in capfd.readouterr().err                    # the bar, named after the call
    monkeypatch.setattr(core, "_interactive", lambda: True)          # a person watching: 'auto' waits PROGRESS_DELAY s
    call()
    assert capfd.readouterr().err == ""                              # a call shorter than that shows nothing
    monkeypatch.setattr(core, "PROGRESS_DELAY", 0.0)
    call()
    assert f"{label}:" in capfd.readouterr().err
    with pytest.raises(ValueError, match="`progress` must be True, False or 'auto'"):
        call(progress="yes")


def test_interactive_means_a_terminal_or_a_kernel_outside_ci_and_tests(monkeypatch):
    import sys
    from attribkit.core import _interactive
    class Tty:
        def isatty(self): return True
        def write(self, s): return len(s)
        def flush(self): pass
    for k in ("PYTEST_CURRENT_TEST", "IN_TEST", "CI"): monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(sys, "stderr", Tty())
    assert _interactive()
    monkeypatch.setenv("CI", "true"); assert not _interactive()
    monkeypatch.setenv("CI", "false"); assert _interactive()
    monkeypatch.setenv("IN_TEST", "1"); assert not _interactive()      # nbdev_test
