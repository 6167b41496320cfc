"""MIA speed: masked_input_accuracy with G×SI over 1,000 images × 10 iterations vs the same 10 forward+backward passes.

Run: python benchmarks/bench_mask.py [--repeats 5]. The model is the smoke NIB VGG16 (widths ÷16) on digits, untrained
(speed does not depend on the weights). Prints the medians and the median of the per-repeat ratios (the two are interleaved), all measured in this run."""
import argparse, statistics, time
import torch
from attribkit.core import model_scope, target_grad
from attribkit.data import digits
from attribkit.mask import masked_input_accuracy
from attribkit.models import nib_vgg
from attribkit.papers.attribution_masks import DIGITS_NIB_CONFIG


def timed(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--repeats", type=int, default=5); a = ap.parse_args()
    d = digits()
    x = torch.cat([d.train.tensors[0], d.test.tensors[0]])[:1000]
    y = torch.cat([d.train.tensors[1], d.test.tensors[1]])[:1000]
    torch.manual_seed(0)
    model = nib_vgg(**DIGITS_NIB_CONFIG).eval()
    batch, iterations = 128, 10

    def passes():  # the lower bound: 10 forward+backward passes of G×SI over the same images, same batches
        with model_scope(model):
            for _ in range(iterations):
                for s in range(0, len(x), batch):
                    xb = x[s:s + batch]; xb.sign() * target_grad(model, xb, y[s:s + batch])

    mia = lambda: masked_input_accuracy(model, (x, y), "gxsi", iterations, batch_size=batch, progress=False)
    pairs = [(timed(passes), timed(mia)) for _ in range(a.repeats)]   # interleaved, so load drift hits both alike
    lower, ours = statistics.median(p for p, _ in pairs), statistics.median(m for _, m in pairs)
    ratio = statistics.median(m / p for p, m in pairs)
    print(f"1,000 digits images (3x32x32), NIB VGG16 widths/16, batch {batch}, {iterations} iterations, "
          f"{torch.get_num_threads()} threads, median of {a.repeats}")
    print("| what | median s | ratio |\n|---|---|---|")
    print(f"| {iterations} x (forward+backward) G×SI | {lower:.3f} | 1.00 |")
    print(f"| masked_input_accuracy (Q_0..Q_{iterations}) | {ours:.3f} | {ratio:.2f}x (median of paired ratios; goal <= 1.2) |")


if __name__ == "__main__":
    main()
