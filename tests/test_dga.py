"DGA against an independent re-implementation of the paper's appendix listing, and its contract."
import json
from pathlib import Path
import pytest, torch
from torch import nn
from attribkit.core import target_grad, model_scope, attribute, as_local
from attribkit.attr.cam import UniformFullGrad
from attribkit.dga import DGA, appendix_dga, epc_mask, wc_mask
from attribkit.papers import gradient_aggregation as ga
from attribkit.papers.gradient_aggregation import flip_scores, compare_methods, load_paper_model, paper_images


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


def bn_cnn():
    torch.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 5)).double()
    with torch.no_grad():
        m[1].running_mean.uniform_(-0.5, 0.5); m[1].running_var.uniform_(0.5, 2.0); m[1].bias.uniform_(-0.3, 0.3)
    return m.eval()


def test_default_local_is_ufg_and_one_step_is_relu_ufg():
    m, x = bn_cnn(), torch.randn(3, 3, 8, 8, dtype=torch.float64)
    ufg = UniformFullGrad(m).attribute(x, 2)
    assert DGA(m).local is not None and DGA(m, n_steps=1).attribute(x, 2).equal(DGA(m, local="ufg", n_steps=1).attribute(x, 2))
    torch.testing.assert_close(DGA(m, n_steps=1).attribute(x, 2), ufg.clamp_min(0))
    assert (ufg < 0).any()  # UFG is signed, so the ReLU matters


@pytest.mark.parametrize("n_steps, q", [(30, 0.9), (8, 0.7)])
def test_dga_ufg_matches_appendix_listing(n_steps, q):
    m, x, t = bn_cnn(), torch.randn(4, 3, 8, 8, dtype=torch.float64), torch.tensor([4, 0, 1, 3])
    ours = attribute(m, x, t, method="dga", n_steps=n_steps, epc_ratio=q)
    ref = appendix_dga(x, m, t, as_local("ufg"), q, n_steps)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-8)
    assert not torch.allclose(ours, DGA(m, n_steps=1).attribute(x, t))  # the distillation sequence changes the map


def test_relu_variants_of_ig_and_gig():
    from attribkit.attr import gradient
    m, x = bn_cnn(), torch.randn(2, 3, 8, 8, dtype=torch.float64)
    ig = gradient.IntegratedGradients(m, n_steps=12).attribute(x, target=1)
    torch.testing.assert_close(attribute(m, x, 1, method="ig_p1", n_steps=12), ig.clamp_min(0))
    p2 = attribute(m, x, 1, method="ig_p2", n_steps=12)
    torch.testing.assert_close(p2, gradient.IntegratedGradients(m, n_steps=12, relu_inside=True).attribute(x, target=1))
    assert (p2 >= ig.clamp_min(0) - 1e-10).all() and not torch.allclose(p2, ig.clamp_min(0))
    gig = gradient.GuidedIG(m, n_steps=16).attribute(x, 1)
    torch.testing.assert_close(attribute(m, x, 1, method="gig_p1", n_steps=16), gig.clamp_min(0))
    g2 = attribute(m, x, 1, method="gig_p2", n_steps=16)
    assert (g2 >= gig.clamp_min(0) - 1e-10).all() and not torch.allclose(g2, gig.clamp_min(0))


def test_flip_protocol_hand_computed():
    lin = nn.Sequential(nn.Flatten(), nn.Linear(4, 2, bias=False)).double()
    with torch.no_grad(): lin[1].weight.copy_(torch.tensor([[1., 2., 3., 4.], [0., 0., 0., 0.]]))
    x = torch.ones(1, 1, 2, 2, dtype=torch.float64)
    s = flip_scores(lin, x, x * lin[1].weight[0].view(1, 1, 2, 2), 0, steps=4)
    # MoRF removes 4, 3, 2, 1 → logits 10, 6, 3, 1, 0; LeRF removes 1, 2, 3, 4 → 10, 9, 7, 4, 0 (zero fill)
    torch.testing.assert_close(s["morf_logit"], torch.tensor([0.25 * (5 + 6 + 3 + 1)], dtype=torch.float64))
    torch.testing.assert_close(s["lerf_logit"], torch.tensor([0.25 * (5 + 9 + 7 + 4)], dtype=torch.float64))
    p = torch.sigmoid(torch.tensor([10., 6., 3., 1., 0.], dtype=torch.float64))
    torch.testing.assert_close(s["morf_prob"], torch.trapezoid(p, dx=0.25)[None])


