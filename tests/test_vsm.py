"Tests for attribkit.vsm: closed-form Kronecker KL vs the dense form, top-k operators, encoder, frozen classifier."
import copy
import pytest
import torch
from torch import nn
from torch.distributions import MultivariateNormal, kl_divergence
from attribkit.core import attribute, available_methods
from attribkit.vsm import (SoftTVPrior, SaliencyEncoder, VariationalSaliency, ar1_precision, gumbel_topk, hard_topk,
                            kronecker_gaussian_kl, sinkhorn_topk, topk_count, tv_precision)

D64 = torch.float64


def dense_kl(mu, log_var, Ph, Pw):
    "KL through torch.distributions with the dense HW×HW Kronecker covariance (row-major vectorisation)."
    H, W = mu.shape[-2:]
    cov = torch.kron(torch.linalg.inv(Ph), torch.linalg.inv(Pw))
    p = MultivariateNormal(torch.zeros(H * W, dtype=mu.dtype), covariance_matrix=cov)
    q = MultivariateNormal(mu.reshape(-1, H * W), covariance_matrix=torch.diag_embed(log_var.reshape(-1, H * W).exp()))
    return kl_divergence(q, p).reshape(mu.shape[:-2])


PRIORS = [SoftTVPrior("ar1", 0.9), SoftTVPrior("ar1", 0.3), SoftTVPrior("tv", 2.0), SoftTVPrior("tv", 0.1), SoftTVPrior("iid"),
          SoftTVPrior("ar1", 0.9, "zero"), SoftTVPrior("tv", 2.0, "zero")]


@pytest.mark.parametrize("prior", PRIORS, ids=lambda p: f"{p.kind}-{p.strength}-{p.boundary}")
@pytest.mark.parametrize("hw", [(1, 1), (1, 5), (3, 4), (8, 8), (8, 2)])
def test_kl_matches_dense(prior, hw):
    H, W = hw
    g = torch.Generator().manual_seed(H * 10 + W)
    mu = 2 * torch.randn(2, 3, H, W, generator=g, dtype=D64)
    lv = torch.randn(2, 3, H, W, generator=g, dtype=D64)
    Ph, lh, Pw, lw = prior.factors(H, W, D64)
    ref = dense_kl(mu, lv, Ph, Pw)
    for ours in (kronecker_gaussian_kl(mu, lv, Ph, Pw, lh, lw), kronecker_gaussian_kl(mu, lv, Ph, Pw)):
        assert ours.shape == (2, 3)
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=0)
    torch.testing.assert_close(kronecker_gaussian_kl(mu, lv, Ph, Pw, reduction="sum"), ref.sum(), rtol=1e-5, atol=0)


def test_kl_zero_at_prior_and_positive_elsewhere():
    Ph, lh, Pw, lw = SoftTVPrior("tv", 1.0).factors(4, 5, D64)
    # q = prior is impossible with a diagonal q unless the prior is diagonal: check with the iid prior, then positivity
    I4, I5 = torch.eye(4, dtype=D64), torch.eye(5, dtype=D64)
    z = torch.zeros(1, 4, 5, dtype=D64)
    torch.testing.assert_close(kronecker_gaussian_kl(z, z, I4, I5), torch.zeros(1, dtype=D64))
    mu = torch.randn(6, 4, 5, dtype=D64, generator=torch.Generator().manual_seed(0))
    assert (kronecker_gaussian_kl(mu, 0 * mu, Ph, Pw, lh, lw) > 0).all()


@pytest.mark.parametrize("prior", [SoftTVPrior("ar1", 0.8), SoftTVPrior("tv", 1.5)], ids=["ar1", "tv"])
def test_kl_gradients_match_dense_autograd(prior):
    H, W = 5, 7
    g = torch.Generator().manual_seed(3)
    mu = torch.randn(2, H, W, generator=g, dtype=D64, requires_grad=True)
    lv = torch.randn(2, H, W, generator=g, dtype=D64, requires_grad=True)
    w = torch.tensor([0.3, 1.7], dtype=D64)
    Ph, lh, Pw, lw = prior.factors(H, W, D64)
    g_ours = torch.autograd.grad((w * kronecker_gaussian_kl(mu, lv, Ph, Pw, lh, lw)).sum(), (mu, lv))
    g_dense = torch.autograd.grad((w * dense_kl(mu, lv, Ph, Pw)).sum(), (mu, lv))
    for a, b in zip(g_ours, g_dense): torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)


def test_kl_bad_inputs():
    Ph, _, Pw, _ = SoftTVPrior().factors(3, 4, D64)
    with pytest.raises(ValueError, match="share a shape"): kronecker_gaussian_kl(torch.zeros(2, 3, 4), torch.zeros(2, 4, 3), Ph, Pw)
    with pytest.raises(ValueError, match="prec_h"): kronecker_gaussian_kl(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3), Ph, Pw)
    with pytest.raises(ValueError, match="reduction"): kronecker_gaussian_kl(torch.zeros(1, 3, 4, dtype=D64), torch.zeros(1, 3, 4, dtype=D64), Ph, Pw, reduction="avg")


