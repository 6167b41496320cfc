"Tests for attribkit.distill: maps, losses, the trainer's double backprop and hygiene, pruning, evaluation."
import copy, math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from attribkit.distill import (forward_with_activation, swa_map, ewa_map, channel_drop_mask, attribution_matching_loss,
                               multilabel_kd_loss, multiclass_kd_loss, distill, _student_teacher_maps, conv_rates,
                               conv_names, l1_filter_prune, magnitude_masks, apply_masks, sparsity,
                               iterative_magnitude_prune, evaluate_compression)
from attribkit.papers.distillation import _VGG16_PRUNE_PATTERN as VGG16_PRUNE_PATTERN
from attribkit.core import attribute



@pytest.fixture(autouse=True)
def _float64():
    "float64 by default in this module only (a module-level set_default_dtype leaked into every later-run test file)."
    old = torch.get_default_dtype(); torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _net(c: int, act=nn.ReLU, hidden: int = 16, k: int = 5) -> nn.Sequential:
    "conv → act → maxpool (the matching layer '2') → flatten → FC → act → FC."
    return nn.Sequential(nn.Conv2d(3, c, 3, padding=1), act(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(c * 4 * 4, hidden), act(), nn.Linear(hidden, k))


def _data(n=16, k=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 8, 8, generator=g), (torch.rand(n, k, generator=g) > 0.6).double()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------- maps
def test_swa_map_is_hand_gradcam_with_alpha_sum():
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3))
    x = torch.randn(3, 3, 8, 8)
    z, A = forward_with_activation(net, "2", x)
    c = z.argmax(1)
    Wc = net[4].weight[c].view(3, 4, 4, 4)                      # ∂z_c/∂A of a linear head
    hand = F.relu((Wc.sum((2, 3), keepdim=True) * A).sum(1, keepdim=True))
    torch.testing.assert_close(swa_map(z, A, c), hand.detach())
    # the registry's Grad-CAM (gradient *mean*) at the same layer is the same map divided by h·w
    cam = attribute(net, x, c, method="gradcam", layer="2", upsample=False, channels="one")
    torch.testing.assert_close(swa_map(z, A, c), cam * 16)
    torch.testing.assert_close(ewa_map(A), A.pow(2).mean(1, keepdim=True))


def test_hook_removed_after_forward_with_activation():
    net = _net(4)
    forward_with_activation(net, "2", torch.randn(2, 3, 8, 8))
    assert not net[2]._forward_hooks


def test_channel_drop_mask():
    m = channel_drop_mask(20, 0.3, torch.Generator().manual_seed(1))
    assert m.shape == (1, 20, 1, 1) and m.sum() == 14 and set(m.unique().tolist()) == {0.0, 1.0}
    torch.testing.assert_close(m, channel_drop_mask(20, 0.3, torch.Generator().manual_seed(1)))
    assert channel_drop_mask(20, 0.0).sum() == 20
    with pytest.raises(ValueError, match="drop_percent"): channel_drop_mask(20, 1.0)


def test_sswa_zeroes_teacher_channels_after_gradient_and_p0_equals_swa():
    teacher, student = _net(8), _net(4)
    x, _ = _data()
    swa = _student_teacher_maps("swa", student, teacher, "2", "2", x, 0.0, torch.Generator().manual_seed(0))
    ss0 = _student_teacher_maps("sswa", student, teacher, "2", "2", x, 0.0, torch.Generator().manual_seed(0))
    for a, b in zip(swa, ss0): torch.testing.assert_close(a, b)
    ss = _student_teacher_maps("sswa", student, teacher, "2", "2", x, 0.5, torch.Generator().manual_seed(3))
    mask = channel_drop_mask(8, 0.5, torch.Generator().manual_seed(3))
    z, A = forward_with_activation(teacher, "2", x.clone().requires_grad_(True))
    c = z.argmax(1)
    g, = torch.autograd.grad(z.gather(1, c[:, None]).sum(), A)          # α from the *full* gradient
    torch.testing.assert_close(ss[3], F.relu((g.sum((2, 3), keepdim=True) * A * mask).sum(1, keepdim=True)).detach())
    assert not torch.allclose(ss[3], swa[3])
    torch.testing.assert_close(ss[2], swa[2])                            # the student's map is never perturbed


def test_distill_sswa_p0_equals_swa():
    x, y = _data()
    runs = []
    for variant in ("swa", "sswa"):
        torch.manual_seed(0); teacher, student = _net(8), _net(4)
        h = distill(teacher, student, (x, y), variant, "2", "2", epochs=2, batch_size=8, drop_percent=0.0, progress=False)
        runs.append((h, student.state_dict()))
    assert runs[0][0] == runs[1][0]
    for k, v in runs[0][1].items(): torch.testing.assert_close(v, runs[1][1][k])


