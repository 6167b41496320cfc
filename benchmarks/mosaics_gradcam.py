"""Can a trained classifier localise on version-2 Fashion mosaics, where input intensity cannot?

Trains a small multi-label classifier (the distillation stand-in's 6-conv VGG-BN, `vgg16_bn_cifar(cfg=VGG6_CFG)` at width
1/`--width`, BCE, Adam, cosine schedule) on version-2 train mosaics (64 px) and prints, on `--n-test` test mosaics:
test mAP (per class), the intensity controls (`intensity_auc`: whole-image mask AUC of x and of |x| against the union
of the class masks) and Grad-CAM's whole-image mask AUC (each present class's map against that class's mask, Grad-CAM at
the last ReLU, 8×8 at 64 px, upsampled). With `--canvases` it does the same for single-label `fashion_canvases`
(cross-entropy; top-1 accuracy; Grad-CAM of the labelled class against its silhouette). Target: Grad-CAM ≥ 0.80 while
both intensity controls stay ≤ 0.65.

    OMP_NUM_THREADS=1 python benchmarks/mosaics_gradcam.py               # about 4 minutes on one core
    OMP_NUM_THREADS=1 python benchmarks/mosaics_gradcam.py --canvases    # plus the single-label canvases

Measured with the defaults (8,000 train / 512 test canvases, 10 epochs, width 1/2, batch 32, Adam 2e-3, seed 0; one
thread on a shared 2-core machine): mosaics: intensity AUC 0.506, |intensity| 0.495, trained in 190 s, test mAP 69.3,
Grad-CAM mask AUC 0.840; canvases: intensity 0.506, |intensity| 0.500, trained in 195 s, top-1 73.0 %, Grad-CAM 0.870.
"""
from __future__ import annotations
import argparse, time
import torch
from torch.utils.data import TensorDataset
from attribkit import data as D, models
from attribkit.attr import GradCAM
from attribkit.metrics import intensity_auc, mask_auc, multilabel_map

VGG6_CFG = [32, "M", 64, "M", 128, 128, "M", 256, 256, "M"]  # the distillation notebook's `_VGG6_CFG`
LAYER = "features.20"                                          # the last ReLU: 8×8 maps at 64 px


def gradcam_auc(model, x: torch.Tensor, pairs: torch.Tensor, masks: torch.Tensor, batch: int = 128) -> float:
    "Mean whole-image mask AUC of Grad-CAM over (image index, class) `pairs` against `masks` (one per pair)."
    cam, out = GradCAM(model, LAYER, channels="one"), []
    for s in range(0, len(pairs), batch):
        i, k = pairs[s:s + batch].T
        out.append(cam.attribute(x[i], k).detach()[:, 0])
    return mask_auc(torch.cat(out), masks).mean


def run(kind: str, a) -> None:
    build = D.fashion_mosaics if kind == "mosaics" else D.fashion_canvases
    t = time.perf_counter()
    tr, te = build("train", a.n_train, seed=a.seed, version=a.version), build("test", a.n_test, seed=a.seed, version=a.version)
    x_te, y_te, m_te = te.tensors
    print(f"[{kind}, version {a.version}] {a.n_train} train / {a.n_test} test canvases built in {time.perf_counter() - t:.1f} s")
    c = intensity_auc(x_te, m_te)
    print(f"  intensity AUC {c['intensity'].mean:.3f} · |intensity| AUC {c['abs_intensity'].mean:.3f}")
    torch.manual_seed(a.seed)
    model = models.vgg16_bn_cifar(num_classes=10, in_channels=1, input_size=64, width=a.width, cfg=VGG6_CFG)
    t = time.perf_counter()
    models.train(model, TensorDataset(*tr.tensors[:2]), epochs=a.epochs, lr=2e-3, optimizer="adam", weight_decay=0.0,
                 batch_size=32, loss="bce" if kind == "mosaics" else "ce", schedule="cosine", seed=a.seed,
                 device="cpu", progress=False)
    print(f"  trained {a.epochs} epochs (width 1/{a.width}) in {time.perf_counter() - t:.0f} s")
    with torch.no_grad(): logits = torch.cat([model(x_te[s:s + 256]) for s in range(0, len(x_te), 256)])
    if kind == "mosaics":
        print(f"  test mAP {100 * multilabel_map(logits, y_te):.1f}")
        pairs = y_te.nonzero()                                    # (image, present class)
        auc = gradcam_auc(model, x_te, pairs, m_te[pairs[:, 0], pairs[:, 1]])
    else:
        print(f"  test top-1 accuracy {100 * (logits.argmax(1) == y_te).float().mean():.1f} %")
        auc = gradcam_auc(model, x_te, torch.stack([torch.arange(len(y_te)), y_te], 1), m_te)
    print(f"  Grad-CAM ({LAYER}) whole-image mask AUC {auc:.3f} over {len(x_te)} test canvases")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-train", type=int, default=8000)
    ap.add_argument("--n-test", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--width", type=int, default=2, help="width divisor of the 6-conv VGG-BN")
    ap.add_argument("--version", type=int, default=2, help="fashion_mosaics version (1 for comparison)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--canvases", action="store_true", help="also the single-label fashion_canvases")
    a = ap.parse_args()
    torch.set_num_threads(1)
    run("mosaics", a)
    if a.canvases: run("canvases", a)


if __name__ == "__main__":
    main()