def test_prior_factors_are_exact():
    for n in (1, 2, 7, 30):
        P, ld = tv_precision(n, 0.6, D64)
        torch.testing.assert_close(ld, torch.linalg.slogdet(P)[1])
        P, ld = ar1_precision(n, 0.95, D64)
        i = torch.arange(n)
        torch.testing.assert_close(P @ (0.95 ** (i[:, None] - i).abs().to(D64)), torch.eye(n, dtype=D64))
        torch.testing.assert_close(ld, torch.linalg.slogdet(P)[1])
    with pytest.raises(ValueError): ar1_precision(4, 1.0)
    with pytest.raises(ValueError): tv_precision(4, -1.0)


def test_topk_count():
    assert topk_count(0.1, 50) == 5 and topk_count(0.001, 50) == 1 and topk_count(1.0, 50) == 50 and topk_count(7, 5) == 5
    with pytest.raises(ValueError): topk_count(0.0, 10)
    with pytest.raises(ValueError): topk_count(1.5, 10)
    with pytest.raises(TypeError): topk_count("3", 10)


@pytest.mark.parametrize("k", [0.1, 0.37, 3])
def test_gumbel_topk_exact_k_and_gradients(k):
    g = torch.Generator().manual_seed(0)
    sc = torch.randn(4, 64, generator=g, dtype=D64, requires_grad=True)
    m = gumbel_topk(sc, k, generator=g)
    kk = topk_count(k, 64)
    assert set(m.detach().unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(m.detach().sum(1), torch.full((4,), float(kk), dtype=D64))
    (m * torch.linspace(-1, 1, 64, dtype=D64)).sum().backward()
    assert torch.isfinite(sc.grad).all() and (sc.grad.abs().sum(1) > 0).all()
    # without noise it is the exact top-k of the scores
    torch.testing.assert_close(gumbel_topk(sc.detach(), k, noise=0.0), hard_topk(sc.detach(), k))


@pytest.mark.parametrize("k", [0.1, 0.5, 5])
def test_sinkhorn_topk_sums_to_k_and_gradients(k):
    g = torch.Generator().manual_seed(1)
    sc = torch.randn(3, 80, generator=g, dtype=D64, requires_grad=True)
    kk = topk_count(k, 80)
    for unroll in (False, True):
        m = sinkhorn_topk(sc, k, epsilon=0.05, n_iter=300, unroll=unroll)
        torch.testing.assert_close(m.detach().sum(1), torch.full((3,), float(kk), dtype=D64), rtol=1e-6, atol=1e-6)
        assert (m.detach() >= 0).all() and (m.detach() <= 1 + 1e-6).all()
        torch.testing.assert_close(hard_topk(m.detach(), kk), hard_topk(sc.detach(), kk))
    # implicit-differentiation gradient = gradient through the unrolled (converged) Sinkhorn iterations
    w = torch.randn(3, 80, generator=g, dtype=D64)
    gi, = torch.autograd.grad((w * sinkhorn_topk(sc, k, epsilon=0.05, n_iter=300)).sum(), sc)
    gu, = torch.autograd.grad((w * sinkhorn_topk(sc, k, epsilon=0.05, n_iter=300, unroll=True)).sum(), sc)
    assert gi.abs().sum() > 0
    torch.testing.assert_close(gi, gu, rtol=1e-4, atol=1e-6)


def test_encoder_output_size_equals_input_size():
    enc = SaliencyEncoder(in_channels=2, width=0.125)
    for hw in [(7, 9), (16, 16), (1, 3)]:
        mu, lv = enc(torch.randn(2, 2, *hw))
        assert mu.shape == lv.shape == (2, *hw)
    convs = [m for m in SaliencyEncoder(3).modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 64, 64, 64, 32, 32, 32, 32, 32, 16, 16, 16, 16, 16, 16, 2]
    assert all(c.kernel_size == (3, 3) and c.stride == (1, 1) and c.padding == (1, 1) for c in convs)
    with pytest.raises(ValueError): SaliencyEncoder(3, channels=[8, 3])


def _tiny_classifier():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Dropout(0.2), nn.Linear(16, 3))


@pytest.mark.parametrize("topk", ["sinkhorn", "gumbel"])
def test_fit_leaves_classifier_bitwise_unchanged(topk):
    clf = _tiny_classifier().train()
    clf[-1].weight.requires_grad_(False)
    before = copy.deepcopy(clf.state_dict())
    flags = [p.requires_grad for p in clf.parameters()]
    x = torch.randn(12, 3, 10, 10, generator=torch.Generator().manual_seed(0))
    data = torch.utils.data.TensorDataset(x, torch.zeros(12))
    vsm = VariationalSaliency(clf, k=0.25, topk=topk, width=0.125).fit(data, epochs=1, batch_size=6, progress=False)
    after = clf.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert clf.training and [p.requires_grad for p in clf.parameters()] == flags
    assert all(p.grad is None for p in clf.parameters())
    assert len(vsm.history) == 1 and vsm.history[0]["loss"] == vsm.history[0]["loss"]
    assert not vsm.encoder.training