# ---------------------------------------------------------------- losses
def test_matching_loss_direct_formula():
    s, t = torch.rand(3, 1, 4, 4), torch.rand(3, 1, 4, 4)
    direct = 0.0
    for i in range(3):
        a, b = s[i].flatten(), t[i].flatten()
        direct += float(((a / math.sqrt(float((a * a).sum())) - b / math.sqrt(float((b * b).sum()))) ** 2).sum())
    assert attribution_matching_loss(s, t).item() == pytest.approx(direct / 48, rel=1e-10)
    assert attribution_matching_loss([s, s], [t, t]).item() == pytest.approx(2 * direct / 48, rel=1e-10)
    assert attribution_matching_loss(s, 5 * s).item() == pytest.approx(0.0, abs=1e-12)   # scale invariant
    with pytest.raises(ValueError, match="differ"): attribution_matching_loss(s, torch.rand(3, 1, 2, 2))


def test_multilabel_kd_loss_direct_formula():
    s, t = torch.randn(4, 5), torch.randn(4, 5)
    y = (torch.rand(4, 5) > 0.5).double()
    T, a = 4.0, 0.9
    kl = 0.0
    for i in range(4):
        for k in range(5):
            pt, ps = 1 / (1 + math.exp(-t[i, k] / T)), 1 / (1 + math.exp(-s[i, k] / T))
            kl += pt * math.log(pt / ps) + (1 - pt) * math.log((1 - pt) / (1 - ps))
    mlsm = -sum(float(y[i, k]) * math.log(1 / (1 + math.exp(-s[i, k]))) + (1 - float(y[i, k])) *
                math.log(1 / (1 + math.exp(s[i, k]))) for i in range(4) for k in range(5)) / 20
    direct = a * kl * T * T / 4 + (1 - a) * mlsm
    assert multilabel_kd_loss(s, t, y, T, a).item() == pytest.approx(direct, rel=1e-5)


def test_multiclass_kd_loss_direct_formula():
    s, t, y = torch.randn(4, 3), torch.randn(4, 3), torch.tensor([0, 2, 1, 1])
    ps, pt = F.softmax(s / 2, 1), F.softmax(t / 2, 1)
    kl = float((pt * (pt.log() - ps.log())).sum()) / 4
    ce = -float(F.log_softmax(s, 1)[torch.arange(4), y].mean())
    assert multiclass_kd_loss(s, t, y, T=2.0, alpha=0.7).item() == pytest.approx(0.7 * 4 * kl + 0.3 * ce, rel=1e-10)


# ---------------------------------------------------------------- double backprop
def _matching_grads(student, teacher, x, create_graph):
    c = teacher(x).argmax(1)
    zt, At = forward_with_activation(teacher, "2", x.clone().requires_grad_(True))
    t_map = swa_map(zt, At, c).detach()
    zs, As = forward_with_activation(student, "2", x)
    loss = attribution_matching_loss(swa_map(zs, As, c, create_graph=create_graph), t_map)
    return torch.autograd.grad(loss, [student[0].weight, student[6].weight], allow_unused=True)


def test_matching_gradient_flows_through_alpha_and_A():
    x, _ = _data()
    # ReLU net: the conv gets a gradient through A; the head only through α (absent without create_graph)
    teacher, student = _net(8), _net(4)
    (gc, gh), (gc0, gh0) = _matching_grads(student, teacher, x, True), _matching_grads(student, teacher, x, False)
    assert gc.abs().sum() > 0 and gh.abs().sum() > 0 and gh0 is None
    # smooth net: α also depends on the conv weights, so the conv gradient changes when α is differentiated
    teacher, student = _net(8, nn.Tanh), _net(4, nn.Tanh)
    (gc, _), (gc0, _) = _matching_grads(student, teacher, x, True), _matching_grads(student, teacher, x, False)
    assert not torch.allclose(gc, gc0)


def test_matching_loss_changes_student_conv_weights():
    x, y = _data()
    out = {}
    for variant in ("naive", "swa", "ewa"):
        torch.manual_seed(0); teacher, student = _net(8), _net(4)
        h = distill(teacher, student, (x, y), variant, "2", "2", epochs=1, batch_size=8, progress=False)
        out[variant] = (student[0].weight.detach().clone(), h)
    assert out["naive"][1]["aux"] == [0.0] and out["swa"][1]["aux"][0] > 0 and out["ewa"][1]["aux"][0] > 0
    assert not torch.allclose(out["naive"][0], out["swa"][0])
    assert not torch.allclose(out["naive"][0], out["ewa"][0])


