"The paper figures' layout at the record's sizes, on stand-in results: saved size (110 dpi, bbox tight) within 1600 px, legends outside every data area, galleries split rather than tall, class names on the gallery, y-ranges fitted to the data."
from types import SimpleNamespace
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest, torch
from torch.utils.data import Subset, TensorDataset
from attribkit import data as D
from attribkit.papers import attribution_masks as AM, distillation as DI, neuron_merging as NM

DPI, MAX_PX = 110, 1600   # attribkit.results.save_figure's dpi; the widest and tallest figure the record should hold


def saved_px(fig) -> tuple[int, int]:
    "(width, height) in pixels of `fig` as save_figure writes it (bbox tight, 0.1 in padding)."
    fig.canvas.draw()
    bb = fig.get_tightbbox(fig.canvas.get_renderer())
    return round((bb.width + 0.2) * DPI), round((bb.height + 0.2) * DPI)


def legends_clear_of_data(fig) -> bool:
    "No legend (of an axes or of the figure) overlaps the data area of any axes."
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legs = [a.get_legend() for a in fig.axes if a.get_legend()] + list(fig.legends)
    return bool(legs) and not any(l.get_window_extent(r).overlaps(a.get_window_extent(r)) for l in legs for a in fig.axes)


def splits(name: str, n_classes: int = 10, test=None):
    return D.DataSplits(None, test if test is not None else TensorDataset(torch.zeros(4, 1, 32, 32), torch.zeros(4)), n_classes,
                        (0.5,), (0.5,), name)


def test_class_names_from_the_data_set():
    assert AM.class_names(splits("fashion_mnist"))[9] == "Ankle boot"
    assert AM.class_names(splits("digits"))[3] == "digit 3"
    cifar = SimpleNamespace(classes=list(D.VOC_CLASSES[:10]), __len__=lambda: 4)
    assert AM.class_names(splits("cifar10", test=cifar))[0] == "aeroplane"
    sub = Subset(TensorDataset(torch.zeros(4)), range(2)); sub.dataset.classes = ["a", "b"]   # a dry run's head of CIFAR
    assert AM.class_names(splits("cifar10", 2, test=sub)) == ["a", "b"]


def gallery_result(n_images=3, n_methods=8):
    "A Figure-3 result shaped like the cpu record's: Fashion-MNIST 32×32, 8 methods × 3 images, masks for i = 1..10."
    g = torch.Generator().manual_seed(0)
    ys = torch.tensor([9, 2, 1, 0, 3][:n_images])
    mks = {f"method {k}": torch.rand(10, n_images, 1, 32, 32, generator=g) for k in range(n_methods)}
    return SimpleNamespace(raw=dict(shown=(torch.rand(n_images, 1, 32, 32, generator=g), ys, mks), splits=splits("fashion_mnist")),
                           extra=dict(model="NIB VGG16 at widths ÷16 on Fashion-MNIST 32×32 (stand-in for NIB VGG16 on CIFAR-10)",
                                      iterations=[1, 2, 3, 5, 10]), run=SimpleNamespace(seeds=[0, 1, 2], scale="cpu"))


@pytest.mark.parametrize("n_images,n_methods,n_figs", [(3, 8, 3), (5, 4, 3), (1, 11, 2)])
def test_gallery_splits_rather_than_tall(n_images, n_methods, n_figs):
    figs = AM.gallery_figures(gallery_result(n_images, n_methods))
    assert len(figs) == n_figs
    titles = [a.get_title() for f in figs for a in f.axes if a.get_title()]
    assert "input: Ankle boot" in titles and not any("label" in t for t in titles)
    for fig in figs:
        w, h = saved_px(fig)                                 # draws the figure: the extents below are the drawn ones
        assert w <= MAX_PX and h <= MAX_PX, (w, h)
        rows = fig.axes[0].get_gridspec().nrows
        assert rows <= 8
        r = fig.canvas.get_renderer()                        # the suptitle clears every column title
        top = min(a.title.get_window_extent(r).y0 for a in fig.axes if a.get_title())
        assert fig._suptitle.get_window_extent(r).y0 >= top
        plt.close(fig)
    plt.close("all")


def test_mia_figure_shares_x_and_keeps_legends_off_the_curves():
    I, methods = 10, [AM.PGXI, "GBP", "G×I", "DL", "IG", "G×SI", "G (control)", "random (control)"]
    curves = {m: list(np.random.default_rng(k).random(I + 1)) for k, m in enumerate(methods)}
    for dsets in (["cifar10"], ["cifar10", "cifar100"]):
        extra = {"iterations": I, "models": {d: "NIB VGG16 at widths ÷16 on Fashion-MNIST 32×32" for d in dsets},
                 "method_names": {m: AM.LABELS[m] for m in methods},
                 "curves": {d: curves for d in dsets}, "curves_pred": {d: {"G×SI": curves["G×SI"]} for d in dsets},
                 "curves_wrong": {d: {"G×I": curves["G×I"], "G×SI": curves["G×SI"]} for d in dsets}}
        fig = AM.mia_figure(SimpleNamespace(extra=extra, run=SimpleNamespace(scale="cpu", seeds=[0, 1, 2])))
        assert len({a.get_xlim() for a in fig.axes}) == 1 and fig.axes[0].get_xlim()[1] >= 19   # the paper's 20 iterations
        assert legends_clear_of_data(fig) and max(saved_px(fig)) <= MAX_PX
        plt.close(fig)


