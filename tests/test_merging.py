"Neuron merging: exactness on constructed models, physical shrinking, untouched originals, errors, reports."
import copy, warnings
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from attribkit.merging import (PrunablePair, bn_affine, count_params, find_pairs, keep_indices, merge, most_sim_bn,
                               prune)


def _randomize_bn(bn, g):
    with torch.no_grad():
        n = bn.num_features
        bn.weight.copy_(0.5 + torch.rand(n, generator=g, dtype=torch.float64))
        bn.bias.copy_(0.3 * torch.randn(n, generator=g, dtype=torch.float64))
        bn.running_mean.copy_(0.3 * torch.randn(n, generator=g, dtype=torch.float64))
        bn.running_var.copy_(0.5 + torch.rand(n, generator=g, dtype=torch.float64))


def _zero_C(bn, n, m, s, bias=None, scale_in=1.0):
    "Set beta_n so that channel n = A * channel m exactly (C = 0) when its pre-BN input is s*scale_in times m's."
    N = bn.num_features
    a, c = bn_affine(bn, N, bias)
    A = s * scale_in * a[n] / a[m]
    with torch.no_grad():
        bn.bias[n] += A * c[m] - c[n]


def _snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _bitwise_equal(model, snap):
    sd = model.state_dict()
    return sd.keys() == snap.keys() and all(torch.equal(sd[k], snap[k]) and sd[k].dtype == snap[k].dtype for k in sd)


def _mlp(seed=0, act=nn.ReLU):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(8, 10), act(), nn.Linear(10, 6), act(), nn.Linear(6, 3)).double()
    with torch.no_grad():  # pruned neurons: small positive multiples (weights AND bias) of kept ones
        for layer, (n, m, s) in ((0, (7, 2, 0.05)), (0, (9, 4, 0.03)), (2, (5, 1, 0.04))):
            net[layer].weight[n] = s * net[layer].weight[m]; net[layer].bias[n] = s * net[layer].bias[m]
    return net


def test_fc_with_bias_exact_merge():
    net = _mlp(); snap = _snapshot(net)
    x = torch.randn(32, 8, dtype=torch.float64)
    ratio = {"0": 0.2, "2": 1 / 6}
    small, rep = merge(net, ratio)
    pruned, rep_p = prune(net, ratio)
    assert (small(x) - net(x)).abs().max() < 1e-5
    assert (pruned(x) - net(x)).abs().max() > 1e-3          # prune-only is not exact: the check can fail
    assert small[0].out_features == 8 and small[2].in_features == 8 and small[2].out_features == 5
    assert count_params(small) == count_params(pruned) < count_params(net)
    assert _bitwise_equal(net, snap)
    assert [(l["kept"], l["merged"], l["dropped"]) for l in rep.layers] == [(8, 2, 0), (5, 1, 0)]


def test_merge_without_duplicates_is_not_exact():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(8, 10), nn.ReLU(), nn.Linear(10, 3)).double()
    small, _ = merge(net, 0.3, threshold=None)
    x = torch.randn(16, 8, dtype=torch.float64)
    assert (small(x) - net(x)).abs().max() > 1e-4


class _VGG(nn.Module):
    "conv+BN -> maxpool -> conv(bias)+BN -> flatten -> FC+BN1d -> FC (VGG head), all prunable."
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6)
        self.c2, self.b2 = nn.Conv2d(6, 5, 3, padding=1, bias=True), nn.BatchNorm2d(5)
        self.fc1, self.bf = nn.Linear(5 * 4 * 4, 7), nn.BatchNorm1d(7)
        self.fc2 = nn.Linear(7, 3)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.relu(self.b2(self.c2(x))).view(x.size(0), -1)
        return self.fc2(F.relu(self.bf(self.fc1(x))))


def _vgg_with_duplicates():
    g = torch.Generator().manual_seed(0); torch.manual_seed(0)
    net = _VGG().double().eval()
    for bn in (net.b1, net.b2, net.bf): _randomize_bn(bn, g)
    with torch.no_grad():
        net.c1.weight[4] = 0.1 * net.c1.weight[0]; _zero_C(net.b1, 4, 0, 0.1)
        net.c2.weight[3] = 0.05 * net.c2.weight[1]; _zero_C(net.b2, 3, 1, 0.05, bias=net.c2.bias)
    return net


def test_conv_bn_exact_merge_and_conv_to_fc_flatten():
    net = _vgg_with_duplicates(); snap = _snapshot(net)
    assert [(p.producer, p.bn, p.consumer) for p in find_pairs(net)] == [("c1", "b1", "c2"), ("c2", "b2", "fc1"),
                                                                          ("fc1", "bf", "fc2")]
    ratio = {"c1": 1 / 6, "c2": 1 / 5}
    small, rep = merge(net, ratio)
    pruned, _ = prune(net, ratio)
    x = torch.randn(8, 3, 8, 8, dtype=torch.float64)
    assert (small(x) - net(x)).abs().max() < 1e-5
    assert (pruned(x) - net(x)).abs().max() > 1e-3
    assert small.c2.in_channels == 5 and small.c2.out_channels == 4 and small.b2.running_mean.shape == (4,)
    assert small.fc1.in_features == 4 * 16 and small.fc1.weight.shape == (7, 64)
    assert count_params(small) == count_params(pruned) < count_params(net)
    assert _bitwise_equal(net, snap)
    assert [l["merged"] for l in rep.layers] == [1, 1]