def test_teacher_params_and_mode_unchanged():
    x, y = _data()
    teacher = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Dropout(0.5), nn.Linear(128, 5))
    student = _net(4)
    teacher.train()
    seen = []
    teacher.register_forward_pre_hook(lambda m, i: seen.append(m.training))
    before = copy.deepcopy(teacher.state_dict())
    flags = [p.requires_grad for p in teacher.parameters()]
    distill(teacher, student, (x, y), "sswa", "3", "2", epochs=1, batch_size=8, progress=False)
    assert seen and not any(seen)                                        # eval mode while distilling
    assert teacher.training and flags == [p.requires_grad for p in teacher.parameters()]
    for k, v in teacher.state_dict().items(): assert torch.equal(v, before[k]), k   # incl. BN running stats
    assert all(p.grad is None for p in teacher.parameters())
    assert not student.training


def test_bad_names_raise():
    x, y = _data()
    t, s = _net(8), _net(4)
    with pytest.raises(ValueError, match="variant"): distill(t, s, (x, y), "attention", "2", "2", progress=False)
    with pytest.raises(ValueError, match="teacher_layer"): distill(t, s, (x, y), "swa", progress=False)
    with pytest.raises(ValueError, match="nope"): distill(t, s, (x, y), "swa", "nope", "2", progress=False)
    with pytest.raises(ValueError, match="drop_percent"): distill(t, s, (x, y), "sswa", "2", "2", drop_percent=1.5, progress=False)
    with pytest.raises(ValueError, match="grad_masks"):
        distill(t, s, (x, y), "none", grad_masks={"9.weight": torch.ones(1)}, progress=False)
    with pytest.raises(ValueError, match="pattern"): conv_rates(t, 0.3, VGG16_PRUNE_PATTERN)      # 1 conv vs 13 entries
    with pytest.raises(ValueError, match="sparsity"): magnitude_masks(t, 1.0)


# ---------------------------------------------------------------- pruning
def _vgg(widths=(8, 8, 8)):
    layers, c = [], 3
    for w in widths: layers += [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU()]; c = w
    net = nn.Sequential(*layers, nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(c * 16, 5))
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(); m.running_var.uniform_(0.5, 2); m.weight.uniform_(0.5, 1.5); m.bias.normal_()
    return net.eval()


def test_l1_filter_prune_smaller_and_repeat_interleave():
    net = _vgg()
    rates = conv_rates(net, 0.5, pattern=(1, 0, 1))
    assert rates == {"0": 0.5, "6": 0.5}
    small = l1_filter_prune(net, rates)
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in net.parameters())
    assert (small[0].out_channels, small[3].in_channels, small[6].out_channels, small[12].in_features) == (4, 4, 4, 64)
    keep = net[6].weight.abs().sum((1, 2, 3)).topk(4).indices.sort().values
    torch.testing.assert_close(small[6].weight, net[6].weight[keep])
    cmask = torch.zeros(8, dtype=torch.bool); cmask[keep] = True
    torch.testing.assert_close(small[12].weight, net[12].weight[:, cmask.repeat_interleave(16)])   # not .repeat(16)
    # exactness: silencing the pruned channels (BN γ=β=0) in the original gives the pruned model's function
    ref = copy.deepcopy(net)
    with torch.no_grad():
        for conv, bn in ((0, 1), (6, 7)):
            k = ref[conv].weight.abs().sum((1, 2, 3)).topk(4).indices
            drop = torch.ones(8, dtype=torch.bool); drop[k] = False
            ref[bn].weight[drop] = 0; ref[bn].bias[drop] = 0
    x = torch.randn(3, 3, 8, 8)
    torch.testing.assert_close(small(x), ref(x))
    assert len(VGG16_PRUNE_PATTERN) == 13 and sum(VGG16_PRUNE_PATTERN) == 7


def test_magnitude_masks_global_threshold():
    net = _vgg()
    masks = magnitude_masks(net, 0.6)
    ws = torch.cat([p.detach().abs().flatten() for n, p in net.named_parameters() if n in masks])
    kept = torch.cat([m.flatten() for m in masks.values()]).bool()
    assert int((~kept).sum()) == int(math.floor(0.6 * ws.numel()))
    assert ws[kept].min() > ws[~kept].max()                             # one global threshold
    apply_masks(net, masks)
    assert sparsity(net) == pytest.approx(0.6, abs=1e-3)


