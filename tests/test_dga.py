"DGA against an independent re-implementation of the paper's appendix listing, and its contract."
import pytest, torch
from torch import nn
from attribkit.core import target_grad, model_scope
from attribkit.dga import DGA, appendix_dga, epc_mask, wc_mask


def gxi(model, x, t):
    return x * target_grad(model, x, t)


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 5)).double().eval()


@pytest.mark.parametrize("n_steps, q", [(30, 0.9), (7, 0.6), (10, 1.0)])
def test_matches_appendix_listing(n_steps, q):
    m, x = cnn(), torch.randn(4, 3, 8, 8, dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 3])
    ours = DGA(m, local=gxi, n_steps=n_steps, epc_ratio=q).attribute(x, t)
    torch.testing.assert_close(ours, appendix_dga(x, m, t, gxi, q, n_steps), rtol=1e-5, atol=1e-8)


def test_batched_equals_per_sample_and_deterministic():
    m, x = cnn(), torch.randn(5, 3, 8, 8, dtype=torch.float64)
    d = DGA(m, local=gxi, n_steps=12)
    full = d.attribute(x, 1)
    torch.testing.assert_close(full, torch.cat([d.attribute(x[i:i + 1], 1) for i in range(5)]))
    assert torch.equal(full, d.attribute(x, 1))


def test_one_step_is_relu_of_local():
    m, x = cnn(), torch.randn(2, 3, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(DGA(m, local=gxi, n_steps=1).attribute(x, 3), gxi(m, x, torch.tensor([3, 3])).clamp_min(0))


def test_epc_ratio_one_drops_at_most_the_top_element():
    phi = torch.randn(6, 3, 8, 8, dtype=torch.float64)
    dropped = (1 - epc_mask(phi, 1.0)).flatten(1).sum(1)
    assert (dropped <= 1).all() and (dropped >= 1).all()  # no ties in continuous data: exactly the maximum


def test_negative_scale_and_mask_variants():
    m, x = cnn(), torch.randn(2, 3, 8, 8, dtype=torch.float64)
    pos = DGA(m, local=gxi, n_steps=1).attribute(x, 0)
    both = DGA(m, local=gxi, n_steps=1, negative_scale=0.5).attribute(x, 0)
    phi = gxi(m, x, torch.tensor([0, 0]))
    torch.testing.assert_close(both, pos + 0.5 * phi.clamp_max(0))
    for masks in ("wc", "epc"):
        out = DGA(m, local=gxi, n_steps=4, masks=masks).attribute(x, 0)
        assert out.shape == x.shape and (out >= 0).all()
    # WC-only masks are hard (0/1); the combined mask is soft with values in {0, r, 1-r, 1}
    phi = torch.randn(1, 3, 4, 4, dtype=torch.float64)
    vals = set((0.3 * wc_mask(phi, 0.3) + 0.7 * epc_mask(phi, 0.9)).unique().tolist())
    assert vals <= {0.0, 0.3, 0.7, 1.0}


def test_contract_shape_dtype_device_hygiene():
    m, x = cnn().train(), torch.randn(2, 3, 8, 8, dtype=torch.float64)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    out = DGA(m, local=gxi, n_steps=3).attribute(x, None)
    assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device and not out.requires_grad
    assert m.training and all(p.requires_grad for p in m.parameters())
    assert all(len(mod._forward_hooks) == 0 for mod in m.modules())
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())


@pytest.mark.parametrize("kw, msg", [({"n_steps": 0}, "`n_steps`"), ({"epc_ratio": 1.5}, "`epc_ratio`"),
                                     ({"masks": "all"}, "`masks`")])
def test_bad_config(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DGA(cnn(), local=gxi, **kw)