def test_fit_keeps_lowest_loss_state_and_registry():
    clf = _tiny_classifier().eval()
    x = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    vsm = VariationalSaliency(clf, k=0.2, width=0.125)
    vsm.fit(x, epochs=3, batch_size=8, progress=False, lr=1e-2)
    losses = [h["loss"] for h in vsm.history]
    assert len(losses) == 3
    # rerun with the same seed up to the best epoch: the kept encoder is that epoch's state
    best = int(torch.tensor(losses).argmin()) + 1
    ref = VariationalSaliency(clf, k=0.2, width=0.125).fit(x, epochs=best, batch_size=8, progress=False, lr=1e-2)
    for a, b in zip(vsm.encoder.state_dict().values(), ref.encoder.state_dict().values()): assert torch.equal(a, b)
    assert "vsm" in available_methods()
    a = vsm.attribute(x[:2])
    assert a.shape == x[:2].shape
    assert torch.equal(attribute(clf, x[:2], method="vsm", encoder=vsm.encoder), a)
    assert torch.equal(attribute(clf, x[:2], 1, method=vsm.as_local()), a)
    assert (vsm.uncertainty(x[:2]) > 0).all()
    with pytest.raises(RuntimeError, match="fit"): attribute(clf, x[:2], method="vsm")
    with pytest.raises(ValueError, match="different classifier"): vsm.as_local()(_tiny_classifier(), x[:2])


def test_fit_k_annealing_schedule():
    clf = _tiny_classifier().eval()
    x = torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    vsm = VariationalSaliency(clf, k=0.25, width=0.125).fit(x, epochs=3, batch_size=8, progress=False, k_start=1.0, anneal=0.5)
    # 6 steps, 3 of them annealing: k at the last step of each epoch is 1 - 0.75·min(1, t/3) for t = 1, 3, 5
    assert [round(h["k"], 6) for h in vsm.history] == [0.75, 0.25, 0.25]
    with pytest.raises(ValueError, match="k_start"): VariationalSaliency(clf, k=3).fit(x, k_start=0.5, progress=False)


@pytest.mark.parametrize("prior", [SoftTVPrior("ar1", 0.9), SoftTVPrior("tv", 4.0), SoftTVPrior("iid")])
def test_prior_samples_have_the_implied_covariance(prior):
    "Draws made with the Cholesky factors of the two small precisions have covariance κ_h⊗κ_w (an identity, not a claim)."
    n, h, w = 20000, 6, 7
    s = prior.sample(n, h, w, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    kh, kw = (torch.linalg.inv(prior.factor(m, torch.float64)[0]) for m in (h, w))
    implied = torch.kron(kh, kw)
    emp = s.flatten(1).T @ s.flatten(1) / n
    assert torch.allclose(emp, implied, atol=6 * implied.diagonal().max().item() / n**0.5)


@pytest.mark.parametrize("kind,strength", [("ar1", 0.9), ("tv", 4.0)])
def test_zero_boundary_flattens_the_kl_optimum_of_nu(kind, strength):
    "The mean-field KL optimum ν = 1/(P_h[i,i] P_w[j,j]) is brighter on the frame with free borders and flat with boundary='zero'."
    for boundary, flat in (("free", False), ("zero", True)):
        Ph, _, Pw, _ = SoftTVPrior(kind, strength, boundary).factors(6, 7, D64)
        nu = 1 / (torch.diagonal(Ph)[:, None] * torch.diagonal(Pw)[None, :])
        assert torch.allclose(nu, nu[3, 3].expand_as(nu)) == flat
        if not flat: assert nu[0, 3] > nu[3, 3]
    with pytest.raises(ValueError, match="boundary"): SoftTVPrior(kind, strength, "reflect")


def test_encoder_padding_mode():
    enc = SaliencyEncoder(3, width=0.125, padding_mode="replicate")
    assert all(m.padding_mode == "replicate" for m in enc.modules() if isinstance(m, nn.Conv2d))
    x = torch.randn(2, 3, 9, 9)
    assert enc(x)[0].shape == (2, 9, 9)
    clf = _tiny_classifier()
    vsm = VariationalSaliency(clf, k=0.25, width=0.125, padding="replicate").fit(x, epochs=1, batch_size=2, progress=False)
    assert all(m.padding_mode == "replicate" for m in vsm.encoder.modules() if isinstance(m, nn.Conv2d))


def test_paper_classifier_of_another_architecture_fails(tmp_path):
    "The VSM paper classifier (`weights`) holding another model's weights: a ValueError naming the file and the expected ResNet-50."
    from attribkit.models import lenet_300_100
    from attribkit.papers.variational_saliency import _classifier
    p = tmp_path / "resnet50.pth"; torch.save(lenet_300_100().state_dict(), p)
    with pytest.raises(ValueError) as e:
        _classifier(p)
    assert str(e.value).startswith(f"classifier weights (`weights`) {p} does not fit torchvision.models.resnet50(): the file has 6 tensors")


# ---- the paper layer (attribkit.papers.variational_saliency): each step on a hand-built setup ----

def _tiny_setup(tmp_path, seeds=1, accuracy=0.9):
    "12×12 images, a random 3-class classifier, VSMs fitted in memory for one epoch."
    from torch.utils.data import TensorDataset
    from attribkit.papers import variational_saliency as P
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 12, 12, generator=g)
    masks = torch.zeros(8, 3, 12, 12, dtype=torch.bool); masks[:, 0, 3:8, 3:8] = True; masks[:, 1, 6:10, 2:6] = True
    torch.manual_seed(0)
    clf = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 3)).eval()
    run = P.start("vsal_eval", P.BUDGETS, "cpu", seeds=seeds, out_dir=str(tmp_path))
    settings = dict(k=0.25, beta=0.1, prior="ar1", topk="sinkhorn", width=0.125, topk_kw=dict(n_iter=10))
    return P.Setup(run, x, masks.flatten(2).any(2), masks, ["a", "b", "c"], (0.0,) * 3, (1.0,) * 3, "a toy classifier",
                      {s: clf for s in run.seeds}, {s: accuracy for s in run.seeds}, {s: "toy" for s in run.seeds}, TensorDataset(x),
                      "toy", settings, dict(epochs=1, batch_size=8, lr=1e-3, k_start=None), torch.Generator().manual_seed(0), memory={})