def test_iterative_pruning_keeps_zeros():
    x, y = _data()
    net = _vgg((4, 4))
    pruned, masks, hist = iterative_magnitude_prune(net, net, (x, y), rounds=2, variant="swa", teacher_layer="6",
                                                    student_layer="6", epochs=1, lr=0.05, momentum=0.9, batch_size=8,
                                                    progress=False)
    assert [h["round"] for h in hist] == [1, 2]
    assert hist[0]["sparsity"] == pytest.approx(0.2, abs=0.01) and hist[1]["sparsity"] == pytest.approx(0.36, abs=0.01)
    params = dict(pruned.named_parameters())
    for n, m in masks.items(): assert (params[n][m == 0] == 0).all()
    assert not torch.equal(params["0.weight"][masks["0.weight"] == 1], dict(net.named_parameters())["0.weight"][masks["0.weight"] == 1])
    assert sparsity(net) == 0.0                                         # the original is untouched


# ---------------------------------------------------------------- evaluation
def test_evaluate_compression_against_direct_metrics():
    sk = pytest.importorskip("sklearn.metrics")
    net = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(96, 3))
    with torch.no_grad(): net[4].bias.fill_(0.3)
    x = torch.randn(12, 3, 8, 8)
    masks = torch.rand(12, 3, 8, 8) > 0.6
    y = masks.flatten(2).any(2).double()
    y[0] = 0; y[0, 1] = 1; masks[0, [0, 2]] = False                      # one single-label image
    res = evaluate_compression(net, (x, y, masks), layer="0", batch_size=5)
    z = net(x).detach()
    ap = [sk.average_precision_score(y[i].numpy(), z[i].numpy()) for i in range(12) if y[i].sum() > 0]
    assert res["mAP"] == pytest.approx(100 * sum(ap) / len(ap), rel=1e-9)
    f1 = sk.f1_score(y.numpy(), (z >= 0.5).numpy().astype(float), average="samples", zero_division=0)
    assert res["F1"] == pytest.approx(100 * f1, rel=1e-9)
    cls_ap = [sk.average_precision_score(y[:, k].numpy(), z[:, k].numpy()) for k in range(3)]
    assert res["mAP_class"] == pytest.approx(100 * sum(cls_ap) / 3, rel=1e-9)
    ii, kk = ((y > 0) & (z > 0)).nonzero(as_tuple=True)
    aucs, hits, union = [], [], {}
    for i, k in zip(ii.tolist(), kk.tolist()):
        zz, A = forward_with_activation(net, "0", x[i:i + 1])
        g, = torch.autograd.grad(zz[0, k], A)
        h = F.relu((g.sum((2, 3)) [..., None, None] * A).sum(1))[0].detach().flatten()
        m = masks[i, k].flatten()
        aucs.append(sk.roc_auc_score(m.numpy(), h.numpy()))
        union[i] = union.get(i, torch.zeros_like(m)) | m
        hits.append(float(union[i][h.argmax()]))
    assert res["gradcam"]["pairs"] == len(ii) > 0
    assert res["gradcam"]["AUC"] == pytest.approx(100 * sum(aucs) / len(aucs), rel=1e-9)
    assert res["gradcam"]["PointAcc"] == pytest.approx(100 * sum(hits) / len(hits), rel=1e-9)


def test_evaluate_compression_other_maps_and_no_masks():
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3))
    with torch.no_grad(): net[4].bias.fill_(0.5)
    x = torch.randn(6, 3, 8, 8); masks = torch.rand(6, 3, 8, 8) > 0.5; y = masks.flatten(2).any(2).double()
    res = evaluate_compression(net, (x, y, masks), maps={"gradcam": {"layer": "0"}, "fullgrad": {}})
    assert set(res) == {"mAP", "mAP_class", "F1", "gradcam", "fullgrad"}
    assert 0 <= res["fullgrad"]["AUC"] <= 100 and res["fullgrad"]["pairs"] == res["gradcam"]["pairs"]
    assert set(evaluate_compression(net, (x, y))) == {"mAP", "mAP_class", "F1"}
    with pytest.raises(ValueError, match="unknown attribution"): evaluate_compression(net, (x, y, masks), maps=["nomap"])
    with pytest.raises(ValueError, match="multi-hot"): evaluate_compression(net, (x, torch.zeros(6, dtype=torch.long)))


