"Fashion mosaics and canvases: version 2's intensity controls, a trained classifier's Grad-CAM on them (slow), version 1 unchanged, shapes, seeds and bad arguments."
import pytest, torch
from attribkit.data import fashion_mosaics, fashion_canvases, fashion_mnist_dir
from attribkit.metrics import intensity_auc

try: fashion_mnist_dir(); HAVE_FMNIST = True
except FileNotFoundError: HAVE_FMNIST = False
needs_fmnist = pytest.mark.skipif(not HAVE_FMNIST, reason="Fashion-MNIST is not installed (`make data`)")


def _controls(ds) -> tuple[float, float]:
    c = intensity_auc(ds.tensors[0], ds.tensors[2])
    return c["intensity"].mean, c["abs_intensity"].mean


@needs_fmnist
@pytest.mark.parametrize("build", [fashion_mosaics, fashion_canvases])
def test_version2_intensity_cannot_localise(build):
    # whole-image mask AUC of x and |x| (normalised, as a model sees it) against the objects, 512 test canvases
    v2 = _controls(build("test", 512, seed=0))
    assert all(0.35 <= a <= 0.65 for a in v2), v2
    v1 = _controls(build("test", 512, seed=0, version=1))          # the bright-items-on-dim-clutter canvases
    assert v1[0] > 0.8 and v1[1] < 0.2, v1                        # |x| ranks the dark background first


@needs_fmnist
@pytest.mark.slow
def test_trained_gradcam_localises_the_mosaics(tmp_path, monkeypatch):
    # the bounds on 512 test mosaics, with the zoo's Mosaic VGG-6-BN/2 trained (seed 0) into an empty cache:
    # the input intensity and |intensity| ≤ 0.65, the trained classifier's Grad-CAM ≥ 0.80 (whole-image mask AUC)
    from attribkit.papers import zoo
    monkeypatch.setenv("ATTRIBKIT_CACHE", str(tmp_path))
    c = zoo.localisation_controls(device="cpu")
    assert c["images"] == 512 and c["version"] == 2 and c["test_map"] >= zoo.ZOO[c["classifier"]].floor, c
    assert max(c["intensity"], c["abs_intensity"]) <= 0.65 < 0.80 <= c["gradcam"], c


@needs_fmnist
def test_version1_unchanged():
    # fingerprints of the canvases as they were before `version` existed (checked bit-identical at the change)
    x, y, m = fashion_mosaics("test", 16, seed=0, version=1).tensors
    assert abs(x.double().sum().item() + 41136.153) < 0.01
    assert y.sum(0).tolist() == [2, 1, 5, 0, 1, 4, 3, 2, 5, 2]
    assert m.sum((0, 2, 3)).tolist() == [1427, 309, 2752, 0, 397, 729, 2148, 533, 1933, 759]
    x, y, m = fashion_mosaics("train", 8, seed=5, size=40, max_items=4, clutter=3, version=1).tensors
    assert abs(x.double().sum().item() + 6524.167) < 0.01 and m.sum((0, 2, 3)).tolist()[:3] == [1371, 0, 872]


@needs_fmnist
def test_version2_shapes_labels_masks_and_seeds():
    x, y, m = fashion_mosaics("train", 40, size=48, seed=1, channels=3).tensors
    assert (x.shape, x.dtype, y.shape, m.shape, m.dtype) == ((40, 3, 48, 48), torch.float32, (40, 10), (40, 10, 48, 48), torch.bool)
    assert torch.equal(y.bool(), m.flatten(2).any(2)) and int(m.sum(1).max()) == 1
    assert torch.equal(x, fashion_mosaics("train", 40, size=48, seed=1, channels=3).tensors[0])
    assert not torch.equal(x, fashion_mosaics("train", 40, size=48, seed=2, channels=3).tensors[0])
    raw = fashion_mosaics("train", 40, size=48, seed=1, normalize=False).tensors[0]
    assert torch.allclose(raw * 2 - 1, x[:, :1]) and 0 <= raw.min() and raw.max() <= 1
    # the background takes the objects' own values: its median is within the objects' interquartile range
    obj, bg = raw[:, 0][m.any(1)], raw[:, 0][~m.any(1)]
    assert obj.quantile(0.25) < bg.median() < obj.quantile(0.75)


@needs_fmnist
def test_canvases_single_label():
    x, y, m = fashion_canvases("test", 24, seed=3).tensors
    assert (x.shape, y.shape, y.dtype, m.shape, m.dtype) == ((24, 1, 64, 64), (24,), torch.long, (24, 64, 64), torch.bool)
    assert m.flatten(1).any(1).all() and 0 <= y.min() and y.max() < 10
    assert torch.equal(m, fashion_canvases("test", 24, seed=3).tensors[2])
    assert not torch.equal(x, fashion_canvases("train", 24, seed=3).tensors[0])


@pytest.mark.parametrize("build", [fashion_mosaics, fashion_canvases])
@pytest.mark.parametrize("kwargs, match", [
    (dict(version=3), r"`version` must be 1 .* or 2 .*, got 3"),
    (dict(version="2"), r"`version` must be 1"),
    (dict(clutter=-1), r"`clutter` must be an int >= 0 for version 2"),
    (dict(clutter=0, version=1), r"`clutter` must be an int >= 1 for version 1"),
    (dict(clutter=2.5), r"`clutter` must be an int"),
    (dict(split="val"), r"`split` must be 'train' or 'test'"),
    (dict(size=16), r"`size` must be >= 32"),
])
def test_bad_arguments(build, kwargs, match):
    with pytest.raises(ValueError, match=match):     # checked before any data is read
        build(**{"split": "test", "n": 4, **kwargs})


def test_intensity_auc():
    x = torch.zeros(2, 3, 4, 4); x[:, :, :2] = 1.0; x[1] = -x[1]   # image 0: bright objects, image 1: dark objects
    m = torch.zeros(2, 4, 4, dtype=torch.bool); m[:, :2] = True
    c = intensity_auc(x, m)
    assert c["intensity"].scores.tolist() == [1.0, 0.0] and c["abs_intensity"].scores.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="`masks`"): intensity_auc(x, m[:1])
    with pytest.raises(TypeError, match="`masks` must be a torch.Tensor"): intensity_auc(x, m.tolist())
