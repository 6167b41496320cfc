"""RISE's default mask count on a user's model: time per mask and per call on torchvision resnet18 (random weights, eval
mode, no download) for two 3×224×224 images on one CPU thread, at the default `n_masks` and extrapolated to the paper's
4000. Every mask costs one forward pass per image, so a call's time is linear in `n_masks`; its noise (a Monte-Carlo mean
over masks) falls as 1/√n_masks.

    python benchmarks/bench_rise_masks.py                 # one thread, the default count, median of 3 calls
    python benchmarks/bench_rise_masks.py --threads 2 --masks 100 500
"""
from __future__ import annotations
import argparse, inspect, statistics, time
import torch
from attribkit.attr.perturbation import RISE


def main(argv=None):
    default = inspect.signature(RISE.attribute).parameters["n_masks"].default
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--masks", type=int, nargs="*", default=[default], help=f"mask counts to time (default {default})")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per count (median)")
    args = ap.parse_args(argv)
    import torchvision
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    RISE(model).attribute(x, target=[1, 2], n_masks=8, progress=False)   # warm-up
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), resnet18 (random weights), 2×3×224×224; "
          f"default n_masks = {default}")
    for n in args.masks:
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            RISE(model).attribute(x, target=[1, 2], n_masks=n, progress=False)
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        print(f"n_masks {n:>5}: {med:6.1f} s per call (median of {args.repeats}), {1000 * med / n:5.0f} ms per mask; "
              f"4000 masks at this rate: {4000 * med / n / 60:4.1f} min")


if __name__ == "__main__":
    main()