def _scores(S, methods=None):
    from attribkit.papers import variational_saliency as P
    return P.score_maps(S, methods or P.METHODS, n_images=6, steps=3, rise_masks=8, dga_steps=2)


def test_vsal_eval_steps_on_a_tiny_setup(tmp_path):
    "score_maps → compare_methods: a table row per method, nine keyed claims with units from the shared rule, diagnoses by key, a saved JSON."
    import json
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path)
    res = P.compare_methods(S, _scores(S))
    assert res.extra["methods"] == list(P.METHODS) and len(res.claims) == 12
    assert {c["key"] for c in res.claims} == {f"eval/{w}/{m}" for w in ("vsm-over-best", "vsm-over-random", "best-over-random") for m in P.METRICS} | {P.CONTROL, P.REACH.key, P.OBJECTS.key}
    assert all(c["configuration"] == P.configuration(S.run.budget) for c in res.claims if c["role"] == "evidence")
    assert res.claim("eval/vsm-over-random/deletion")["n"] == 6 and res.claim("eval/vsm-over-random/deletion")["units"] == "paired images"
    assert "VSM arg-max on the 2-px frame (fraction)" in res.measured and "classifier top-1 hit rate, seed 0" in res.measured
    assert set(res.diagnoses) == {c["key"] for c in res.claims if c["verdict"] != "holds" and c["effect"] is not None}  # gated: none
    d = json.loads(res.save().read_text())
    assert d["name"] == "vsal_eval" and d["claims"][0]["key"].startswith("eval/")


def test_vsal_reach_read_against_the_object_oracle(tmp_path):
    "The diagnostic OBJECTS: VSM's keep-k minus the oracle's (the predicted class's true pixels kept first), per paired image; the reach's diagnosis reads it: VSM at the oracle, below it, or no oracle (ImageNet)."
    from dataclasses import replace
    from attribkit.papers import variational_saliency as P
    from attribkit.papers.variational_saliency.registry import _why_vsm
    S = _tiny_setup(tmp_path)
    scored = _scores(S)
    r, res = scored.raw["scores"][0], P.compare_methods(S, scored)
    c = res.claim(P.OBJECTS.key)
    assert c["role"] == "diagnostic" and c["n"] == 6 and c["units"] == "paired images"
    assert abs(c["effect"] - float((r["res"]["VSM"]["keep_k"] - r["objects_keep_k"]).mean())) < 1e-9
    assert res.measured[P.OBJECTS_CELL]["mean"] == res.extra["keep_k_objects"] == float(r["objects_keep_k"].double().mean())
    reach = dict(res.claim(P.REACH.key), effect=-0.4)
    res.extra["keep_k"] = dict(res.extra["keep_k"], VSM=0.40, RISE=0.80, random=0.10)
    mine = [x for x in res.claims if x["key"] != P.OBJECTS.key]
    for verdict, says in (("holds", "VSM keeps as much as the object's own pixels (within 0.1: the diagnostic holds), so what it misses of RISE's"),
                          ("fails", "the encoder has not learned where the objects are"),
                          ("inconclusive", "whether VSM keeps as much as the object's own pixels is inconclusive here (VSM minus them -0.049 ± 0.019, n = 5 seeds)"),
                          (None, "under-trained or too narrow")):   # the diagnosis reads the diagnostic's verdict, never its mean
        res.claims = mine + ([dict(c, verdict=verdict, effect=-0.049, se=0.019, n=5, units="seeds")] if verdict else [])
        assert says in _why_vsm(res, reach), (verdict, _why_vsm(res, reach))
    no_masks = replace(S, masks=None)
    assert "objects_keep_k" not in _scores(no_masks).raw["scores"][0]
    assert P.compare_methods(no_masks, _scores(no_masks)).claim(P.OBJECTS.key)["verdict"] == "not evaluable"


