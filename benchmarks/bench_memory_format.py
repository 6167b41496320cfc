"""Channels-last inference for the DGA notebooks' stand-ins: the contiguous (NCHW) against the channels-last memory
format, on one CPU core, for the zoo's three DGA stand-ins (random weights: the architectures, not the trained models).

Per stand-in it times, `--repeats` times interleaved (so load drift on a shared machine hits both formats alike):
  - forward: the pixel-flip protocol's pass, `--images` images × 21 flip steps without gradients (`flip_curves`);
  - forward+backward: G×I on the same rows (the gradient pass IG, DGA and SmoothGrad repeat);
and prints the median times, the median per-repeat ratio contiguous / channels-last (> 1: channels-last faster) and the
largest relative difference of the outputs (forward: rounding; forward+backward: also max-pool windows of tied values,
whose gradient each format may send to another of the tied inputs). The chunk size is the library's own (`core.tuned_chunks`
for the gradients, `core.auto_batch_size` for the forward passes), the same in both formats.

    python benchmarks/bench_memory_format.py [--repeats 5] [--images 64] [--threads 1]
"""
import argparse, statistics, time
import torch
from attribkit.core import auto_batch_size, batched_forward, target_grad, tuned_chunks
from attribkit.papers import zoo
from attribkit.papers.experiment import channels_last
from attribkit.papers.gradient_aggregation import ZOO_NAMES


def timed(fn):
    t0 = time.perf_counter(); out = fn(); return time.perf_counter() - t0, out


def gxi_rows(model, rows, t):
    return torch.cat([rows[s] * target_grad(model, rows[s], t[s]) for s in tuned_chunks(len(rows), model, rows)])


def bench(name, repeats, images):
    torch.manual_seed(0)
    models = {"contiguous": zoo.ZOO[name].build().eval()}
    models["channels-last"] = channels_last(zoo.ZOO[name].build().eval())
    models["channels-last"].load_state_dict(models["contiguous"].state_dict())
    rows = torch.rand(images * 21, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    t = torch.arange(len(rows)) % 10
    work = {"forward": lambda m: batched_forward(m, rows, auto_batch_size(m, rows)), "fwd+bwd": lambda m: gxi_rows(m, rows, t)}
    res = {}
    for kind, fn in work.items():
        for m in models.values(): fn(m)   # warm-up; the tuner settles on each model's own chunk
        for m in models.values(): fn(m)
        times = {k: [] for k in models}
        for _ in range(repeats):
            outs = {}
            for k, m in models.items(): dt, outs[k] = timed(lambda: fn(m)); times[k].append(dt)
        a, b = outs["contiguous"], outs["channels-last"]
        diff = float((a - b).abs().max() / a.abs().max())
        ratios = [c / l for c, l in zip(times["contiguous"], times["channels-last"])]
        res[kind] = ({k: statistics.median(v) for k, v in times.items()}, statistics.median(ratios), min(ratios), max(ratios), diff)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5); ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"{a.images} images x 21 rows of 1x32x32, {a.threads} thread(s), {a.repeats} interleaved repeats, cpu, torch {torch.__version__}")
    print("| stand-in | pass | contiguous s | channels-last s | contiguous / channels-last (min–max) | max rel. diff |")
    print("|---|---|---|---|---|---|")
    for name in ZOO_NAMES.values():
        for kind, (med, r, lo, hi, diff) in bench(name, a.repeats, a.images).items():
            print(f"| {name} | {kind} | {med['contiguous']:.3f} | {med['channels-last']:.3f} | {r:.2f} ({lo:.2f}–{hi:.2f}) | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
