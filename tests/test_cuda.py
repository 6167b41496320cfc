"A model on CUDA with a data set on the CPU: the functions that take a data set move its batches to the model's device and give what the CPU gives (skipped without CUDA; `make gpu-check` runs them on a CUDA machine)."
import pytest, torch
from torch import nn
from attribkit.core import attribute, model_device
from attribkit.mask import mask_dataset, masked_input_accuracy
from attribkit.metrics import roar
from roar_toy import roar_data, roar_factory, roar_train
from test_mask import data, nib

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def on_cuda(m: nn.Module) -> nn.Module:
    import copy
    return copy.deepcopy(m).cuda()


def test_mia_and_mask_dataset_move_batches_to_the_model():
    m, (x, y) = nib(), data()
    g = on_cuda(m)
    before = {k: v.clone() for k, v in g.state_dict().items()}
    for method in ("gxsi", "gxi", "random"):
        cpu = masked_input_accuracy(m, (x, y), method, 3, batch_size=5, progress=False, per_sample=True)
        gpu = masked_input_accuracy(g, (x, y), method, 3, batch_size=5, progress=False, per_sample=True)
        assert gpu.device.type == "cpu" and torch.equal(cpu, gpu), method
    ds_cpu = mask_dataset(m, (x, y), "gxsi", 2, progress=False)
    ds_gpu = mask_dataset(g, (x, y), "gxsi", 2, progress=False)
    assert ds_gpu.tensors[0].device.type == "cpu"
    torch.testing.assert_close(ds_gpu.tensors[0], ds_cpu.tensors[0], rtol=1e-9, atol=1e-12)
    assert model_device(g).type == "cuda" and all(torch.equal(before[k], v) for k, v in g.state_dict().items())


def test_roar_with_a_cuda_model_and_cpu_data():
    g = torch.Generator().manual_seed(0)
    (xtr, ytr), (xte, yte) = roar_data(64, g), roar_data(32, g)
    torch.manual_seed(0)
    teacher = roar_factory()
    roar_train(30)(teacher, xtr, ytr, None)
    kw = dict(fractions=(0.2, 0.6), random_control=True, progress=False, seed=3)
    cpu = roar((xtr, ytr), (xte, yte), "saliency", roar_factory, roar_train(20), model=teacher, **kw)
    gpu = roar((xtr, ytr), (xte, yte), "saliency", roar_factory, roar_train(20), model=on_cuda(teacher), **kw)
    for k in cpu.scores:
        torch.testing.assert_close(gpu.scores[k], cpu.scores[k], rtol=0, atol=1 / 32 + 1e-9)   # at most one test image apart


@pytest.mark.parametrize("method, kw", [("saliency", {}), ("gxi", {}), ("ig", dict(n_steps=16)), ("gradcam", {})])
def test_attributions_agree_with_the_cpu(method, kw):
    m, (x, y) = nib(), data()
    a = attribute(m, x, y, method=method, **kw)
    b = attribute(on_cuda(m), x.cuda(), y.cuda(), method=method, **kw)
    assert b.device.type == "cuda"
    torch.testing.assert_close(b.cpu(), a, rtol=1e-7, atol=1e-9 * float(a.abs().max()))


def test_smoothgrad_draws_its_seeded_noise_on_the_inputs_device():
    from attribkit.attr.gradient import SmoothGrad
    m, (x, y) = nib(), data()
    g, xc, yc = on_cuda(m), x.cuda(), y.cuda()
    a, b = (SmoothGrad(g, n_samples=8).attribute(xc, yc, seed=s) for s in (5, 5))
    assert a.device.type == "cuda"   # the same noise (CUDA's gradients may differ in the last bits, not the noise's 1e-3)
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12 * float(a.abs().max()))
    other = SmoothGrad(g, n_samples=8).attribute(xc, yc, seed=6)
    assert (other - a).abs().max() > 1e-6 * float(a.abs().max())
    zero = SmoothGrad(g, n_samples=3, noise_level=0.0).attribute(xc, yc, seed=5)   # no noise: the saliency map
    torch.testing.assert_close(zero.cpu(), attribute(m, x, y, method="saliency"), rtol=1e-7, atol=1e-12)