def test_flip_scores_equal_pixel_flipping():
    from attribkit.metrics import pixel_flipping
    m, x, t = bn_cnn(), torch.randn(5, 3, 8, 8, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 0])
    a = DGA(m, n_steps=4).attribute(x, t)            # many exact zeros: the seeded tie order matters
    for fill in ("zero", "mean"):
        s = flip_scores(m, x, a, t, seed=7, steps=10, fill=fill)
        for k, v in s.items():
            ref = pixel_flipping(m, x, a, t, order=k[:4], steps=10, fill=fill, softmax=k.endswith("prob"), seed=7).auc
            torch.testing.assert_close(v, ref)
    with pytest.raises(ValueError, match="shape"): flip_scores(m, x, a[:, :1], t)


def hand_setup(scale="cpu", dry_run=False, images=4, name="M", paper_name="VGG-16", model=None):
    "A hand-built `Setup`: one tiny model (the same for each seed of the run) on a few random images, no training."
    run = ga.start("test", ga.BUDGETS, scale, dry_run=dry_run, n_steps=3, flip_steps=4, seeds=3 if scale == "cpu" else None)
    m = (model or bn_cnn()).float()
    x, t = torch.randn(images, 3, 8, 8, generator=torch.Generator().manual_seed(0)), torch.arange(images) % 5
    return ga.Setup(run, [{name: (m, x, t)}] * len(run.seeds), "random", paper_names={name: paper_name})


def test_flip_table_step_keyed_claims_and_diagnoses():
    "flip_table on a hand-built 3-seed setup: measured cells over the seeds, one keyed claim per comparison (probability scores only; each with its registry claim and role), a diagnosis read from the measured cells for each claim that does not hold."
    s = hand_setup()
    res = ga.flip_table(s, ["G×I", "DGA", "ReLU(G×I)", "|G×I|", "DGA N=1"], ga.TABLE1, ga.TABLE1_CLAIMS, key="table1", title="t")
    assert [c["key"] for c in res.claims[:2]] == ["table1/gxi-over-random/vgg-16/lerf_prob", "table1/dga-gxi-over-gxi/vgg-16/lerf_prob"]
    ran = [c for c in res.claims if "dga-gxi" not in c["key"]]
    assert len(ran) == 6 and all(c["n"] == 3 and c["units"] == "seeds" for c in ran)
    gone = [c for c in res.claims if c not in ran]                      # DGA(G×I) removed: its claims stay, not evaluable
    assert len(gone) == 8 and all(c["verdict"] == "not evaluable" and any("dga_gxi" in r for r in c["reasons"]) for c in gone)
    assert not any("logit" in c["key"] for c in res.claims) and "M | DGA | LeRF logit" in res.measured   # logit: cells, not claims
    assert [(c["paper_claim"], c["role"]) for c in res.claims[:2]] == [("dga/aggregation-gxi", "control"), ("dga/aggregation-gxi", "evidence")]
    c = res.claim("table1/dga-over-gxi/vgg-16/lerf_prob")              # the aggregation's gain again: a diagnostic of over-gxi
    assert (c["paper_claim"], c["role"], c["configuration"]) == ("dga/over-gxi", "diagnostic", None)
    assert res.claim("table1/dga-over-dga-gxi/vgg-16/morf_prob")["paper_effect"] == pytest.approx(0.005)
    assert res.measured["M | DGA(G×I) | LeRF prob"] == "n/a (not run)"
    c = res.claim("table1/gxi-over-random/vgg-16/morf_prob")
    per_seed = [float((r["random"]["morf_prob"] - r["G×I"]["morf_prob"]).double().mean())
                for r in [compare_methods(*s.per_seed[0]["M"], ga.local_maps(["G×I"], s.run.budget), seed=k, steps=4) for k in s.seeds]]
    assert c["effect"] == pytest.approx(sum(per_seed) / 3)
    assert res.measured["M | DGA − G×I | LeRF prob (paired)"]["n"] == 3
    assert {k for k in res.diagnoses} == {c["key"] for c in ran if c["verdict"] != "holds"}
    for k, text in res.diagnoses.items():
        assert "AUC minus" in text