def test_official_compat_differs_from_exact_algebra():
    net = _vgg_with_duplicates()
    keep = torch.tensor([0, 1, 2, 3, 5])
    _, s_exact, _ = most_sim_bn(net.c1.weight, keep, net.b1)
    _, s_off, _ = most_sim_bn(net.c1.weight, keep, net.b1, compat="official")
    a = bn_affine(net.b1, 6)[0]
    assert torch.isclose(s_exact[4], 0.1 * a[4] / a[0])
    assert not torch.isclose(s_off[4], s_exact[4], rtol=1e-3)
    small, _ = merge(net, {"c1": 1 / 6}, compat="official")
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    assert (small(x) - net(x)).abs().max() > 1e-4


class _Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class _ResNet(nn.Module):
    def __init__(self, c=6):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.layer = nn.Sequential(_Block(c), _Block(c))
        self.fc = nn.Linear(c, 3)
    def forward(self, x):
        x = self.layer(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def test_resnet_inner_conv_only_and_exact():
    g = torch.Generator().manual_seed(0); torch.manual_seed(0)
    net = _ResNet().double().eval()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d): _randomize_bn(m, g)
    blk = net.layer[0]
    with torch.no_grad():
        blk.conv1.weight[5] = 0.1 * blk.conv1.weight[2]; _zero_C(blk.bn1, 5, 2, 0.1)
    snap = _snapshot(net)
    assert [p.producer for p in find_pairs(net)] == ["layer.0.conv1", "layer.1.conv1"]
    small, rep = merge(net, {"layer.0.conv1": 1 / 6})
    x = torch.randn(4, 3, 6, 6, dtype=torch.float64)
    assert (small(x) - net(x)).abs().max() < 1e-5
    assert small.layer[0].conv1.out_channels == 5 and small.layer[0].conv2.in_channels == 5
    assert small.layer[0].conv2.out_channels == 6 and small.conv.out_channels == 6   # residual width untouched
    assert _bitwise_equal(net, snap)
    small2, rep2 = merge(net, 0.5); pruned2, _ = prune(net, 0.5)
    assert count_params(small2) == count_params(pruned2) < count_params(net)
    assert small2(x).shape == (4, 3)


def test_depthwise_separable_exact():
    g = torch.Generator().manual_seed(0); torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 6, 1, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
                        nn.Conv2d(6, 6, 3, padding=1, groups=6, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
                        nn.Conv2d(6, 4, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)).double().eval()
    for i in (1, 4, 7): _randomize_bn(net[i], g)
    s1, s2 = 0.2, 0.3
    with torch.no_grad():
        net[0].weight[3] = s1 * net[0].weight[1]; _zero_C(net[1], 3, 1, s1)
        net[3].weight[3] = s2 * net[3].weight[1]
        a1 = bn_affine(net[1], 6)[0]
        _zero_C(net[4], 3, 1, s2, scale_in=s1 * a1[3] / a1[1])
    pairs = find_pairs(net)
    assert (pairs[0].producer, pairs[0].bn, pairs[0].depthwise, pairs[0].dw_bn, pairs[0].consumer) == ("0", "1", "3", "4", "6")
    small, rep = merge(net, {"0": 1 / 6})
    x = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    assert (small(x) - net(x)).abs().max() < 1e-5
    assert small[3].groups == small[3].in_channels == small[3].out_channels == 5 and small[6].in_channels == 5
    assert rep.layers[0]["merged"] == 1


def test_unsupported_layers_are_named():
    with pytest.raises(NotImplementedError, match=r"'1' \(LayerNorm\)"):
        merge(nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 2)), 0.5)
    with pytest.raises(NotImplementedError, match=r"'1' \(PReLU\)"):
        merge(nn.Sequential(nn.Linear(4, 6), nn.PReLU(6), nn.Linear(6, 2)), 0.5)
    with pytest.raises(NotImplementedError, match=r"'2'.*groups=2"):
        merge(nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU(), nn.Conv2d(4, 4, 1, groups=2)), 0.5)
    with pytest.raises(NotImplementedError, match="softmax"):
        merge(_Softmaxed(), 0.5)
    with pytest.raises(ValueError, match="no prunable"):
        merge(nn.Sequential(nn.Linear(4, 2)), 0.5)


class _Softmaxed(nn.Module):
    def __init__(self):
        super().__init__(); self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 2)
    def forward(self, x): return self.b(torch.softmax(self.a(x), 1))


