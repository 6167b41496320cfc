"""DGA speed: 30-step DGA vs 30 forward+backward passes of the same batch, and vs the appendix listing run per sample.

Run: python benchmarks/bench_dga.py [--quick]. Prints medians over repeats and the ratios, all measured in this run."""
import argparse, statistics, time
import torch
from torch import nn
from attribkit.core import target_grad, model_scope
from attribkit.dga import DGA, appendix_dga


def gxi(model, x, t):
    return x * target_grad(model, x, t)


def small_cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10)).eval()


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--quick", action="store_true"); a = ap.parse_args()
    repeats, steps = (3, 30) if a.quick else (5, 30)
    model, x = small_cnn(), torch.randn(16, 3, 32, 32)
    t = torch.arange(16) % 10
    def passes():
        with model_scope(model):
            for _ in range(steps): gxi(model, x, t)
    dga = DGA(model, local=gxi, n_steps=steps)
    lower = median_time(passes, repeats)
    ours = median_time(lambda: dga.attribute(x, t), repeats)
    ref = median_time(lambda: appendix_dga(x, model, t, gxi, 0.9, steps), max(1, repeats // 2))
    print(f"batch 16x3x32x32, small CNN, {steps} steps, local = G*I, {torch.get_num_threads()} threads")
    print(f"| what | median s | ratio |")
    print(f"|---|---|---|")
    print(f"| {steps} x (forward+backward) | {lower:.3f} | 1.00 |")
    print(f"| DGA (attribkit) | {ours:.3f} | {ours / lower:.2f}x the passes (goal <= 1.15) |")
    print(f"| appendix listing, per sample | {ref:.3f} | attribkit is {ref / ours:.2f}x faster (goal >= 1.5) |")


if __name__ == "__main__":
    main()