def test_flip_table_reports_model_at_chance_and_smoke_claims():
    "A model at chance (test accuracy of the shared rule) makes every claim not evaluable with the reason; at smoke the reported claims are not evaluable."
    s = hand_setup()
    s.accuracy, s.num_classes = {"M": [0.9, 0.15, 0.9]}, 10
    res = ga.flip_table(s, ["G×I", "DGA"], ga.TABLE1, ga.TABLE1_CLAIMS, key="table1", title="t")
    assert res.claims and all(c["verdict"] == "not evaluable" and any("M at chance: test accuracy 0.150 < 0.190" in r for r in c["reasons"])
                              for c in res.claims if not any(r.startswith("not run:") for r in c["reasons"]))   # the claims of the maps run
    smoke = ga.flip_table(hand_setup("smoke"), ["G×I", "DGA"], ga.TABLE1, ga.TABLE1_CLAIMS, key="table1", title="t")
    ran = [c for c in smoke.claims if not any(r.startswith("not run:") for r in c["reasons"])]
    assert ran and all(c["n"] == 4 and c["units"] == "paired images" for c in ran)          # one seed: paired images
    assert {c["verdict"] for c in smoke.reported_claims} == {"not evaluable"}


def test_flip_table_zoo_floor_and_seeds_per_model():
    "At cpu each stand-in has the zoo's number of seeds (5 and 3 in one table); a stand-in under its zoo floor in any seed makes its claims not evaluable with the zoo's reason, beside the chance rule; the extra records the zoo's values."
    from attribkit.papers import zoo
    m = bn_cnn().float()
    x, t = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0)), torch.arange(4) % 5
    low = [zoo.Trained("ResNet-8/2", k, m, a, 0.90, 0.0, True) for k, a in enumerate([0.95, 0.85, 0.91])]
    run = ga.start("test", ga.BUDGETS, "cpu", n_steps=3, flip_steps=4)
    assert run.seeds == [0, 1, 2, 3, 4] == list(range(max(zoo.ZOO[z].seeds for z in ga.ZOO_NAMES.values())))
    s = ga.Setup(run, [{"A": (m, x, t), "B": (m, x, t)}] * 3 + [{"A": (m, x, t)}] * 2, "random", {"A": [0.93] * 5, "B": [0.95, 0.85, 0.91]},
                 10, {"A": "VGG-16", "B": "ResNet-18"}, {"A": None, "B": zoo.floor_reason(low, "B")},
                 stand_ins={"B": dict(zoo="ResNet-8/2", values=[0.95, 0.85, 0.91], floor=0.90, metric="top-1 test accuracy")})
    res = ga.flip_table(s, ["G×I", "DGA"], ga.TABLE1, ga.TABLE1_CLAIMS, key="table1", title="t")
    ran = [c for c in res.claims if not any(r.startswith("not run:") for r in c["reasons"])]   # the claims of the maps run
    a = [c for c in ran if "/vgg-16/" in c["key"]]
    b = [c for c in ran if "/resnet-18/" in c["key"]]
    assert a and all(c["n"] == 5 and c["verdict"] != "not evaluable" for c in a)
    assert b and all(c["n"] == 3 and c["verdict"] == "not evaluable" and "B under its floor: top-1 test accuracy 0.8500 < 0.90 in 1 of 3 seeds"
                     in c["reasons"] for c in b)
    assert res.measured["B | test accuracy"]["n"] == 3 and res.extra["zoo"]["B"]["floor"] == 0.90
    s.accuracy["B"] = [0.95, 0.05, 0.91]                                                  # at chance as well: both reasons
    assert "B at chance" in s.not_evaluable["B"] and "under its floor" in s.not_evaluable["B"]