def test_bad_arguments():
    net = _mlp()
    with pytest.raises(ValueError, match="not prunable producers"): merge(net, {"4": 0.5})
    with pytest.raises(ValueError, match=r"\[0, 1\)"): merge(net, 1.0)
    with pytest.raises(ValueError, match="unknown pruning criterion"): prune(net, 0.5, criterion="l3")
    with pytest.raises(ValueError, match="decide_on"): merge(net, 0.5, decide_on="later")
    with pytest.raises(TypeError, match="nn.Module"): merge("net", 0.5)


def test_report_contents_and_criteria():
    net = _mlp(3)
    for crit in ("l1", "l2", "l2-GM"):
        small, rep = merge(net, 0.5, criterion=crit)
        pruned, rep_p = prune(net, 0.5, criterion=crit)
        assert rep.method == "merge" and rep_p.method == "prune"
        assert rep.params_before == count_params(net) and rep.params_after == count_params(small)
        assert rep.params_after == rep_p.params_after and 0 < rep.removed < 1
        for l, lp in zip(rep.layers, rep_p.layers):
            assert l["kept"] + l["merged"] + l["dropped"] == l["neurons"]
            assert lp["merged"] == 0 and lp["dropped"] == lp["neurons"] - lp["kept"]
            assert l["threshold"] == 0.45 and l["exact_act"]
        assert "| 0 | 2 | 10 | 5 |" in repr(rep)
    _, rep_all = merge(net, 0.5, threshold=None)
    assert all(l["dropped"] == 0 for l in rep_all.layers)
    _, rep_tanh = merge(_mlp(3, act=nn.Tanh), 0.5)
    assert not rep_tanh.layers[0]["exact_act"]


def test_layer_order_option_and_explicit_pairs():
    net = _mlp(4)
    a, _ = merge(net, 0.5, decide_on="original"); b, _ = merge(net, 0.5, decide_on="merged")
    assert count_params(a) == count_params(b)
    only = [PrunablePair("2", "4")]
    small, rep = merge(net, 0.5, pairs=only)
    assert small[0].out_features == 10 and small[2].out_features == 3 and len(rep.layers) == 1
    with pytest.raises(ValueError, match="not a module"): merge(net, 0.5, pairs=[PrunablePair("9", "4")])


def test_keep_indices_criteria():
    w = torch.tensor([[3., 0], [0, 1], [1, 1], [-2, -2], [0.1, 0]])
    assert keep_indices(w, 2, "l1").tolist() == [0, 3]
    assert keep_indices(w, 3, "l2").tolist() == [0, 2, 3]
    d = torch.cdist(w, w).sum(1)
    assert keep_indices(w, 2, "l2-GM").tolist() == sorted(torch.topk(d, 2).indices.tolist())


def test_official_ranking_uses_augmented_rows_without_bn():
    "compat='official' ranks [w, b] of a BN-free layer (the reference LeNet path); prune and merge keep the same neurons."
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1., 1], [0.1, 0], [0.5, 0.5]])); net[0].bias.copy_(torch.tensor([0., 5, 0]))
    assert prune(net, 1 / 3)[0][0].bias.tolist() == [0., 0.]
    assert prune(net, 1 / 3, compat="official")[0][0].bias.tolist() == [0., 5.]
    assert merge(net, 1 / 3, compat="official")[0][0].bias.tolist() == [0., 5.]
    with pytest.raises(ValueError, match="compat"):
        prune(net, 1 / 3, compat="nope")


def test_merge_warns_when_few_neurons_pass_threshold():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 10), nn.ReLU(), nn.Linear(10, 2))
    with pytest.warns(UserWarning, match="passed the cosine threshold"):
        merge(net, 0.5, threshold=0.999)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        merge(net, 0.5, threshold=None)      # merging every pruned neuron never warns


# --- the paper layer (attribkit.papers.neuron_merging) ---------------------------------------------------------------
from attribkit.papers import neuron_merging as nm
from attribkit.papers import paper_files
from attribkit.papers.experiment import start
import dataclasses
import numpy as np


def test_paper_files_name_every_merging_notebook():
    from pathlib import Path
    stems = {p.stem for p in (Path(__file__).parent.parent / "nbs" / "repro").glob("merging_*.ipynb")}
    assert set(nm.PAPER_FILES) == stems
    assert paper_files("merging_lenet") == ["FashionMNIST/raw", "weights/lenet_300_100.pth"]


def test_authors_lenet_checkpoint_round_trip(tmp_path):
    from attribkit.models import lenet_300_100
    torch.manual_seed(0); m0 = lenet_300_100(in_features=784, num_classes=10)
    sd = dict(zip([f"ip{i}.{k}" for i in (1, 2, 3) for k in ("weight", "bias")], (p.detach() for p in m0.parameters())))
    torch.save({"acc": 89.8, "state_dict": sd}, tmp_path / "ck.pth")
    m1, acc = nm.load_authors_lenet(tmp_path / "ck.pth")
    x = torch.randn(3, 784)
    assert acc == 89.8 and torch.allclose(m1(x), m0(x))


