"attribkit.viz: de-normalisation, heatmap scaling, grids, curves and the atomic PNG writer (Agg backend)."
import os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest, torch
from attribkit.viz import to_image, to_heatmap, show_attribution, attribution_grid, plot_curves, save_figure


def test_to_image_denormalises_and_clips():
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    raw = torch.rand(3, 4, 5, generator=torch.Generator().manual_seed(0))
    x = (raw - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    im = to_image(x, mean, std)
    assert im.shape == (4, 5, 3)
    np.testing.assert_allclose(im, raw.permute(1, 2, 0).numpy(), atol=1e-6)
    assert to_image(torch.full((1, 2, 2), 9.0), [0.0], [1.0]).max() == 1.0
    assert to_image(torch.randn(1, 3, 3)).shape == (3, 3)
    with pytest.raises(ValueError, match="`x`"):
        to_image(torch.zeros(2, 3, 4, 4))


def test_heatmap_signed_centred_and_absolute():
    a = torch.tensor([[[1.0, -3.0], [0.0, 2.0]], [[1.0, 0.0], [0.0, 0.0]]])
    np.testing.assert_allclose(to_heatmap(a), [[2 / 3, -1.0], [0.0, 2 / 3]])
    np.testing.assert_allclose(to_heatmap(a, signed=False), [[2 / 3, 1.0], [0.0, 2 / 3]])
    assert (to_heatmap(torch.zeros(1, 3, 3)) == 0).all()
    ax = show_attribution(a, torch.rand(3, 2, 2), signed=True)
    im = ax.images[-1]
    assert im.get_clim() == (-1, 1) and im.get_cmap().name == "bwr"
    plt.close(ax.figure)


def test_grid_and_save_writes_png(tmp_path):
    imgs = torch.rand(2, 3, 6, 6)
    fig = attribution_grid(imgs, {"gxi": torch.randn(2, 3, 6, 6), "gradcam": torch.rand(2, 1, 6, 6)},
                           signed={"gradcam": False}, overlay=True, mean=[0.0] * 3, std=[1.0] * 3)
    assert len(fig.axes) == 6
    p = save_figure(fig, "grid", folder=tmp_path / "figures")
    plt.close(fig)
    assert p == tmp_path / "figures" / "grid.png" and p.stat().st_size > 1000
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.listdir(p.parent) == ["grid.png"]  # no temporary file left behind
    with pytest.raises(ValueError, match="has 1 maps but there are 2 images"):
        attribution_grid(imgs, {"x": torch.rand(1, 3, 6, 6)})


def test_save_failure_leaves_nothing(tmp_path):
    class Broken:
        def savefig(self, *a, **k): raise RuntimeError("boom")
    with pytest.raises(RuntimeError):
        save_figure(Broken(), "x", folder=tmp_path)
    assert os.listdir(tmp_path) == []


def test_curves_with_bands():
    x = np.linspace(0, 1, 4)
    fig = plot_curves(x, {"runs": np.ones((3, 4)) * [[0], [1], [2]], "mean": x}, std={"mean": np.full(4, 0.1)})
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and len(ax.collections) == 2
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.ones(4))
    with pytest.raises(ValueError, match="points"):
        plot_curves(x, {"bad": np.ones(3)})
    plt.close("all")


def test_plot_curves_takes_a_metrics_result():
    "A user's explain → score → picture: `plot_curves(pixel_flipping(...))` is a Figure with named axes, AUCs and directions."
    from matplotlib.figure import Figure
    from attribkit.core import attribute
    from attribkit.metrics import flip_curves, insertion_deletion, pixel_flipping
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 36, 5))
    x = torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(1))
    a = attribute(m, x, method="gxi")
    pf = pixel_flipping(m, x, a, steps=6)
    fig = plot_curves(pf)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "fraction removed, most relevant first" and ax.get_ylabel() == "target probability"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"pixel flipping (MoRF): AUC {pf.mean_auc:.3f} ↓"]
    np.testing.assert_allclose(ax.lines[0].get_xdata(), pf.fractions.numpy())
    np.testing.assert_allclose(ax.lines[0].get_ydata(), pf.curves.mean(0).numpy(), rtol=1e-6)
    assert len(ax.collections) == 1                                   # the ±1 std band over images
    both = plot_curves(flip_curves(m, x, a, order="lerf", steps=6)).axes[0]   # {score: Curves}: two y units
    assert [t.get_text().split(" AUC")[0] for t in both.get_legend().get_texts()] == ["prob:", "logit:"]
    assert all(t.get_text().endswith("↑") for t in both.get_legend().get_texts()) and both.get_ylabel() == "target score"
    ins = insertion_deletion(m, x, a, mode="insertion", steps=6)
    methods = plot_curves({"G×I": ins, "random": insertion_deletion(m, x, torch.randn_like(x), mode="insertion", steps=6)},
                          title="insertion").axes[0]
    assert methods.get_xlabel() == "fraction inserted, most relevant first" and methods.get_title() == "insertion"
    assert isinstance(ins.plot(), Figure) and ins.plot(xlabel="x").axes[0].get_xlabel() == "x"
    _, mine = plt.subplots()
    assert plot_curves(pf, ax=mine) is mine.figure
    with pytest.raises(ValueError, match="`curves` must be None"):
        plot_curves(pf, {"a": [1.0]})
    plt.close("all")