def test_figure_steps_on_a_hand_built_setup(tmp_path):
    "object_shares, path_concentration and grid on a tiny model: keyed claims, a reader's edit of the maps or the grid drops the claims that need what was dropped, and save() writes the JSON and the figures."
    import matplotlib
    matplotlib.use("Agg")
    s = hand_setup("paper", dry_run=True)
    s.run.out_dir = str(tmp_path)
    res = ga.object_shares(s)
    assert res.measured["M | object area (chance) | positive mass on object"]["mean"] == 0.25     # the centred square
    assert [c["key"] for c in res.claims][-1] == "fig1/dga-over-abs-gxi/vgg-16"
    assert not any("input-intensity" in c["key"] for c in res.claims)      # finds the bright object by construction: no claim
    edited = ga.object_shares(s, ["UFG", "DGA"])                         # a reader's edit: the other maps' claims stay, not evaluable
    assert [c["key"] for c in edited.claims if c["verdict"] != "not evaluable"] == ["fig1/dga-over-ufg/vgg-16"]
    assert edited.claim("fig1/ufg-over-random/vgg-16")["reasons"] == ["not run: random removed from the methods"]
    with pytest.raises(ValueError, match="`maps` must be names"):
        ga.object_shares(s, ["UFG", "Saliency"])
    path = ga.path_concentration(s)
    assert [c["key"].split("/")[1] for c in path.claims] == ["dga-keeps-object", "dga-over-random-local"]
    g = ga.grid(s, ns=[1, 3], qs=[0.6, 1.0])
    assert len(g.claims) == 2 + 2 * 2 + 2 and g.claims[2]["key"] == "fig9/aggregation/vgg-16/q=0.6/lerf_prob"
    assert g.claims[-1]["key"] == "fig9/low-q/vgg-16/q=0.6-vs-q=1.0/morf_prob" and g.claims[-1]["configuration"].startswith("other: q = 1.0")
    assert [c["role"] for c in g.claims[:3]] == ["control", "control", "evidence"]
    assert ga.grid(s, ns=[3], qs=[0.9]).claims == []                                              # no N = 1, no q = 0.6
    g.figures["g"] = ga.fig9_figure(g)
    d = json.loads(g.save().read_text())
    assert d["name"] == "test" and d["claims"][0]["key"] == g.claims[0]["key"] and (tmp_path / "figures" / "g.png").exists()


def test_moons_step_on_an_untrained_toy():
    "moons_identities on a hand-built toy (an untrained moons_mlp): the identities' residuals and no claims."
    from attribkit.models import moons_mlp
    torch.manual_seed(0)
    run = ga.start("dga_moons_toy", ga.BUDGETS, "smoke")
    X = torch.tensor([[1e-4, -2e-4], [0.5, 0.2], [-1.0, 1.5], [1.5, -0.4]], dtype=torch.float64)
    toy = ga.MoonsSetup(run, moons_mlp().double().eval(), X, [0, 1, 0, 1], 0.5, 1, 2.5)
    res = ga.moons_identities(toy, n_steps=3)
    assert res.claims == [] and res.measured["test accuracy"] == 0.5
    assert res.measured["A | identity check: max |IG − G×I| (0 in the baseline's region)"] < 1e-9
    for p in ("A (region of the baseline)", "B (other region)"):
        assert res.measured[f"{p} | identity check: |Σ UFG − f|"] < 1e-9