def test_authors_lenet_rejects_another_architecture(tmp_path):
    "A VGG state dict passed as the merging notebook's LeNet weights: a ValueError naming the file, expected and found keys."
    from attribkit.models import vgg16_bn_cifar
    p = tmp_path / "vgg.pth"; torch.save(vgg16_bn_cifar(width=16).state_dict(), p)
    with pytest.raises(ValueError) as e:
        nm.load_authors_lenet(p)
    msg = str(e.value)
    assert msg.startswith(f"LeNet-300-100 weights file {p} does not fit the authors' LeNet-300-100 checkpoint")
    assert "the file has 87 tensors, the model 6; missing 6: ip1.weight, ip1.bias, ip2.weight, ip2.bias, … (2 more); unexpected 87: features.0.weight" in msg
    p.write_text("not a checkpoint")
    with pytest.raises(ValueError, match="is not a torch checkpoint"):
        nm.load_authors_lenet(p)


def test_paper_setups_reject_bad_weights_before_training(tmp_path, monkeypatch):
    "merging_lenet and merging_vgg16_cifar at paper scale: a file of another model or a `weights` file that does not exist fails before any training."
    from attribkit.fake_data import write_cifar10, write_fashion_mnist
    from attribkit.models import lenet_300_100, vgg16_bn_cifar
    write_fashion_mnist(tmp_path, n_train=20, n_test=10); write_cifar10(tmp_path, n_train=10, n_test=10)
    monkeypatch.setattr(nm.budget, "_fit", lambda *a, **k: pytest.fail("trained instead of failing"))
    vgg, lenet = tmp_path / "vgg.pth", tmp_path / "lenet.pth"
    torch.save(vgg16_bn_cifar(width=16).state_dict(), vgg); torch.save(lenet_300_100().state_dict(), lenet)
    run = lambda name, w: start(name, nm.BUDGETS, "paper", data_root=tmp_path, device="cpu", weights=w)
    with pytest.raises(ValueError, match="does not fit the authors' LeNet-300-100 checkpoint"):
        nm.setup(run("merging_lenet", vgg), "lenet")
    with pytest.raises(ValueError, match=r"lenet.pth does not fit vgg16_bn_cifar\(\*\*\{'num_classes': 10, 'width': 1\}\): the file has 6 tensors, the model 87; missing 85: features.0.weight"):
        nm.setup(run("merging_vgg16_cifar", lenet), "vgg16")
    for name in ("lenet", "vgg16", "mobilenet"):
        with pytest.raises(FileNotFoundError, match=r"`weights` .*typo.pth does not exist"):
            nm.setup(run(f"merging_{name}", tmp_path / "typo.pth"), name)
    with pytest.raises(ValueError, match="`weights` names one file, but this experiment reads 6"):
        nm.setup(run("merging_table1_activations", lenet), "activations")


def test_setup_rejects_bad_arguments():
    with pytest.raises(ValueError, match="`experiment` must be one of"): nm.setup(start("merging_lenet", nm.BUDGETS), "merging_lenet")
    with pytest.raises(ValueError, match="`scale`"): start("merging_lenet", nm.BUDGETS, "big")
    with pytest.raises(ValueError, match="dry_run"): nm.setup(start("merging_lenet", nm.BUDGETS, "smoke", dry_run=True), "lenet")
    with pytest.raises(ValueError, match="pass weights=None"): nm.setup(start("merging_lenet", nm.BUDGETS, "cpu", weights="ck.pth"), "lenet")
    with pytest.raises(ValueError, match="its knobs are"): start("merging_lenet", nm.BUDGETS, "cpu", epochs=3)


def test_paper_tables_have_the_papers_gains():
    assert nm.PAPER_LENET["50%"]["gain"] == 0.29 and nm.PAPER_LENET["80%"]["gain"] == 13.26
    assert nm.PAPER_MOBILENET["40%"]["gain"] == 1.32 and nm.PAPER_VGG16["l1"]["gain"] == 4.46
    assert nm.PAPER_IMAGENET["ResNet 30%"]["gain"] == 23.04


def test_weight_files_written_once_in_the_formats_loaded(tmp_path):
    "WEIGHT_FILES: one declaration per path; the LeNet file is the authors' format, the CIFAR models float16, torchvision shared."
    from attribkit.papers.experiment import torchvision_weights, write_weight_files
    paths = [f.path for f in nm.WEIGHT_FILES]
    assert len(paths) == len(set(paths)) == 1 + 1 + 6 + 1 + 2
    assert set(paths) >= {p for ps in nm.PAPER_FILES.values() for p in ps if p.startswith("weights/")}
    assert torchvision_weights("vgg16") in nm.WEIGHT_FILES and not hasattr(nm, "write_fake_weights")
    lenet, vgg = (f for f in nm.WEIGHT_FILES if f.path in (nm.WEIGHTS["lenet"], nm.WEIGHTS["vgg16_cifar"]))
    write_weight_files(tmp_path, [lenet, vgg])
    model, acc = nm.load_authors_lenet(tmp_path / nm.WEIGHTS["lenet"])
    assert acc == 10.0 and model(torch.zeros(1, 784)).shape == (1, 10)
    sd = torch.load(tmp_path / nm.WEIGHTS["vgg16_cifar"], weights_only=True)
    assert sd["features.0.weight"].dtype == torch.float16