# ---------------------------------------------------------------- teacher cache, warm-up, controls
@pytest.mark.parametrize("variant", ["naive", "ewa", "swa", "sswa"])
def test_cached_teacher_targets_match_per_batch_teacher(variant):
    x, y = _data()
    runs = []
    for cache in (True, False):
        torch.manual_seed(0); teacher, student = _net(8), _net(4)
        h = distill(teacher, student, (x, y), variant, "2", "2", epochs=2, batch_size=8, cache_teacher=cache, progress=False)
        runs.append((h, student.state_dict()))
    for k in runs[0][0]: assert runs[0][0][k] == pytest.approx(runs[1][0][k], rel=1e-9, abs=1e-12)
    for k, v in runs[0][1].items(): torch.testing.assert_close(v, runs[1][1][k])


def test_warmup_ramps_lambda():
    x, y = _data()
    torch.manual_seed(0); teacher, student = _net(8), _net(4)
    h = distill(teacher, student, (x, y), "swa", "2", "2", epochs=3, batch_size=16, warmup=2, transfer_weight=10.0, progress=False)
    # loss = task + λ_e·aux with λ_e = 10·(e+1)/3 for e < 2, then 10
    for e, lam in enumerate((10 / 3, 20 / 3, 10.0)):
        assert h["loss"][e] == pytest.approx(h["task"][e] + lam * h["aux"][e], rel=1e-9)
    with pytest.raises(ValueError, match="warmup"): distill(teacher, student, (x, y), "swa", "2", "2", warmup=-1, progress=False)


def test_evaluate_compression_controls_and_auc_among_objects():
    from attribkit.metrics import mask_auc
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6 * 4 * 4, 3))
    with torch.no_grad(): cnn[4].bias.fill_(0.3)
    X = torch.randn(10, 3, 8, 8); M = torch.rand(10, 3, 8, 8) > 0.7; Y = M.flatten(2).any(2).double()
    inten = lambda model, inputs, target=None: inputs.sum(1)
    res = evaluate_compression(cnn, (X, Y, M), maps={"gradcam": {"layer": "0"}, "intensity": {"method": inten}}, batch_size=4)
    z = cnn(X).detach(); ii, kk = ((Y > 0) & (z > 0)).nonzero(as_tuple=True)
    h = X[ii].sum(1)
    assert res["intensity"]["AUC"] == pytest.approx(100 * mask_auc(h, M[ii, kk]).mean, rel=1e-9)
    assert res["intensity"]["AUC_obj"] == pytest.approx(100 * mask_auc(h, M[ii, kk], within=M[ii].any(1)).mean, rel=1e-9)
    assert res["gradcam"]["pairs"] == res["intensity"]["pairs"] == len(ii)


# ---------------------------------------------------------------- the paper module (attribkit.papers.distillation)
def test_paper_module_constants_and_weight_file(tmp_path):
    "The paper's numbers, the files paper scale reads, and the VOC teacher file the dry run writes, loadable as the notebooks load it."
    from attribkit.papers import distillation as P, paper_files, weight_files
    from attribkit.papers.experiment import write_weight_files
    from attribkit.models import vgg16_voc, load_weights
    assert P.PAPER_T1["SSWA"]["AUC"] == {"mean": 88.13, "std": 0.22, "n": 5}
    assert P._flat(P.PAPER_T2)["Full (Teacher) EBP AUC"] == 84.2
    assert paper_files("distill_roar") == ["VOCdevkit/VOC2012", P.TEACHER_FILE]
    assert [f.path for f in P.WEIGHT_FILES] == [P.TEACHER_FILE] and not hasattr(P, "write_fake_weights")
    assert all(f in weight_files() for f in P.WEIGHT_FILES)   # the dry run collects it
    assert write_weight_files(tmp_path, P.WEIGHT_FILES) == [tmp_path / P.TEACHER_FILE]
    load_weights(vgg16_voc(), tmp_path / P.TEACHER_FILE, "VOC teacher (`weights`)")
    assert set(P.BUDGETS) == {"smoke", "cpu", "paper", "dry_run"} and all(set(r) == set(P.BUDGETS["paper"]) for r in P.BUDGETS.values())


@pytest.fixture
def f32(_float64):
    "float32 (the paper module's dtype) for the tests of the paper module."
    torch.set_default_dtype(torch.float32)
    yield


@pytest.fixture(scope="module")
def tiny():
    "A hand-built set-up: toy data, an untrained 6-conv teacher per seed, 2 seeds, students of 1 epoch cached in memory."
    from attribkit.papers.distillation import _tiny_setup
    return _tiny_setup()