@pytest.mark.slow
def test_reader_edit_of_a_renamed_repro_notebook_runs(tmp_path):
    "A reader copies dga_table1_local under another name and drops |G×I| from its `methods` line: the copy runs at smoke; the removed method has no cells, and its claims stay, not evaluable, naming it."
    import papermill as pm
    root = Path(__file__).resolve().parent.parent
    nb = json.loads((root / "nbs" / "repro" / "dga_table1_local.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "".join(c["source"]).startswith("methods = ["))
    src = "".join(cell["source"])
    assert '"|G×I|", "DGA N=1"]' in src
    cell["source"] = src.replace(', "|G×I|", "DGA N=1"]', ', "DGA N=1"]')
    edited = tmp_path / "my_local_maps_copy.ipynb"
    edited.write_text(json.dumps(nb))
    pm.execute_notebook(str(edited), str(tmp_path / "executed.ipynb"), cwd=str(root), kernel_name="python3", progress_bar=False,
                        parameters={"out_dir": str(tmp_path / "out"), "device": "cpu", "n_images": 4, "flip_steps": 4, "n_steps": 3})
    d = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert d["measured"] and not any("|G×I|" in k for k in d["measured"]) and any("DGA N=1" in k for k in d["measured"])
    gone = [c for c in d["claims"] if "abs-gxi" in c["key"]]
    assert len(gone) == 2 * 3 * 2                                      # DGA against |G×I|, two scores, three models, two fills
    assert sum("/fill-black/" in c["key"] for c in gone) == 2 * 3      # the fill check's diagnostics
    assert all(c["verdict"] == "not evaluable" and "not run: abs_gxi removed from the methods" in c["reasons"] for c in gone)
    assert any(c["key"].startswith("table1/dga-gxi-over-relu-gxi/") and c["n"] == 4 for c in d["claims"])


def test_registry_claims_and_roles():
    "Every claim the step functions make (on hand-built setups) serves a registry claim of `PAPER_CLAIMS` with a role; every registry claim has evidence but those `NOT_MEASURED` (whose stand-ins say so), each evidence claim a configuration; each key once; no two registry claims rest on the same cells."
    from attribkit.claims import ROLES, check_distinct
    from attribkit.papers import registry
    ids = [pc.id for pc in ga.PAPER_CLAIMS]
    assert len(ids) == len(set(ids)) and all(pc.paper == "001" and pc.id.startswith("dga/") for pc in ga.PAPER_CLAIMS)
    assert [pc.id for pc in registry()["dga"][1]] == ids
    s, sp = hand_setup(), hand_setup("paper", dry_run=True)
    claims = []
    for methods, table, spec, key in ((ga.TABLE1_METHODS, ga.TABLE1, ga.TABLE1_CLAIMS, "table1"),
                                      (ga.TABLE2_METHODS, ga.TABLE2, ga.TABLE2_CLAIMS, "table2"),
                                      (["G×I", "IG", "GBP", "LRP", "DGA"], ga.TABLE3, ga.TABLE3_CLAIMS, "table3")):
        res = ga.flip_table(s, methods, table, spec, key=key, title="t")
        claims += res.claims
    claims += ga.stability_check(s, res)   # on Table 3's result, as its notebook does
    claims += ga.object_shares(sp).claims + ga.path_concentration(sp).claims + ga.grid(sp, ns=[1, 3, 5]).claims
    assert all(c["paper_claim"] in ids and c["role"] in ROLES for c in claims)
    assert {c["paper_claim"] for c in claims if c["role"] == "evidence"} == set(ids) - set(ga.NOT_MEASURED)
    assert all(pc.stand_ins.startswith("not measured here") for pc in ga.PAPER_CLAIMS if pc.id in ga.NOT_MEASURED)
    assert all(c["configuration"] for c in claims if c["role"] == "evidence")
    check_distinct([("nb", c) for c in claims])
    keys = [c["key"] for c in claims]
    assert len(keys) == len(set(keys)) and not any("logit" in k for k in keys)
    assert not any(k.startswith("table3/") and "-over-gxi/" in k for k in keys)        # DGA against G×I is Table 1's number


def v_gate(claims):
    return {c["key"]: tuple(c["gated_by"]) for c in claims if c["gated_by"] and "bad" in c["key"]}


def test_baseline_worse_than_random_makes_its_comparison_not_evaluable():
    "The control 'the baseline beats a random map': where it fails, DGA beating that baseline is not evaluable (and so is the registry claim)."
    from attribkit.claims import paper_verdict
    s = hand_setup()
    g = torch.Generator().manual_seed(0)
    auc = lambda v: {"lerf_prob": v + 0.01 * torch.randn(8, generator=g), "morf_prob": 1 - v + 0.01 * torch.randn(8, generator=g)}
    runs = [{"DGA": auc(0.9), "Bad": auc(0.1), "Good": auc(0.7), "random": auc(0.5)} for _ in range(3)]
    cs, _ = ga._flip_claims(s, {"M": runs}, [("DGA", ("Bad", "Good"), ga.PROB, "dga/baselines", "evidence")], "table3")
    assert v_gate(cs) == {f"table3/dga-over-bad/vgg-16/{k}": (f"table3/bad-over-random/vgg-16/{k}",) for k in ga.PROB}
    v = {c["key"]: c for c in cs}
    assert v["table3/bad-over-random/vgg-16/lerf_prob"]["verdict"] == "fails"
    assert v["table3/bad-over-random/vgg-16/lerf_prob"]["role"] == "control"
    bad = v["table3/dga-over-bad/vgg-16/lerf_prob"]
    assert bad["verdict"] == "not evaluable" and bad["reasons"] == ["control table3/bad-over-random/vgg-16/lerf_prob fails"]
    assert v["table3/good-over-random/vgg-16/morf_prob"]["verdict"] == "holds"
    assert v["table3/dga-over-good/vgg-16/morf_prob"]["verdict"] == "holds"
    pc = next(p for p in ga.PAPER_CLAIMS if p.id == "dga/baselines")
    r = paper_verdict(pc, [("dga_table3_baselines", c) for c in cs])   # the failed control gates only the comparison with `bad`
    assert r["verdict"] == "holds" and "not evaluable on" in r["support"], r


def test_table3_lrp_is_the_alpha1beta0_rule():
    "Table 3's LRP column is LRP-α1β0 (the paper cites Bach et al. 2015 without naming its rule), not LRP-ε, which is G×I on ReLU nets."
    from attribkit.attr.backprop import LRP
    m, x, t = cnn(), torch.randn(3, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1, 2])
    a = ga.local_maps(["LRP"], ga.BUDGETS["smoke"])["LRP"](m, x, t)
    torch.testing.assert_close(a, LRP(m, composite="alpha1beta0").attribute(x, t))
    assert not torch.allclose(a, LRP(m, composite="epsilon").attribute(x, t), atol=1e-6)



def test_table3_gradcam_keeps_the_records_layer_the_last_conv():
    "Table 3's Grad-CAM column reads the last nn.Conv2d, as the record did, not the default layer (the last feature block)."
    from attribkit.attr import GradCAM
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU()), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(6 * 4 * 4, 5)).double().eval()
    x, t = torch.randn(3, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2)), torch.tensor([0, 1, 2])
    a = ga.local_maps(["Grad-CAM"], ga.BUDGETS["smoke"])["Grad-CAM"](m, x, t)
    torch.testing.assert_close(a, GradCAM(m, "1.0")(x, t))
    assert not torch.allclose(a, GradCAM(m, "1")(x, t))   # the default layer, the block's output after its ReLU