@pytest.fixture(scope="module")
def toy_setup():
    "A hand-built setup: three small LeNets on 8×8 digits (2 epochs each, no accuracy floor), a cpu run (so claims get verdicts)."
    from attribkit.data import digits
    from attribkit.models import lenet_300_100, train
    data = digits(size=8, channels=1, normalize=False)
    models = []
    for s in (0, 1, 2):
        torch.manual_seed(s); m = lenet_300_100(in_features=64, num_classes=10)
        train(m, data.train, epochs=2, lr=1e-3, optimizer="adam", weight_decay=0.0, schedule=None, progress=False, device="cpu", seed=s)
        models.append(m.eval())
    import tempfile
    run = start("merging_lenet", nm.BUDGETS, "cpu", device="cpu", out_dir=tempfile.mkdtemp())
    exp = dataclasses.replace(nm.EXPERIMENTS["lenet"], paper=nm.PAPER_LENET, evidence=("merge", "prune", ""),
                              claims=("merge-over-prune", "gap-grows", "control/random-partner", "merge-all-over-prune"))
    S = nm.Setup(run, exp, {"": nm.Subject(models, [0.5, 0.8])}, data.test, 10, "toy", "toy LeNets", [0, 1, 2])
    S.baseline[""] = [nm.hits(m, S.test) for m in models]
    return S


def test_setup_shows_the_models_test_accuracy(toy_setup):
    acc = toy_setup.accuracy("")
    assert acc.shape == (3,) and (acc > 10).all()
    text = toy_setup._repr_markdown_()
    assert "toy LeNets" in text and "| — | 3 | 50%, 80% |" in text and f"{acc.mean():.2f} ± " in text


def test_prune_and_merge_measures_each_variant_at_each_ratio(toy_setup):
    M = nm.prune_and_merge(toy_setup, ["prune", "merge"], ratios=[0.3]).raw["measurements"]
    assert M.ratios == {"": [0.3]} and sorted({k[1] for k in M.hits}) == ["baseline", "merge", "prune"]
    assert M.diff("", "merge", "prune", 0.3).shape == (3,) and M.units == "seeds"     # 3 models: seeds are the units
    assert M.params[("", 0.3)][1] < M.params[("", 0.3)][0]
    with pytest.raises(ValueError, match="`variants` must be names of VARIANTS"):
        nm.prune_and_merge(toy_setup, ["prune", "merge all"])


def test_evaluate_table_claims_diagnoses_figure(toy_setup, tmp_path):
    import json
    res = nm.evaluate(nm.prune_and_merge(toy_setup, ["prune", "merge", "merge t=none", "random partner t=none"]))
    assert [c["key"] for c in res.claims] == ["merge-over-prune/r50", "merge-over-prune/r80", "gap-grows/r50/r80",
                                              "control/random-partner", "merge-all-over-prune"]
    assert [c["role"] for c in res.claims] == ["evidence", "evidence", "evidence", "control", "diagnostic"]
    assert [c["paper_claim"] for c in res.claims] == ["merging/lenet-fmnist"] * 2 + ["merging/gap-grows"] + ["merging/lenet-fmnist"] * 2
    assert set(res.stand_ins) == {"toy LeNets"} and 0.1 < res.stand_ins["toy LeNets"] <= 1   # a fraction, not %
    assert res.measured["prune | 50%"]["n"] == 3 and res.paper["gain | 80%"] == 13.26 and "random partner t=none | 50%" in res.measured
    assert set(res.diagnoses) == {c["key"] for c in res.claims if c["verdict"] != "holds"}
    assert all("{" not in t for t in res.diagnoses.values())
    fig = nm.merging_figure(res)
    assert res.figures == {}                      # no side effect: the notebook puts the figure into the result
    res.figures["merging_lenet"] = fig
    saved = json.loads(res.save().read_text())
    assert saved["extra"]["per_model"]["merge | 80%"] == res.raw["measurements"].acc("", "merge", 0.8).tolist()
    assert saved["extra"]["stand_ins"] == res.stand_ins and saved["claims"][0]["paper_claim"] == "merging/lenet-fmnist"
    import matplotlib.pyplot as plt; plt.close(fig)


def test_claims_at_chance_follow_the_shared_rule(toy_setup):
    "A model at 15-19 % on 10 classes was evaluable under the old 'chance + 5 points' margin; the shared rule (< 19 %) makes it not evaluable."
    from attribkit.claims import ClaimSpec, chance_floor
    M = nm.prune_and_merge(toy_setup, ["prune", "merge"], ratios=[0.5]).raw["measurements"]
    spec = ClaimSpec("k", None, "merge beats prune")
    c = nm.protocol._judge(M, spec, [""], np.array([1.0, 2.0, 3.0]), np.array([80.0]), np.array([17.0]), np.array([16.0]))
    assert c["verdict"] == "not evaluable" and "both variants" in c["reasons"][0] and f"{chance_floor(10):.3f}" in c["reasons"][0]
    c = nm.protocol._judge(M, spec, [""], np.array([2.0, 2.1, 2.2]), np.array([80.0]), np.array([20.0]), np.array([16.0]))
    assert c["verdict"] == "holds"   # at 20 % evaluable (effects clear of the t-rule: 2.1 > 4.30 · 0.058)


