"Built-in data sets: determinism, shapes, label/mask consistency and the loaders' missing-data errors."
import pytest, torch
from attribkit import data
from attribkit.data import digits, moons, shapes, cifar10, cifar100, fashion_mnist, imagenet_folder, voc2012, DataSplits


def test_digits_split_and_normalisation():
    d = digits()
    assert isinstance(d, DataSplits) and d.name == "digits" and d.num_classes == 10
    xtr, ytr = d.train.tensors
    assert xtr.shape == (1437, 3, 32, 32) and len(d.test) == 360 and ytr.dtype == torch.long
    assert torch.allclose(xtr.mean((0, 2, 3)), torch.zeros(3), atol=1e-5)
    assert torch.allclose(xtr.std((0, 2, 3), unbiased=False), torch.ones(3), atol=1e-4)
    assert abs(d.mean[0] - 0.305) < 2e-3 and abs(d.std[0] - 0.324) < 2e-3
    # background (raw 0) maps to -mean/std
    assert abs(xtr.min().item() + d.mean[0] / d.std[0]) < 1e-4


def test_digits_deterministic_and_seeded():
    a, b, c = digits(), digits(), digits(seed=1)
    assert torch.equal(a.train.tensors[0], b.train.tensors[0]) and torch.equal(a.test.tensors[1], b.test.tensors[1])
    assert not torch.equal(a.test.tensors[1], c.test.tensors[1])
    raw = digits(size=8, channels=1, normalize=False)
    assert raw.train.tensors[0].shape[1:] == (1, 8, 8) and raw.mean == (0.0,) and raw.train.tensors[0].max() == 1.0


def test_moons():
    m = moons(n_samples=200, noise=0.2, seed=3)
    x, y = m.train.tensors
    assert x.shape == (160, 2) and x.dtype == torch.float32 and y.dtype == torch.long and set(y.tolist()) == {0, 1}
    assert torch.equal(x, moons(n_samples=200, noise=0.2, seed=3).train.tensors[0])


@pytest.mark.parametrize("size, k", [(32, 5), (64, 10)])
def test_shapes_multilabel(size, k):
    s = shapes(n_train=48, n_test=16, size=size, num_classes=k, seed=2)
    x, y, m = s.train.tensors
    assert x.shape == (48, 3, size, size) and x.dtype == torch.float32
    assert y.shape == (48, k) and y.dtype == torch.float32 and m.shape == (48, k, size, size) and m.dtype == torch.bool
    assert torch.equal(m.flatten(2).any(2).float(), y)           # positive label <=> non-empty mask
    assert y.sum(1).min() >= 1 and y.sum(1).max() <= 3
    assert (m.sum(1) <= 1).all()                                 # no overlapping objects
    assert (m.flatten(2).sum(2)[y.bool()] >= 6).all()            # every object is visible
    assert torch.equal(x, shapes(n_train=48, n_test=16, size=size, num_classes=k, seed=2).train.tensors[0])
    assert not torch.equal(x, shapes(n_train=48, n_test=16, size=size, num_classes=k, seed=3).train.tensors[0])
    assert len(s.mean) == 3 and all(isinstance(v, float) for v in s.mean + s.std)
    assert s.test.tensors[0].shape[0] == 16


def test_shapes_all_classes_occur_and_single_label():
    s = shapes(n_train=200, n_test=0, num_classes=10, seed=0)
    assert (s.train.tensors[1].sum(0) > 0).all()
    ss = shapes(n_train=60, n_test=20, num_classes=5, label="single", seed=0)
    x, y, m = ss.train.tensors
    assert y.dtype == torch.long and y.shape == (60,) and 0 <= y.min() and y.max() < 5
    assert torch.equal(m.flatten(2).any(2).sum(1), torch.ones(60, dtype=torch.long))
    assert torch.equal(m.flatten(2).any(2).float().argmax(1), y)


@pytest.mark.parametrize("kw, msg", [(dict(num_classes=11), "num_classes"), (dict(label="both"), "label"),
                                     (dict(size=8), "size"), (dict(num_classes=2, max_objects=3), "max_objects")])
def test_shapes_bad_arguments(kw, msg):
    with pytest.raises(ValueError, match=msg):
        shapes(n_train=4, n_test=0, **kw)


def test_loaders_name_missing_files(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "not-installed")
    monkeypatch.delenv("ATTRIBKIT_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match=r"cifar-10-batches-py.*") as e:
        cifar10(tmp_path)
    assert "data_batch_1" in str(e.value) and "test_batch" in str(e.value) and str(tmp_path) in str(e.value)
    with pytest.raises(FileNotFoundError, match="cifar-100-python"):
        cifar100(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"FashionMNIST.raw") as e:
        fashion_mnist(tmp_path / "none")
    assert "make data" in str(e.value) and "ATTRIBKIT_DATA" in str(e.value)
    with pytest.raises(FileNotFoundError, match="val"):
        imagenet_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"VOCdevkit.VOC2012") as e:
        voc2012(tmp_path)
    assert "ImageSets/Main/train.txt" in str(e.value)
    with pytest.raises(FileNotFoundError, match="SegmentationClass"):
        voc2012(tmp_path, task="segmentation")
    with pytest.raises(FileNotFoundError, match="data_root"):
        cifar10(None)