def test_controls_are_what_they_say():
    from attribkit.papers.gradient_aggregation import control_methods, gxi as dga_gxi
    m, x, t = bn_cnn(), torch.randn(3, 3, 8, 8, dtype=torch.float64), torch.tensor([0, 1, 2])
    c = control_methods()
    g = gxi(m, x, t)
    torch.testing.assert_close(dga_gxi(m, x, t), g)
    torch.testing.assert_close(c["ReLU(G×I)"](m, x, t), g.clamp_min(0))
    torch.testing.assert_close(c["|G×I|"](m, x, t), g.abs())
    torch.testing.assert_close(c["DGA N=1"](m, x, t), UniformFullGrad(m).attribute(x, t).clamp_min(0))


def test_moons_identities():
    "The half-moon toy's identities (dga_moons_toy): IG = G×I when the whole path stays in the baseline's linear region; UFG is complete."
    from attribkit.models import moons_mlp
    torch.manual_seed(0)
    m = moons_mlp().double().eval()
    t = torch.zeros(1, dtype=torch.long)
    x = 1e-4 * torch.tensor([[0.7, -0.4]], dtype=torch.float64)        # so close to the baseline that no ReLU switches
    a = (torch.arange(64, dtype=torch.float64) + 0.5) / 64
    ig = x * target_grad(m, (a[:, None] * x).detach(), torch.zeros(64, dtype=torch.long)).mean(0, keepdim=True)
    torch.testing.assert_close(ig, gxi(m, x, t), rtol=1e-9, atol=1e-15)
    for x in (torch.tensor([[0.5, 0.2]], dtype=torch.float64), torch.tensor([[-1.0, 1.5]], dtype=torch.float64)):
        with torch.no_grad(): f = m(x)[0, 0]
        assert abs(float(UniformFullGrad(m).attribute(x, t).sum()) - float(f)) < 1e-9


