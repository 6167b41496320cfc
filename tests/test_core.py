"Bad-input errors, target resolution and model-scope hygiene of attribkit.core."
import pytest, torch
from torch import nn
from attribkit.core import (check_inputs, resolve_target, target_grad, model_scope, batch_quantile,
                            predict_target, attribute, auto_batch_size, check_model)


from conftest import make_cnn as tiny   # Conv(1→2) → ReLU → Linear(32→3), float64


@pytest.mark.parametrize("bad, exc, msg", [
    (torch.ones(2, 1, 4, 4, dtype=torch.long), TypeError, "floating dtype"),
    (torch.ones(4), ValueError, "batch-first"),
    (torch.full((1, 1, 4, 4), float("nan")), ValueError, "NaN"),
    ([[1.0]], TypeError, "torch.Tensor"),
])
def test_check_inputs_errors_name_argument(bad, exc, msg):
    with pytest.raises(exc, match=msg) as e:
        check_inputs(bad, ndim=None)
    assert "`inputs`" in str(e.value)


def test_wrong_ndim_named():
    with pytest.raises(ValueError, match="`inputs` must have 4 dimensions"):
        check_inputs(torch.ones(2, 4, 4), ndim=4)


def test_target_out_of_range_and_length():
    m, x = tiny(), torch.randn(2, 1, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="`target` out of range"):
        target_grad(m, x, 3)
    with pytest.raises(ValueError, match="`target` has length 3"):
        target_grad(m, x, [0, 1, 2])
    with pytest.raises(ValueError, match="out of range"):
        resolve_target(-1, 2)


def test_none_target_is_prediction():
    m, x = tiny(), torch.randn(5, 1, 4, 4, dtype=torch.float64)
    assert torch.equal(target_grad(m, x, None), target_grad(m, x, predict_target(m, x)))


def test_model_output_shape_checked():
    m = nn.Sequential(nn.Conv2d(1, 2, 3))
    with pytest.raises(ValueError, match="model output must have shape"):
        target_grad(m, torch.randn(2, 1, 4, 4), 0)


def test_model_scope_restores_after_exception():
    m = tiny().train()
    m[0].weight.requires_grad_(False)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(RuntimeError):
        with model_scope(m):
            m[1].register_forward_hook(lambda *a: None)
            m[3].register_full_backward_hook(lambda *a: None)
            m[0].register_forward_pre_hook(lambda *a: None)
            assert not m.training and not m[3].weight.requires_grad
            raise RuntimeError("boom")
    assert all(mod.training for mod in m.modules())
    assert not m[0].weight.requires_grad and m[3].weight.requires_grad
    assert all(len(mod._forward_hooks) == len(mod._backward_hooks) == len(mod._forward_pre_hooks) == 0 for mod in m.modules())
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())


def test_model_scope_keeps_user_hooks():
    m = tiny()
    h = m[1].register_forward_hook(lambda *a: None)
    with model_scope(m):
        m[1].register_forward_hook(lambda *a: None)
    assert list(m[1]._forward_hooks) == [h.id]


def test_devices_must_match():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    with pytest.raises(ValueError, match="`inputs` are on"):
        attribute(tiny(), torch.randn(1, 1, 4, 4, dtype=torch.float64, device="cuda"), 0, method=lambda m, x, t: check_model(m, x))


def test_batch_quantile_large():
    x = torch.randn(1, 17_000_000)
    q = batch_quantile(x, 0.9)
    assert abs(float(q) - 1.2816) < 0.01


def test_auto_batch_size_respects_budget():
    m, x = tiny(), torch.randn(1, 1, 4, 4, dtype=torch.float64)
    assert auto_batch_size(m, x, budget=10_000, cap=10**6) == 10_000 // ((16 + 32 + 32 + 32 + 3) * 8)  # CPU: activations within `budget`