def test_vsal_eval_without_some_methods(tmp_path):
    "A reader drops methods: the table lacks them, claims that need a dropped method stay, not evaluable, naming it by its registry name; an unknown method is a ValueError."
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path)
    res = P.compare_methods(S, _scores(S, ["G×I", "DGA", "random"]))
    assert res.extra["methods"] == ["G×I", "DGA", "random"] and not any(k.startswith("VSM") for k in res.measured)
    c = res.claim("eval/vsm-over-best/insertion")
    assert c["verdict"] == "not evaluable" and "not run: vsm removed from the methods" in c["reasons"]
    assert res.claim("eval/best-over-random/insertion")["n"] == 6          # the control needs no VSM
    res = P.compare_methods(S, _scores(S, ["VSM", "random"]))
    assert any(r.startswith("no baseline compared") for r in res.claim("eval/vsm-over-best/deletion")["reasons"]) and res.extra["best_baseline"] == {}
    with pytest.raises(ValueError, match="`methods` must be"):
        P.score_maps(S, ["VSM", "LIME"])


def test_vsal_claims_not_evaluable_at_chance(tmp_path):
    "The shared chance rule on the classifier's top-1 hit rate (3 classes: floor 1/3 + 0.1·2/3 = 0.4)."
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path, accuracy=0.39)
    res = P.compare_methods(S, _scores(S, ["VSM", "G×I", "random"]))
    assert all(c["verdict"] == "not evaluable" and any("at chance" in r for r in c["reasons"]) for c in res.claims)
    S = _tiny_setup(tmp_path, accuracy=0.41)
    assert not any("at chance" in r for c in P.pipeline_result(S, P.pipeline_runs(S, n_images=6)).claims for r in c["reasons"])


def test_vsal_claims_not_evaluable_under_the_zoo_floor(tmp_path):
    "cpu: the zoo's classifier under its floor makes every claim of the three notebooks not evaluable with the reason, whatever its hit rate."
    from dataclasses import replace
    from attribkit.papers import variational_saliency as P
    why = "Mosaic VGG-6-BN/2 under its floor: test mAP 0.500 < 0.60"
    zoo = lambda v: {"Mosaic VGG-6-BN/2": dict(metric="test mAP", values=[v], floor=0.6)}
    S = replace(_tiny_setup(tmp_path, seeds=3, accuracy=0.9), stand_ins=zoo(0.5))
    for res in (P.compare_methods(S, _scores(S, ["VSM", "G×I", "random"])), P.pipeline_result(S, P.pipeline_runs(S, n_images=6))):
        assert res.claims and all(c["verdict"] == "not evaluable" and why in c["reasons"] for c in res.claims)
    assert not any(why in c["reasons"] for c in P.compare_methods(replace(S, stand_ins=zoo(0.7)), _scores(S, ["VSM", "G×I", "random"])).claims)


def test_vsal_diagnoses_read_measurements_not_text(tmp_path):
    "The eval rules read keep-k and the best baseline from the result: change them and the diagnosis changes; a claim's wording plays no part."
    from attribkit.claims import claim
    from attribkit.papers.experiment import Result, diagnose
    from attribkit.papers import variational_saliency as P
    run = P.start("vsal_eval", P.BUDGETS, "cpu", out_dir=str(tmp_path))
    failing = [claim("eval/vsm-over-best/pointing", "any words", [-1.0, -1.1, -0.9], units="seeds"),
               claim("eval/best-over-random/deletion", "other words", [-1.0, -1.1, -0.9], units="seeds")]
    extra = dict(keep_k={"VSM": 0.5, "G×I": 0.2, "random": 0.1}, settings=dict(k=0.25), best_baseline={"deletion": "G×I"}, units="seeds")
    labels = dict(raw=dict(labels={"vsm": "VSM", "gxi": "G×I", "random": "random"}))
    res = Result(run, claims=failing, extra=extra, measured={"VSM arg-max on the 2-px frame (fraction)": {"mean": 0.25, "se": 0.1, "n": 3}}, **labels)
    d = diagnose(res, P.RULES)
    assert "VSM wins its own objective" in d["eval/vsm-over-best/pointing"] and "25% of VSM's arg-max pixels" in d["eval/vsm-over-best/pointing"]
    assert "best baseline (G×I)" in d["eval/best-over-random/deletion"]
    res = Result(run, claims=failing, extra=dict(extra, keep_k={"VSM": 0.1, "G×I": 0.2}), raw=dict(labels={"vsm": "VSM", "gxi": "G×I"}))
    assert "does not even win its own objective" in diagnose(res, P.RULES)["eval/vsm-over-best/pointing"]