def test_a_renamed_copy_without_two_methods_keeps_their_claims_not_evaluable(tmp_path):
    "A reader copies merging_lenet under another name and removes two methods from `variants`; it runs at smoke scale, the methods' claims stay, not evaluable, naming them."
    import json
    from pathlib import Path
    import papermill as pm
    src = Path(__file__).parent.parent / "nbs" / "repro" / "merging_lenet.ipynb"
    nb = json.loads(src.read_text())
    line = '"random partner t=none", "prune (official ranking)", "merge (official ranking)",'
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and line in "".join(c["source"])]
    assert len(cells) == 1
    cells[0]["source"] = "".join(cells[0]["source"]).replace(line, '"prune (official ranking)", "merge (official ranking)",').replace(
        '"merge t=none", ', "").splitlines(keepends=True)
    copy = tmp_path / "my_lenet_without_baselines.ipynb"
    copy.write_text(json.dumps(nb))
    pm.execute_notebook(str(copy), str(tmp_path / "out.ipynb"), parameters=dict(scale="smoke", out_dir=str(tmp_path), device="cpu"),
                        kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    d = json.loads(next(tmp_path.glob("merging_*.json")).read_text())
    assert not any("t=none" in k for k in d["measured"]) and "merge (official ranking) | 80%" in d["measured"]
    claims = {c["key"]: c for c in d["claims"]}
    assert len(claims) == 12 and {c["paper_claim"] for c in claims.values()} == {"merging/lenet-fmnist", "merging/gap-grows", "merging/feature-map",
                                                                             "merging/mostsim-over-nmf"}
    for key, gone in (("control/random-partner", "merge t=none, random partner t=none"), ("merge-all-over-prune", "merge t=none")):
        c = claims[key]
        assert c["verdict"] == "not evaluable" and f"not run: {gone} removed from the methods" in c["reasons"], (key, c["reasons"])
    assert "the paper's ranking: [w, b]" in claims["merge-over-prune/r50"]["claim"]     # the evidence is the paper's variant, and says so
    assert not any("removed from the methods" in r for k, c in claims.items() if k.startswith(("merge-over", "gap")) for r in c["reasons"])
    assert list((tmp_path / "figures").glob("*.png"))


def test_registry_has_the_papers_claims():
    "PAPER_CLAIMS: the paper's and its rebuttal's statements, each with the paper's numbers; every notebook serves one of them; a claim with no notebook says why it is not measured."
    from attribkit.claims import PaperClaim
    from attribkit.papers import registry
    ids = [pc.id for pc in nm.PAPER_CLAIMS]
    assert ids == ["merging/lenet-fmnist", "merging/vgg16-cifar10", "merging/vgg16-abstract", "merging/feature-map", "merging/activations",
                   "merging/mobilenet", "merging/imagenet", "merging/prune-drops", "merging/gap-grows", "merging/mostsim-over-nmf"]
    assert all(isinstance(pc, PaperClaim) and pc.paper == "002" and "↑" in pc.metric for pc in nm.PAPER_CLAIMS)
    assert registry()["merging"][1] == nm.PAPER_CLAIMS
    assert {e.paper_claim for e in nm.EXPERIMENTS.values()} <= set(ids) and len(nm.EXPERIMENTS) == len(nm.PAPER_FILES)
    assert not any(pc.stand_ins.startswith("not measured here") for pc in nm.PAPER_CLAIMS)   # every claim has a notebook
    assert "+13.26" in nm.PAPER_CLAIMS[0].paper_value and "SELU +55.11" in nm.PAPER_CLAIMS[4].paper_value


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory, request):
    "Every merging notebook's steps at smoke scale, one seed, on untrained stand-ins (no training: the claims are made whatever their verdict)."
    mp = pytest.MonkeyPatch()
    request.addfinalizer(mp.undo)
    def untrained(model_fn, config, *a, seed=0, **k):
        torch.manual_seed(seed)
        return model_fn(**config).eval()
    mp.setattr(nm.budget, "_fit", lambda model_fn, config, data, key, recipe, seed, device, train_batches=None: untrained(model_fn, config, seed=seed))
    digits = nm.budget.digits   # the first 64 test digits: every model is scored on them once per variant and ratio
    mp.setattr(nm.budget, "digits", lambda *a, **k: (d := digits(*a, **k))._replace(test=nm.budget.first(d.test, 64)))
    out = {}
    for name in nm.EXPERIMENTS:
        run = start(f"merging_{name}", nm.BUDGETS, "smoke", device="cpu", seeds=1, out_dir=tmp_path_factory.mktemp(name))
        out[name] = nm.evaluate(nm.prune_and_merge(nm.setup(run, name), ["prune", "merge", "merge t=none", "random partner t=none"]))
    return out