def test_loader_lists_only_missing_files(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"; folder.mkdir()
    for i in range(1, 6): (folder / f"data_batch_{i}").write_bytes(b"")
    with pytest.raises(FileNotFoundError) as e:
        cifar10(tmp_path)
    msg = str(e.value)
    assert "test_batch" in msg and "batches.meta" in msg and "data_batch_1" not in msg


def _fashion(tmp_path, compress="gz"):
    from attribkit.fake_data import write_fashion_mnist
    return write_fashion_mnist(tmp_path, n_train=20, n_test=10, compress=compress)


def test_fashion_gz_that_is_not_gzip_names_file(tmp_path):
    raw = _fashion(tmp_path)
    f = raw / "t10k-labels-idx1-ubyte.gz"
    import gzip
    f.write_bytes(gzip.decompress(f.read_bytes()))              # uncompressed bytes under a .gz name
    with pytest.raises(ValueError) as e:
        fashion_mnist(tmp_path)
    msg = str(e.value)
    assert str(f) in msg and "expected the gzip magic 1f 8b, found 00 00 08 01" in msg and "remove the .gz suffix" in msg
    f.write_bytes(b"<html>not found</html>")                   # e.g. an error page saved by a download
    with pytest.raises(ValueError, match=r"not gzip-compressed: expected the gzip magic 1f 8b, found 3c 68 74 6d; download"):
        fashion_mnist(tmp_path)


def test_fashion_truncated_idx_names_file_and_sizes(tmp_path):
    raw = _fashion(tmp_path, compress="plain")
    f = raw / "train-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(ValueError) as e:
        fashion_mnist(tmp_path)
    assert str(f) in str(e.value) and "holds 15,580 bytes of data, but its header (shape (20, 28, 28)) says 15,680" in str(e.value)
    assert "truncated" in str(e.value)
    f.write_bytes(b"\x00\x00\x08\x03\x00\x00")                 # cut inside the header
    with pytest.raises(ValueError, match="header needs 16 bytes, the file has 6"):
        fashion_mnist(tmp_path)
    f.write_bytes(b"\x00\x00\x0d\x03" + bytes(12))             # float idx, not unsigned bytes
    with pytest.raises(ValueError, match="expected the magic 00 00 08 0N .*found 00 00 0d 03"):
        fashion_mnist(tmp_path)


def test_fashion_truncated_gz_names_file(tmp_path):
    raw = _fashion(tmp_path)
    f = raw / "t10k-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:-50])
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte.gz is a damaged or truncated gzip file"):
        fashion_mnist(tmp_path)


@pytest.mark.parametrize("drop, want", [("labels", "expected a dict with 'data' and 'labels' or 'fine_labels'"),
                                        ("data", "expected a dict with 'data' and 'labels' or 'fine_labels'")])
def test_cifar_pickle_missing_key_names_file(tmp_path, drop, want):
    from attribkit.fake_data import write_cifar10, py2_pickle
    import pickle
    d = write_cifar10(tmp_path, n_train=10, n_test=10)
    with open(d / "data_batch_3", "rb") as f: batch = pickle.load(f, encoding="latin1")
    (d / "data_batch_3").write_bytes(py2_pickle({k.encode(): v for k, v in batch.items() if k != drop}))
    with pytest.raises(ValueError) as e:
        cifar10(tmp_path)
    msg = str(e.value)
    assert str(d / "data_batch_3") in msg and want in msg
    assert "found keys ['batch_label', " in msg and f"'{drop}'" not in msg.split("found keys")[1]


def test_cifar_meta_and_non_pickle_name_file(tmp_path):
    from attribkit.fake_data import write_cifar10, py2_pickle
    d = write_cifar10(tmp_path, n_train=10, n_test=10)
    meta = (d / "batches.meta").read_bytes()
    (d / "batches.meta").write_bytes(py2_pickle({b"num_vis": 3072}))
    with pytest.raises(ValueError, match=r"batches.meta is not a CIFAR meta file: expected a dict with 'label_names', found keys \['num_vis'\]"):
        cifar10(tmp_path)
    (d / "batches.meta").write_bytes(meta)
    (d / "test_batch").write_bytes(b"\x1f\x8b not a pickle")
    with pytest.raises(ValueError, match=r"test_batch is not a CIFAR python pickle \(UnpicklingError"):
        cifar10(tmp_path)