def test_vsal_prior_steps_on_a_tiny_setup(tmp_path):
    "prior_draws → posterior → edge_fixes → prior_result: keyed claims, the edge cells per fix, the findings from the measurements, a figure."
    import matplotlib.pyplot as plt
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path)
    draws = P.prior_draws(S, rho=0.9, lam=4.0, n_samples=64)
    post = P.posterior(S, n_images=6)
    fixed = P.edge_fixes(S, post, ["zero prior boundary"])
    res = P.prior_result(S, draws, post, fixed)
    assert [c["key"] for c in res.claims] == ["posterior/nu-off-over-on", P.CONTROL]   # the priors' correlations: cells (identities, tested above)
    assert res.measured["ar1 (rho=0.9): neighbour corr (implied)"] == pytest.approx(0.9)
    assert res.claim("posterior/nu-off-over-on")["n"] == 6
    assert res.measured["edge fix, zero prior boundary: ν edge / interior, KL optimum"] == pytest.approx(1.0)
    assert "Only zero prior boundary was fitted" in res.extra["edge_findings"] and len(res.tables) == 3
    with pytest.raises(ValueError, match="`fixes` must be"):
        P.edge_fixes(S, post, ["wider encoder"])
    res.figures["vsal_prior"] = P.prior_figure(res)
    res.save()
    assert (tmp_path / "figures" / "vsal_prior.png").exists()
    plt.close("all")


def test_vsal_schematic_steps_on_a_tiny_setup(tmp_path):
    "pipeline_runs → pipeline_result: a row per mask, two keyed claims on paired images."
    import matplotlib.pyplot as plt
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path)
    runs = P.pipeline_runs(S, n_images=6)
    res = P.pipeline_result(S, runs)
    assert [c["key"] for c in res.claims] == ["pipeline/vsm-over-random", "pipeline/vsm-over-brightest"]
    assert all(c["n"] == 6 for c in res.claims) and "top-1 kept, random mask" in res.measured
    plt.close(P.pipeline_figure(res, n=2))


def test_vsal_claims_tied_to_the_registry(tmp_path):
    "Every claim of the three steps names a registry id of PAPER_CLAIMS and a role; every registry claim has evidence, each piece with its configuration; no two registry claims rest on one measurement; stand-ins carry the accuracy."
    from attribkit.claims import check_distinct
    from attribkit.claims import ROLES
    from attribkit.papers import registry
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path, seeds=3)
    post = P.posterior(S, n_images=6)
    results = {"vsal_eval": P.compare_methods(S, _scores(S)),
               "vsal_prior": P.prior_result(S, P.prior_draws(S, n_samples=64), post, P.edge_fixes(S, post, [])),
               "vsal_schematic": P.pipeline_result(S, P.pipeline_runs(S, n_images=6))}
    ids = [c.id for c in P.PAPER_CLAIMS]
    assert len(ids) == len(set(ids)) == 3 and registry()["vsal"][1] == P.PAPER_CLAIMS
    claims = [(nb, c) for nb, r in results.items() for c in r.claims]
    assert all(c["paper_claim"] in ids and c["role"] in ROLES for _, c in claims), [(nb, c["key"]) for nb, c in claims]
    for pc in ids:
        assert any(c["paper_claim"] == pc and c["role"] == "evidence" for _, c in claims), pc
    assert all(c["configuration"] for _, c in claims if c["role"] == "evidence") and check_distinct(claims) is None
    assert [(nb, c["paper_claim"]) for nb, c in claims if c["paper_claim"] == "vsal/mask-keeps-prediction" and c["role"] == "evidence"] == [
        ("vsal_eval", "vsal/mask-keeps-prediction")]   # the encoder's fit: one piece, every seed's encoder; the pipeline's KL is a diagnostic
    assert not any(c["key"].startswith("prior/") for _, c in claims)        # correlations that hold by construction are no claims
    roles = {c["key"]: c["role"] for _, c in claims}
    assert roles["eval/vsm-over-best/deletion"] == "evidence" and roles["eval/best-over-random/deletion"] == "control"
    assert roles["eval/vsm-over-random/deletion"] == "diagnostic" and roles["pipeline/vsm-over-brightest"] == roles["pipeline/vsm-over-random"] == "diagnostic"
    assert all(r.stand_ins == {"a toy classifier": 0.9} for r in results.values())