def test_paper_scale_fails_clearly_without_local_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="`weights`"):
        load_paper_model("VGG-16", None)
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_paper_model("ResNet-18", tmp_path)
    with pytest.raises(FileNotFoundError, match="ImageNet"):
        paper_images(tmp_path, 224, 4)
    with pytest.raises(ValueError, match="`scale`"):
        ga.start("dga_table1_local", ga.BUDGETS, "huge")


def test_declared_weight_files_load_into_the_paper_architectures(tmp_path):
    "WEIGHT_FILES declares the torchvision files shared with the other papers (float16 in the dry run); load_paper_model reads one back (weights_only)."
    from attribkit.papers.experiment import torchvision_weights, write_weight_files
    assert [f.path for f in ga.WEIGHT_FILES] == ["weights/vgg16.pth", "weights/resnet18.pth", "weights/inception_v3.pth"]
    assert ga.WEIGHT_FILES[0] is torchvision_weights("vgg16")          # one declaration for every paper that reads vgg16.pth
    write_weight_files(tmp_path, [ga.WEIGHT_FILES[1]])                 # one architecture keeps the test fast
    assert torch.load(tmp_path / "weights" / "resnet18.pth", weights_only=True)["conv1.weight"].dtype == torch.float16
    m = ga.load_paper_model("ResNet-18", data_root=tmp_path)
    assert m.conv1.weight.dtype == torch.float32 and m(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)
    assert ga.PAPER_FILES["dga_fig9_grid"] == ["imagenet/val", "weights/resnet18.pth"]
    assert not hasattr(ga, "write_fake_weights")


def test_load_paper_model_rejects_another_architecture(tmp_path):
    "A LeNet state dict saved as resnet18.pth, and a file that is not a checkpoint: a ValueError naming the file before any attribution runs."
    from attribkit.papers.gradient_aggregation import load_paper_model
    from attribkit.models import lenet_300_100
    p = tmp_path / "resnet18.pth"; torch.save(lenet_300_100().state_dict(), p)
    with pytest.raises(ValueError) as e:
        load_paper_model("ResNet-18", weights=tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"weights file {p} does not fit torchvision.models.resnet18(): the file has 6 tensors, the model 122; missing 122: conv1.weight")
    assert "unexpected 6: classifier.0.weight" in msg
    p.write_bytes(b"<html>")
    with pytest.raises(ValueError, match=r"resnet18.pth is not a torch checkpoint"):
        load_paper_model("ResNet-18", weights=tmp_path)