def test_every_notebook_claim_serves_a_registry_claim_in_a_role(smoke_results):
    "Each claim of each notebook (smoke scale) names a registry id of PAPER_CLAIMS and a role; every evidence claim states its configuration; no two registry claims rest on the same cells; stand-ins carry test accuracy."
    from attribkit.claims import ROLES, check_distinct
    ids = {pc.id for pc in nm.PAPER_CLAIMS}
    evidence = set()
    for name, res in smoke_results.items():
        assert res.claims, name
        for c in res.claims:
            fam = next(f for f in sorted(nm.FAMILIES, key=len, reverse=True) if c["key"].startswith(f))
            assert c["paper_claim"] == (nm.FAMILIES[fam].claim or nm.EXPERIMENTS[name].paper_claim) and c["role"] in ROLES, (name, c["key"])
            assert c["role"] != "evidence" or (c["configuration"] == "paper" or c["configuration"].startswith("other: ")), (name, c["key"])
        evidence |= {c["paper_claim"] for c in res.claims if c["role"] == "evidence"}
        check_distinct([(name, c) for c in res.claims])
        assert res.stand_ins and all(0 <= v <= 1 for v in res.stand_ins.values()), name
    assert evidence == ids   # the NMF claim too: not evaluable where a reader leaves its variant out, as here
    assert set(smoke_results["activations"].stand_ins) == {f"VGG-16-BN/16 {a} on digits" for a in nm.ACTIVATIONS}


def test_claims_away_from_the_papers_configuration_say_so(smoke_results):
    "Table 1 below paper scale cuts 10 %, the paper 50 %: its claims say so in their text and configuration (from the budget's ratios), with the paper's gain there; MobileNet's 10-30 % likewise; smoke LeNets trained by Adam name the recipe."
    act = [c for c in smoke_results["activations"].claims if c["key"].startswith("merge-over-prune/")]
    for c in act:
        assert "at 10% (not the paper's configuration: it prunes 50% and reports" in c["claim"], c["claim"]
        assert c["configuration"] == "other: ratio 10% (paper: 50%)" and c["paper_effect"] is None
    assert "SELU: merge keeps higher accuracy than prune at 10% (not the paper's configuration: it prunes 50% and reports +55.11 points there)" in [
        c["claim"] for c in act]
    mob = [c for c in smoke_results["mobilenet"].claims if c["role"] == "evidence"]
    assert mob and all("other: ratio" in c["configuration"] and "(paper: 40%/50%/60%)" in c["configuration"] for c in mob)
    imn = smoke_results["imagenet"].claim("merge-over-prune/vgg/r50")
    assert imn["claim"] == "VGG: merge keeps higher accuracy than prune at 50% (paper: +4.18 points)"   # the paper's ratios: no note
    assert imn["configuration"] == "paper" and imn["paper_effect"] == 4.18
    assert smoke_results["imagenet"].claim("top5/vgg/r50")["role"] == "diagnostic"     # top-5 of 10 classes
    assert smoke_results["imagenet"].claim("prune-drops/resnet/r10/r30")["paper_effect"] == 49.56
    assert smoke_results["lenet"].claim("merge-over-prune/r50")["configuration"].startswith("other: recipe adam")


def test_vgg16_claims_count_only_the_papers_50_percent(smoke_results):
    "VGG-16: merge − prune per criterion at every ratio run, only 50 % at the paper's configuration; no pooled piece; the abstract's parity is its own claim with a margin; controls and diagnostics pool the 50 % cells only."
    res = smoke_results["vgg16"]
    ev = {c["key"]: c for c in res.claims if c["role"] == "evidence"}
    assert {k for k, c in ev.items() if c["configuration"] == "paper"} == {
        f"{f}/{c}/r50" for f in ("merge-over-prune", "official-bn-over-prune") for c in ("l1", "l2", "l2-gm")} | {"merge-near-unpruned/r50"}
    assert ev["merge-over-prune/l1/r10"]["configuration"] == "other: ratio 10% (paper: 50%)" and "mean-merge-over-prune" not in ev
    par = ev["merge-near-unpruned/r50"]
    assert par["paper_claim"] == "merging/vgg16-abstract" and par["margin"] == 1.0 and par["paper_effect"] == -0.56
    assert "at 50%" in res.claim("control/random-partner")["claim"] and "at 50%" in res.claim("prune-cost/r50")["claim"]
    keys = {c.key for c in nm.CAVEATS}
    assert "prune-cost/r50" in keys and "prune-cost/r10" in keys