def test_vsal_best_baseline_chosen_on_other_images(tmp_path):
    "The best baseline of each half of the test images is chosen on the other half: A wins the even images, B the odd ones, so B is judged on the even and A on the odd."
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path)
    t = lambda *v: torch.tensor(v, dtype=torch.float32)
    ins = {"VSM": t(0.5, 0.5, 0.5, 0.5), "G×I": t(0.9, 0.1, 0.9, 0.1), "DGA": t(0.2, 0.6, 0.2, 0.6), "random": t(0.3, 0.3, 0.3, 0.3)}
    res = {n: dict(insertion=v, deletion=1 - v, keep_k=v) for n, v in ins.items()}
    from attribkit.papers.experiment import Result
    r = P.compare_methods(S, Result(S.run, raw=dict(scores=[dict(seed=0, x=torch.zeros(4, 3, 12, 12), res=res)])))
    assert r.extra["best_baseline_folds"]["insertion"] == ["DGA", "G×I"] and r.extra["best_baseline"]["insertion"] == "DGA / G×I"
    c = r.claim("eval/vsm-over-best/insertion")          # VSM minus B (DGA) on images 0, 2 and minus A (G×I) on images 1, 3
    assert c["effect"] == pytest.approx(float(torch.tensor([0.3, 0.4, 0.3, 0.4]).mean())) and c["role"] == "evidence"
    assert "DGA for the even images, G×I for the odd ones" in c["detail"]
    assert r.claim("eval/best-over-random/deletion")["effect"] == pytest.approx(-0.15)   # random 0.7 against B 0.8 (even), A 0.9 (odd)


def test_vsm_cache_key_and_files_unchanged(tmp_path, monkeypatch):
    "fit_vsm keys an encoder as before the module moved onto models.cached (the record's encoders still load), in the old file format."
    from torch.utils.data import TensorDataset
    from attribkit.models import cache_key
    from attribkit.papers import variational_saliency as P
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path))
    clf = _tiny_classifier()
    x = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    settings, fit_kw = dict(k=0.25, width=0.125, prior=SoftTVPrior("ar1", 0.9, "zero"), padding="replicate"), dict(epochs=1, batch_size=4)
    old_key = cache_key("attribkit.vsal.VariationalSaliency", dict(settings, prior=["ar1", 0.9, "zero"], classifier="clf"), "data", fit_kw, 3)
    a = P.fit_vsm(clf, P._vsm_spec(settings, fit_kw, "clf", "data"), TensorDataset(x), seed=3)
    ck = torch.load(tmp_path / f"{old_key}.pt", weights_only=True)
    assert isinstance(ck["history"], list) and ck["history"] == a.history
    ck["history"] = [dict(h, loss=-1.0) for h in ck["history"]]; torch.save(ck, tmp_path / f"{old_key}.pt")
    b = P.fit_vsm(clf, P._vsm_spec(settings, fit_kw, "clf", "data"), TensorDataset(x), seed=3)
    assert b.history[0]["loss"] == -1.0                                  # read from the file, not refitted
    assert all(m.padding_mode == "replicate" for m in b.encoder.modules() if isinstance(m, nn.Conv2d))
    assert torch.equal(a.attribute(x[:2]), b.attribute(x[:2])) and b.prior.boundary == "zero"