def test_distillation_table_legend_off_the_bars():
    names = ["Full (Teacher)", "Naive-KD", "EWA", "SWA", "SSWA", "x4 Naive-KD", "x4 SSWA", "x8 Naive-KD", "x8 SSWA"]
    cols = ("mAP", "F1", "AUC", "Point Acc")
    cell = lambda: {"mean": float(np.random.default_rng(0).uniform(5, 90)), "se": 1.0}
    res = SimpleNamespace(extra=dict(title="Rebuttal Table 1 — stand-in", table={n: {k: cell() for k in cols} for n in names},
                                     config={"main": "x2", "lam": 10.0},   # the run's students: width and λ (the paper's: x4, 100)
                                     controls={"random map": {"AUC": 50.0, "Point Acc": 9.0}, "input intensity": {"AUC": 88.0, "Point Acc": 72.0}}))
    fig = DI.table1_figure(res)
    assert legends_clear_of_data(fig) and saved_px(fig)[0] <= MAX_PX
    plt.close(fig)


def merging_run(low: float):
    "A LeNet-like result: one subject, four ratios, six variants, three seeds; accuracies between `low` and 90 %."
    from attribkit.papers.experiment import start
    ratios, variants = [0.5, 0.6, 0.7, 0.8], ["prune", "merge", "merge t=none", "random partner t=none", "prune (official ranking)",
                                             "merge (official ranking)"]
    from dataclasses import replace
    from attribkit.papers.experiment import Result
    run = start("merging_lenet", NM.BUDGETS, "cpu", device="cpu")
    exp = replace(NM.EXPERIMENTS["lenet"], paper={f"{r:.0%}": {"prune": 88.0 - 25 * (r - 0.5), "merge": 89.0 - 10 * (r - 0.5)} for r in ratios})
    S = NM.Setup(run, exp, {"": NM.Subject(models=[0, 1, 2], ratios=ratios)}, test=None, num_classes=10,
                 title="t", model_name="our LeNet-300-100s, 3 seeds", model_seeds=[0, 1, 2])
    M = NM.Measurements(S, dict.fromkeys(variants), {"": ratios})
    for j, v in enumerate(variants):
        for r in ratios:
            for i in range(3): M.hits["", v, r, i] = {1: np.array([(90 - (90 - low) * (r - 0.5) / 0.3 * (j + 1) / 6 + i) / 100])}
    for i in range(3): M.hits["", "baseline", None, i] = {1: np.array([0.87])}
    S.baseline[""] = [M.hits["", "baseline", None, i] for i in range(3)]
    return Result(run, raw=dict(measurements=M))


def test_merging_plot_fits_the_data_and_legend_below():
    fig = NM.merging_figure(merging_run(low=52))
    lo, hi = fig.axes[0].get_ylim()
    assert 40 < lo < 52 and 90 < hi < 100                     # chance (10 %) is far below: not on the axis
    assert any("below the axis" in t.get_text() for t in fig.legends[0].get_texts())
    assert legends_clear_of_data(fig) and saved_px(fig)[0] <= MAX_PX
    plt.close(fig)
    fig = NM.merging_figure(merging_run(low=11))                       # curves down to chance: chance on the axis
    assert fig.axes[0].get_ylim()[0] < 10
    plt.close(fig)


def test_report_shows_every_part_of_a_split_gallery(tmp_path):
    from attribkit.report import figure_files, html_report, paper_page
    from attribkit.results import save_results
    figs = tmp_path / "figures"; figs.mkdir()
    for f in ("gal.png", "gal_2.png", "gal_10.png", "gal_3.png", "gal_grid.png", "other.png"): (figs / f).write_bytes(b"png")
    assert [p.name for p in figure_files(figs, "gal")] == ["gal.png", "gal_2.png", "gal_3.png", "gal_10.png"]
    assert figure_files(figs, "none") == [] and figure_files(None, "gal") == []
    rec = {"name": "gal", "status": "ok", "wall_time": 1.0, "executed": None,
           "results": save_results("gal", {"x": 1.0}, {}, [], scale="smoke", seed=0, out_dir=tmp_path)}
    md = paper_page("Other notebooks", [], [rec], figures=figs, figures_rel_to=tmp_path)
    assert "![gal](figures/gal.png)" in md and "![gal](figures/gal_3.png)" in md and "gal_grid" not in md
    idx = html_report([rec], {"scale": "smoke", "seed": 0, "device": "cpu"}, tmp_path, figs).read_text()
    assert "src='figures/gal_10.png'" in idx and (tmp_path / "html" / "figures" / "gal_2.png").exists()


def test_committed_record_figures_within_1600_px():
    "Every figure of the committed record is at most 1600 px wide and tall (galleries are split into parts)."
    from pathlib import Path
    from PIL import Image
    pngs = sorted((Path(__file__).resolve().parent.parent / "figures").glob("*.png"))
    assert len(pngs) >= 24
    big = {p.name: Image.open(p).size for p in pngs if max(Image.open(p).size) > MAX_PX}
    assert not big, big