def test_cluttered_objects_are_the_canvas_masks():
    "With masks that come with the images (cpu, cluttered canvases) the object is that mask, not the bright pixels: the shares, the note and the one extra diagnostic (DGA against the input intensity, a fair baseline on clutter) follow it."
    s = hand_setup()
    x = s.per_seed[0]["M"][1]
    assert ga._object_note(s).startswith("item silhouette")
    masks = torch.zeros(len(x), 8, 8)
    masks[:, :, :2] = 1                                                           # the left quarter: not where the input is bright
    s.masks = [masks, masks.flip(-1), masks]                                     # one set per seed, as each seed's images have them
    torch.testing.assert_close(ga._object_masks(s, x, s.per_seed[0]["M"][2], 0), masks)
    torch.testing.assert_close(ga._object_masks(s, x, s.per_seed[1]["M"][2], 1), masks.flip(-1))  # the seed's own masks
    s.masks = [masks] * 3
    assert ga.object_shares(s, ["UFG", "random"]).extra["object"].startswith("the item's silhouette on the canvas (the data's own mask")
    res = ga.object_shares(s, ["UFG", "DGA", "input intensity", "random"])
    assert res.measured["M | object area (chance) | positive mass on object"]["mean"] == 0.25
    raw = ga._unnormalise(s.kind)(x).clamp_min(0).sum(1)
    want = float(((raw * masks).sum((1, 2)) / raw.sum((1, 2))).mean())        # the intensity map's share on the given masks
    assert res.measured["M | input intensity | positive mass on object"]["mean"] == pytest.approx(want)
    c = res.claim("fig1/dga-over-input-intensity/vgg-16")
    assert c["role"] == "diagnostic" and c["paper_claim"] == "dga/object-aligned"
    s.masks = None
    assert not any("input-intensity" in c["key"] for c in ga.object_shares(s, ["DGA", "input intensity"]).claims)


def test_cluttered_setup_names_its_stand_ins():
    "cluttered=True with the zoo's stand-ins offers only the paper models the zoo has canvas stand-ins for, and names them; with other stand-ins it is a ValueError."
    run = ga.start("test", ga.BUDGETS, "cpu", n_steps=3, flip_steps=4)
    with pytest.raises(ValueError, match=r"cluttered stand-ins for these only.*ResNet-18"):
        ga.setup(run, models=["ResNet-18"], cluttered=True)
    assert ga.model_label("VGG-16", "zoo", cluttered=True) == "Canvas VGG-16-BN/16 (stand-in for VGG-16)"
    assert ga.model_label("VGG-16", "shapes") == ga.STAND_INS["VGG-16"] and ga.model_label("VGG-16", "torchvision") == "VGG-16"
    for scale in ("smoke", "paper"):                                   # elsewhere cluttered=True is rejected, not ignored
        with pytest.raises(ValueError, match=r"`cluttered=True` takes the zoo's stand-ins"):
            ga.setup(ga.start("test", ga.BUDGETS, scale), cluttered=True)
    from attribkit.papers import zoo
    e = zoo.ZOO[ga.CLUTTERED_NAMES["VGG-16"]]
    assert e.data == "fashion_canvases-64" and e.seeds >= 3 and e.floor > 0.1


def test_cpu_setup_takes_the_zoo_stand_ins_channels_last(monkeypatch):
    "At cpu the stand-ins are the zoo's (each with the zoo's seeds; nothing trains here), run channels-last; each seed gets its own sampled test images; the zoo's record is kept."
    from attribkit.papers import zoo
    from test_mask import fake_zoo   # the zoo faked: random images, untrained zoo-config stand-ins, training fails
    calls = fake_zoo(monkeypatch, values=(0.93,))
    run = ga.start("test", ga.BUDGETS, "cpu", n_images=4, device="cpu")
    s = ga.setup(run, models=["VGG-16", "ResNet-18"])
    assert calls == [(ga.ZOO_NAMES[k], s_) for k in ("VGG-16", "ResNet-18") for s_ in range(zoo.ZOO[ga.ZOO_NAMES[k]].seeds)]
    m, xs, ys = s.per_seed[0][ga.STAND_INS["VGG-16"]]
    assert xs.shape == (4, 1, 32, 32) and not torch.equal(xs, s.per_seed[1][ga.STAND_INS["VGG-16"]][1])
    convs = [p for p in m.parameters() if p.ndim == 4]
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    assert s.accuracy[ga.STAND_INS["ResNet-18"]] == [0.93] * zoo.ZOO["ResNet-8/2"].seeds