def test_paper_student_cache_one_spec(tiny, f32):
    "The students' cache key is the spec that drives `distill`: the same spec loads the same student, an edited recipe distils anew."
    n = len(tiny.memory)
    a = tiny.student(1, "naive")
    assert len(tiny.memory) == n + 1 and all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), tiny.student(1, "naive").state_dict().values()))
    tiny.student(1, "naive", lam=3.0)
    assert len(tiny.memory) == n + 2
    fn, spec = tiny.student_spec(1, "naive", lam=3.0)
    assert spec["recipe"]["transfer_weight"] == 3.0 and spec["data"] == f"{tiny.data_key}|teacher={tiny.teacher_keys[1]}"
    with pytest.raises(ValueError, match="`width` must be one of"):
        tiny.student(0, "naive", width="x16")


def test_paper_table1_step_keeps_claims_of_dropped_variants(tiny, f32):
    "A variant the reader drops: its claims stay, not evaluable, naming it; nothing of it is measured."
    from attribkit.papers.distillation import rebuttal_table1, table1_figure
    res = rebuttal_table1(tiny, ["Naive-KD", "SSWA"], widths=["x2"], lambdas=[10.0])
    keys = {c["key"] for c in res.claims}
    assert {"t1/sswa-over-naive-kd/auc/x2", "t1/premise/teacher-over-naive-kd/auc/x2", "t1/teacher-best/map"} <= keys
    assert all(c["configuration"] for c in res.claims if c["role"] == "evidence")    # each piece says at what configuration
    sswa = res.claim("t1/sswa-over-naive-kd/auc/x2")    # gated by the premise at its width
    assert sswa["gated_by"] == ["t1/premise/teacher-over-naive-kd/auc/x2"]
    if res.claim("t1/premise/teacher-over-naive-kd/auc/x2")["verdict"] != "holds":
        assert sswa["verdict"] == "not evaluable" and sswa["reasons"][0].startswith(("premise absent at this width (x2)", "premise not shown at this width (x2)"))
    dropped = [c for c in res.claims if any("removed from the methods" in r for r in c["reasons"])]
    assert {c["key"] for c in dropped} == {f"t1/{f}/{k}/x2" for f in ("sswa-over-swa", "swa-over-ewa", "ewa-over-naive-kd")
                                           for k in ("auc", "point-acc")} | {"t1/sswa-over-swa/map/x2", "t1/sswa-over-swa/f1/x2"}
    assert all(c["verdict"] == "not evaluable" and c["n"] == 0 for c in dropped)
    assert res.claim("t1/swa-over-ewa/auc/x2")["reasons"][-1:] == ["not run: swa, ewa removed from the methods"]
    assert res.claim("t1/sswa-over-swa/auc/x2")["reasons"][-1:] == ["not run: swa removed from the methods"]
    assert "EWA AUC" not in res.measured and "SWA AUC" not in res.measured and "SSWA AUC" in res.measured
    assert "SWA sweep: fixed start, λ = 10 mAP" in res.measured and "| Full (Teacher) |" in res.tables[0]
    premise = res.extra["compared"]["t1/premise/teacher-over-naive-kd/auc/x2"]["values"]["Full (Teacher)"]
    teachers = [tiny.scores(tiny.teachers[s])["gradcam"]["AUC"] for s in tiny.seeds]
    assert premise == pytest.approx(teachers) and premise[0] != premise[1]    # each seed's students against their own teacher
    assert set(res.diagnoses) <= keys and all(res.diagnoses.values())
    plt = pytest.importorskip("matplotlib.pyplot")
    plt.close(table1_figure(res))
    with pytest.raises(ValueError, match="`variants` must be a non-empty list of"):
        rebuttal_table1(tiny, ["Naive-KD", "SSWA-2"])