@pytest.mark.slow
def test_vsal_eval_notebook_runs_with_two_methods_dropped(tmp_path):
    "A reader's edit of vsal_eval: drop DGA and Grad-CAM from `methods`; the notebook runs at smoke and its results lack them."
    import json
    from pathlib import Path
    import nbformat, papermill as pm
    src = Path(__file__).parents[1] / "nbs" / "repro" / "vsal_eval.ipynb"
    nb = nbformat.read(src, as_version=4)
    line = 'methods = ["VSM", "G×I", "DGA", "RISE", "Grad-CAM", "intensity", "random"]'
    cell = next(c for c in nb.cells if line in c.source)
    cell.source = cell.source.replace(line, 'methods = ["VSM", "G×I", "RISE", "intensity", "random"]')
    edited = tmp_path / "vsal_eval.ipynb"
    nbformat.write(nb, edited)
    pm.execute_notebook(str(edited), str(tmp_path / "out.ipynb"), parameters=dict(scale="smoke", out_dir=str(tmp_path), device="cpu"),
                        kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    d = json.loads((tmp_path / "vsal_eval.json").read_text())
    assert d["extra"]["methods"] == ["VSM", "G×I", "RISE", "intensity", "random"]
    assert not any(k.startswith(("DGA", "Grad-CAM")) for k in d["measured"]) and "VSM deletion" in d["measured"]


def test_vsal_encoder_control_gates_the_evidence(tmp_path):
    "The encoder's keep-k against a random map on held-out images (seeds from 3 on) is the evidence that the encoder fits its objective and the gate of the comparisons: if it fails, the evidence that needs a working encoder is not evaluable and names it (`gated_by`, `gate`), and the comparisons' registry verdict does not count it."
    from attribkit.claims import claim, gate, paper_verdict
    from attribkit.papers import variational_saliency as P
    S = _tiny_setup(tmp_path, seeds=3)
    res = P.compare_methods(S, _scores(S, ["VSM", "G×I", "random"]))
    c = res.claim(P.CONTROL)
    assert c["role"] == "evidence" and c["paper_claim"] == "vsal/mask-keeps-prediction" and c["n"] == 3 and c["units"] == "seeds"
    assert set(res.extra["encoder_check"]) == {0, 1, 2} and all("heldout_keep_k" in h[-1] for h in res.extra["vsm_history"].values())
    ev = [x for x in res.claims if x["key"].startswith("eval/vsm-over-best/") and x["role"] == "evidence"]
    comp = {x["key"] for x in ev}   # the comparisons with the best baseline (its keep-k control, `REACH`, gates them)
    assert ev and all(x["gated_by"] == [P.CONTROL, P.REACH.key] for x in ev) and not any(x["gated_by"] for x in res.claims if x not in ev)
    assert all((x["verdict"] == "not evaluable" and f"control {P.CONTROL} fails" in x["reasons"]) == (c["verdict"] == "fails") for x in ev)
    failed = claim(P.CONTROL, "fits", [-0.1, -0.11, -0.09], units="seeds", paper_claim="vsal/mask-keeps-prediction", configuration="paper")
    others = [x for x in res.claims if x["key"] != P.CONTROL]
    gated = gate(others + [failed])
    assert all(x["verdict"] == "not evaluable" and f"control {P.CONTROL} fails" in x["reasons"] and x["n"] == 3 and x["units"] == "seeds"
               for x in gated if x["key"] in comp)
    assert [x for x in gated if x["key"] not in comp] == [x for x in others if x["key"] not in comp] + [failed]
    pc = P.PAPER_CLAIMS[0]
    row = paper_verdict(pc, [("vsal_eval", x) for x in gated])
    assert row["verdict"] == "not evaluable" and not row["support"].startswith("control")   # gated, not counted twice
    assert paper_verdict(P.PAPER_CLAIMS[1], [("vsal_eval", x) for x in gated])["verdict"] == "fails"   # the fit check itself
    held = claim(P.CONTROL, "fits", [0.1, 0.11, 0.09], units="seeds", paper_claim="vsal/mask-keeps-prediction", configuration="paper")
    assert gate(others + [held])[:-1] == others


def test_vsal_encoder_curve_is_in_the_cache_key(tmp_path, monkeypatch):
    "The held-out curve enters the cached history, so a hook without `spec['curve']` (or the reverse) is a ValueError that names both."
    from torch.utils.data import TensorDataset
    from attribkit.papers import variational_saliency as P
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path))
    x = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    spec = P._vsm_spec(dict(k=0.25, width=0.125, prior="ar1"), dict(epochs=2, batch_size=4), "clf", "data")
    with pytest.raises(ValueError, match="`on_epoch` and `spec\\['curve'\\]` go together"):
        P.fit_vsm(_tiny_classifier(), spec, TensorDataset(x), on_epoch=lambda v: {})
    v = P.fit_vsm(_tiny_classifier(), dict(spec, curve=dict(n=1)), TensorDataset(x), on_epoch=lambda v: dict(mu=float(v.encode(x[:1])[0].mean())))
    assert [sorted(h) for h in v.history] == [["epoch", "k", "kl", "likelihood", "loss", "mu"]] * 2


def test_vsal_eval_gradcam_keeps_the_records_layer_the_last_conv():
    "vsal_eval's Grad-CAM reads the last nn.Conv2d, as the record did, not the default layer (the last feature block)."
    import attribkit.papers.variational_saliency as P
    from attribkit.attr import GradCAM
    kw = P._method_kw("Grad-CAM", None, 0, 8, 2)
    m = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 36, 4)).double().eval()
    x = torch.randn(2, 1, 6, 6, dtype=D64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(attribute(m, x, [0, 1], **kw), GradCAM(m, "0")(x, [0, 1]))


@pytest.mark.slow
def test_vsal_eval_copy_without_vsm_keeps_its_claims(tmp_path):
    "A renamed copy of vsal_eval with VSM removed from `methods` runs at smoke; every claim that needs VSM is still there, not evaluable, its reasons naming it."
    import json
    from pathlib import Path
    import nbformat, papermill as pm
    from attribkit.papers import variational_saliency as P
    nb = nbformat.read(Path(__file__).parents[1] / "nbs" / "repro" / "vsal_eval.ipynb", as_version=4)
    line = 'methods = ["VSM", "G×I", "DGA", "RISE", "Grad-CAM", "intensity", "random"]'
    cell = next(c for c in nb.cells if line in c.source)
    cell.source = cell.source.replace(line, 'methods = ["G×I", "DGA", "RISE", "Grad-CAM", "intensity", "random"]')
    copy = tmp_path / "my_vsal_eval_copy.ipynb"
    nbformat.write(nb, copy)
    pm.execute_notebook(str(copy), str(tmp_path / "out.ipynb"), parameters=dict(scale="smoke", out_dir=str(tmp_path), device="cpu"),
                        kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    claims = {c["key"]: c for c in json.loads(next(tmp_path.glob("vsal_eval*.json")).read_text())["claims"]}
    need = [s.key for _, _, s in P.EVAL_CLAIMS if "vsm" in s.needs] + [P.CONTROL, P.REACH.key, P.OBJECTS.key]
    assert len(need) == 9 and set(need) <= set(claims)
    assert all(claims[k]["verdict"] == "not evaluable" and any("vsm removed from the methods" in r for r in claims[k]["reasons"]) for k in need)
    assert not any("removed" in r for k, c in claims.items() if k not in need for r in c["reasons"])   # the baselines' control needs no VSM