def test_cpu_setups_take_the_zoo_stand_ins(monkeypatch):
    "At cpu scale every stand-in is the zoo's (`zoo.get` with its name and the zoo's seeds), tested on the zoo's test split; nothing is trained here; a stand-in under its floor makes its claims not evaluable."
    from torch.utils.data import TensorDataset
    from attribkit.data import DataSplits
    from attribkit.papers import zoo
    calls = []
    def splits(key, data_root=None):
        size = 28 if key.endswith("28") else 32
        x, y = torch.randn(40, 1, size, size, generator=torch.Generator().manual_seed(0)), torch.arange(40) % 10
        return DataSplits(TensorDataset(x, y), TensorDataset(x[:30], y[:30]), 10, (0.0,), (1.0,), "fashion_mnist")
    def get(name, seed=0, data_root=None, device="auto", **kw):
        calls.append((name, seed))
        torch.manual_seed(seed)
        value = 0.5 if name == "ResNet-8/2" else 0.95
        return zoo.Trained(name, seed, zoo.ZOO[name].build().eval(), value, zoo.ZOO[name].floor, 0.0, True)
    monkeypatch.setattr(zoo, "get", get)
    monkeypatch.setattr(zoo, "splits", splits)
    monkeypatch.setattr(nm.budget, "_fit", lambda *a, **k: pytest.fail("a stand-in was trained at cpu scale"))
    S = nm.setup(start("merging_lenet", nm.BUDGETS, "cpu", device="cpu", seeds=2), "lenet")
    assert calls == [("LeNet-300-100", 0), ("LeNet-300-100", 1)] and S.seeds == [0, 1] and len(S.test) == 30
    assert S.labels == {"": "LeNet-300-100 on Fashion-MNIST 28×28"} and "the model zoo's" in S.model_name
    calls.clear()
    import dataclasses   # subjects with different counts of seeds: the ResNet stand-in with 3 here
    monkeypatch.setitem(zoo.ZOO, "ResNet-8/2", dataclasses.replace(zoo.ZOO["ResNet-8/2"], seeds=3))
    S = nm.setup(start("merging_table3_imagenet", nm.BUDGETS, "cpu", device="cpu"), "imagenet")
    assert calls == [("VGG-16-BN/16", s) for s in range(5)] + [("ResNet-8/2", s) for s in range(3)]
    assert [len(S.subjects[s].models) for s in ("VGG", "ResNet")] == [5, 3] and S.seeds == [0, 1, 2, 3, 4]
    assert S.labels == {"VGG": "VGG-16-BN/16 on Fashion-MNIST 32×32", "ResNet": "ResNet-8/2 on Fashion-MNIST 32×32"}
    res = nm.evaluate(nm.prune_and_merge(S, ["prune", "merge"], {"VGG": [0.5], "ResNet": [0.1]}))
    floor = "ResNet-8/2 under its floor: top-1 test accuracy 0.5000 < 0.90 in 3 of 3 seeds"
    measured = [c for c in res.claims if c["key"] in res.raw["where"]]      # the controls need the two baselines, not run here
    assert {c["key"] for c in res.claims} - {c["key"] for c in measured} == {
        "control/random-partner/vgg", "merge-all-over-prune/vgg", "control/random-partner/resnet", "merge-all-over-prune/resnet"}
    for c in measured:
        assert (floor in "".join(c["reasons"][:1])) == c["key"].endswith(("resnet/r10", "resnet")), (c["key"], c["reasons"])
    assert res.extra["zoo"]["ResNet-8/2"] == dict(seeds=[0, 1, 2], values=[0.5] * 3, floor=0.9)
    calls.clear()
    S = nm.setup(start("merging_table1_activations", nm.BUDGETS, "cpu", device="cpu", seeds=1), "activations")
    assert calls == [(f"VGG-16-BN/16 {a}", 0) for a in nm.ACTIVATIONS.values()] and set(S.zoo) == set(nm.ACTIVATIONS)


def test_pooled_claims_leave_out_the_ratios_at_chance():
    "A control or diagnostic pooled over ratios averages only the ratios where its two variants are not both at chance (the cells that make a claim not evaluable), at the paper's ratios where the run has them."
    ratios, variants = [0.5, 0.6, 0.7], ["prune", "merge", "merge t=none", "random partner t=none"]
    run = start("merging_lenet", nm.BUDGETS, "cpu", device="cpu")
    S = nm.Setup(run, nm.EXPERIMENTS["lenet"], {"": nm.Subject(models=[0, 1, 2], ratios=ratios)}, test=None, num_classes=10,
                 title="t", model_name="m", model_seeds=[0, 1, 2])
    M = nm.Measurements(S, dict.fromkeys(variants), {"": ratios})
    for v in variants:
        for r in ratios:
            for i in range(3): M.hits["", v, r, i] = {1: np.array([0.12 if r == 0.7 else 0.8])}
    pooled = nm.protocol._pooled_ratios
    assert pooled(M, [""], ("merge t=none", "prune")) == [0.5, 0.6] and pooled(M, [""]) == ratios
    assert pooled(M, [""], ("merge t=none", "gone")) == ratios     # a variant a reader removed: the claim says so, not this
    M.ratios[""] = [0.7]
    assert pooled(M, [""], ("merge t=none", "prune")) == [0.7]     # nothing left: the claim is judged (not evaluable) on what there is