def test_paper_table2_pruning_roar_steps(tiny, f32):
    from attribkit.papers.distillation import rebuttal_table2, pruning, roar, pruning_figure, roar_figure
    plt = pytest.importorskip("matplotlib.pyplot")
    t2 = rebuttal_table2(tiny, ["Grad-CAM", "EBP"])
    gone = {c["key"].split("/")[-2] for c in t2.claims if c["reasons"][:1] in (["not run: lrp removed from the methods"],
                                                                              ["not run: fullgrad removed from the methods"])}
    assert {c["key"].split("/")[-2] for c in t2.claims} - gone == {"ebp"} and gone == {"lrp-a1b0", "fullgrad"}  # Grad-CAM: Table 1
    assert "SSWA FullGrad AUC" not in t2.measured
    pr = pruning(tiny, ["w/o matching"], p=0.5, ft_epochs=1, rounds=1, round_epochs=1)
    premise = {"prune/premise/structured/teacher-over-without/auc", "prune/premise/unstructured/teacher-over-without/auc"}
    assert len(pr.claims) == 14 and {c["key"] for c in pr.claims if c["n"]} == premise    # the premise needs no matching
    assert all(c["reasons"][-1:] == ["not run: sswa removed from the methods"] for c in pr.claims if c["key"] not in premise)
    assert pr.claim("prune/structured/with-over-without/map")["margin"] == 0.64    # no-cost: non-inferiority
    assert "Structured, w/o matching AUC" in pr.measured and pr.extra["recipe"]["rounds"] == 1
    plt.close(pruning_figure(pr))
    ro = roar(tiny, ["Teacher", "SSWA"], fractions=[0.5], epochs=1)
    measured = {c["key"] for c in ro.claims if c["n"]}
    assert measured == {"roar/control/unmasked-above-prior", "roar/teacher-below-random", "roar/control/teacher-below-intensity",
                        "roar/sswa-below-random", "roar/control/sswa-below-intensity", "roar/teacher-removal-raises-score",
                        "roar/sswa-par-teacher"}
    assert ro.claim("roar/teacher-below-random")["role"] == "evidence" and ro.claim("roar/sswa-closer-than-naive-kd")["role"] == "diagnostic"
    assert {c["key"]: c["reasons"][-1:] for c in ro.claims if c["key"] not in measured} == {
        k: ["not run: naive removed from the methods"] for k in ("roar/naive-kd-below-random", "roar/control/naive-kd-below-intensity",
                                                                 "roar/sswa-closer-than-naive-kd")}
    assert "Naive-KD mAP @ 50% removed" not in ro.measured and "SSWA mAP @ 50% removed" in ro.measured
    plt.close(roar_figure(ro))


def test_paper_diagnoses_read_measurements_not_text(tiny, f32):
    "A diagnosis comes from the rule of the claim's key and the values the comparison recorded; the claim's text plays no part."
    from attribkit.claims import ClaimSpec
    from attribkit.papers.distillation import RULES, _compare
    from attribkit.papers.experiment import Result, diagnose
    a = [{"AUC": 80.0 + i, "collapsed": ""} for i in range(2)]
    b = [{"AUC": 81.0 - 2 * i, "collapsed": ""} for i in range(2)]
    cmp = {}
    c = _compare(cmp, ClaimSpec("t1/x-over-y/point-acc", "distill/sswa-preserves-attribution", "any text at all"), a, b, "AUC", "X", "Y")
    res = Result(tiny.run, claims=[c], raw={"compared": cmp})
    assert c["verdict"] != "holds" and diagnose(res, RULES)[c["key"]].endswith("X 80.50 vs Y 80.00")
    cmp["t1/x-over-y/point-acc"]["collapsed"]["Y"] = ["", "collapsed: F1 0.0, mAP 20.0"]
    res = Result(tiny.run, claims=[dict(c, claim="The full teacher's Point Acc", detail="collapsed")], raw={"compared": cmp})
    assert diagnose(res, RULES)[c["key"]].startswith("models collapsed on some seeds (Y, seed 1: collapsed: F1 0.0")


def test_paper_teacher_best_diagnosis_pairs_each_seed_with_its_own_teacher(tiny, f32):
    "'The teacher is best' counts the seeds whose best student matches or beats that seed's teacher (each seed has its own); no teacher value: the comparison's reason, no error."
    from attribkit.papers.distillation import RULES, T1_TEACHER
    from attribkit.papers.distillation.protocol import _seed_claim
    from attribkit.papers.experiment import Result, diagnose
    spec = T1_TEACHER["mAP"]
    teacher, best = [70.0, 60.0, 80.0], [65.0, 62.0, 79.0]  # the second seed's best student beats its teacher only
    cmp = {spec.key: {"measure": "mAP", "values": {"teacher": teacher, "best student": best}, "collapsed": {"S": ["", "", ""]}}}
    c = _seed_claim(spec, np.subtract(teacher, best), "paired by seed")
    assert c["verdict"] != "holds" and diagnose(Result(tiny.run, claims=[c], raw={"compared": cmp}), RULES)[spec.key] == (
        "the best student matches or beats the teacher on 1 of 3 seeds; teacher 70.00 vs best student 68.67")
    cmp = {spec.key: {"measure": "mAP", "values": {"teacher": [], "best student": []}, "collapsed": {"S": ["", ""]}}}
    c = spec.judge(effect=np.nan, se=np.nan, n=0, not_evaluable="fewer than 2 seeds with all students predicting")
    assert diagnose(Result(tiny.run, claims=[c], raw={"compared": cmp}), RULES)[spec.key].startswith("fewer than 2 seeds with all students predicting")


def test_paper_teacher_of_another_architecture_fails_before_distilling(tmp_path):
    "`weights` holding another model's weights: the paper-scale setup fails naming the file, before any student is distilled."
    from attribkit.fake_data import write_voc2012
    from attribkit.models import lenet_300_100
    from attribkit.papers.distillation import BUDGETS, setup
    from attribkit.papers.experiment import start
    write_voc2012(tmp_path, n_train=2, n_val=2, n_seg=2)
    p = tmp_path / "teacher.pth"
    torch.save(lenet_300_100().state_dict(), p)
    with pytest.raises(ValueError) as e:
        setup(start("distill_rebuttal_table1", BUDGETS, "paper", device="cpu", data_root=tmp_path, weights=p, teacher_width=16))
    msg = str(e.value)
    assert msg.startswith(f"VOC teacher (`weights`) {p} does not fit attribkit.models.vgg16_voc(**{{'num_classes': 20, 'width_div': 16")
    assert "missing " in msg and "features.0.weight" in msg


@pytest.mark.slow
def test_paper_renamed_table2_notebook_without_a_map_keeps_its_claims(tmp_path):
    "A reader copies the Table 2 notebook under another name and drops EBP from its list: the copy runs at smoke, nothing of EBP is measured, and EBP's claims are there, not evaluable, naming it."
    import json, os
    import papermill as pm
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    nb = json.loads((root / "nbs" / "repro" / "distill_rebuttal_table2.ipynb").read_text())
    line = 'maps = ["EBP", "LRP a1b0", "FullGrad", "Grad-CAM"]'
    cell = next(c for c in nb["cells"] if line in "".join(c["source"]))
    cell["source"] = "".join(cell["source"]).replace(line, 'maps = ["LRP a1b0", "FullGrad", "Grad-CAM"]')
    (tmp_path / "my_other_maps.ipynb").write_text(json.dumps(nb))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.setenv("PYTHONPATH", os.pathsep.join([str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        pm.execute_notebook(str(tmp_path / "my_other_maps.ipynb"), str(tmp_path / "executed.ipynb"), cwd=str(root),
                            kernel_name="python3", parameters={"out_dir": str(tmp_path / "out"), "device": "cpu"}, progress_bar=False)
    (out,) = (tmp_path / "out").glob("*.json")
    res = json.loads(out.read_text())
    assert not any("EBP" in k for k in res["measured"]) and "SSWA LRP a1b0 AUC" in res["measured"]
    ebp = [c for c in res["claims"] if c["key"].split("/")[-2] == "ebp"]
    assert {c["key"] for c in ebp} == {"t2/premise/teacher-over-naive-kd/ebp/auc", "t2/premise/teacher-over-naive-kd/ebp/point-acc",
                                       "t2/sswa-over-naive-kd/ebp/auc", "t2/sswa-over-naive-kd/ebp/point-acc",
                                       "t2/control/ebp/random", "t2/control/ebp/intensity-image", "t2/control/ebp/intensity"}
    assert all(c["verdict"] == "not evaluable" and "not run: ebp removed from the methods" in c["reasons"] for c in ebp)
    assert {c["key"].split("/")[-2] for c in res["claims"]} == {"ebp", "lrp-a1b0", "fullgrad"}   # Grad-CAM's claims are Table 1's
    assert not any("removed from the methods" in r for c in res["claims"] if c not in ebp for r in c["reasons"])


def test_paper_teacher_under_its_floor_makes_every_claim_not_evaluable(f32):
    "At cpu the teacher is the zoo's: under its floor, every claim of a step is not evaluable with the reason, its numbers kept."
    from attribkit.papers.distillation import _tiny_setup, rebuttal_table2
    S = _tiny_setup()
    ok = rebuttal_table2(S, ["Grad-CAM", "EBP"])
    S.stand_ins = {"the teacher (Mosaic VGG-6-BN/2)": {"metric": "test mAP", "values": [0.5], "floor": 0.6}}
    floor = "the teacher (Mosaic VGG-6-BN/2) under its floor: test mAP 0.500 < 0.60"
    assert S.under_floor() == {"the teacher (Mosaic VGG-6-BN/2)": floor}
    low = rebuttal_table2(S, ["Grad-CAM", "EBP"])
    assert low.claims and [c["key"] for c in low.claims] == [c["key"] for c in ok.claims]
    assert all(c["verdict"] == "not evaluable" and c["reasons"][0] == floor for c in low.claims)
    assert [c["effect"] for c in low.claims] == [c["effect"] for c in ok.claims]
