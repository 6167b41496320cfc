"""Pixel-flipping speed: attribkit.metrics.pixel_flipping against its lower bound (and Quantus, when available).

Setting: 64 images 3×32×32, a small CNN, 20 steps (21 rows per image), zero fill, softmax probability.
Lower bound: the same 64×21 perturbed rows, built before the clock starts, pushed through the model with
`batched_forward` at the fastest chunk size of a sweep. Ratios are medians of >= 5 timed runs in this process.

Quantus is not a dependency. Set ATTRIBKIT_QUANTUS_PATH to a folder holding an installed quantus
(e.g. made with `pip install --target DIR quantus`) to also time quantus.PixelFlipping at equal settings;
its step size must divide H·W, so that comparison uses 12 steps of 256 elements (black = 0 baseline) for both.
Usage: python benchmarks/bench_metrics.py [--device cpu|cuda] [--repeats 7]
"""
import argparse, os, statistics, sys, time
import torch
from torch import nn
from attribkit.core import batched_forward, auto_batch_size, model_scope, predict_target
from attribkit.metrics import pixel_flipping, perturbation_rows


def small_cnn(classes=10):
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 8 * 8, classes))


def timeit(fn, repeats, sync):
    fn(); sync()                                           # warm-up
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)                                   # a benchmark script: seeding the global RNG is fine here
    model = small_cnn().to(dev).eval()
    x = torch.randn(64, 3, 32, 32, generator=g).to(dev)
    a = torch.randn(x.shape, generator=g).to(dev)
    t = predict_target(model, x)
    S = args.steps
    rows = perturbation_rows(x, a, steps=S, fill="zero").flatten(0, 1)
    sizes = sorted({64, 128, 256, 512, 1024, len(rows)} | {auto_batch_size(model, x)})
    sizes = [s for s in sizes if s <= len(rows)]

    def lower(ibs):
        with model_scope(model): batched_forward(model, rows, ibs).softmax(1)
    lb = {s: timeit(lambda: lower(s), args.repeats, sync) for s in sizes}
    best = min(lb, key=lb.get)
    ours_auto = timeit(lambda: pixel_flipping(model, x, a, t, steps=S), args.repeats, sync)
    # headline: interleaved pairs (lower bound at its best chunk, then pixel_flipping) cancel load drift on a shared box
    pairs = {"auto": [], "same": []}
    for _ in range(args.repeats):
        tl = timeit(lambda: lower(best), 1, sync)
        pairs["auto"].append(timeit(lambda: pixel_flipping(model, x, a, t, steps=S), 1, sync) / tl)
        pairs["same"].append(timeit(lambda: pixel_flipping(model, x, a, t, steps=S, internal_batch_size=best), 1, sync) / tl)
    ours = {s: timeit(lambda: pixel_flipping(model, x, a, t, steps=S, internal_batch_size=s), args.repeats, sync)
            for s in sizes}
    ob = min(ours, key=ours.get)
    print(f"device={dev} ({torch.cuda.get_device_name() if dev.type == 'cuda' else f'{torch.get_num_threads()} threads'}), "
          f"torch {torch.__version__}, 64 images 3x32x32, {S} steps ({len(rows)} rows), median of {args.repeats}")
    print("| chunk rows | lower bound (ms) | pixel_flipping (ms) |")
    print("|---|---|---|")
    for s in sizes: print(f"| {s} | {lb[s] * 1e3:.1f} | {ours[s] * 1e3:.1f} |")
    print(f"\nlower bound (fastest chunk {best}): {lb[best] * 1e3:.1f} ms")
    print(f"pixel_flipping, auto internal_batch_size ({auto_batch_size(model, x)}): {ours_auto * 1e3:.1f} ms "
          f"-> ratio {ours_auto / lb[best]:.2f}x")
    print(f"pixel_flipping, fastest chunk ({ob}): {ours[ob] * 1e3:.1f} ms -> ratio {ours[ob] / lb[best]:.2f}x")
    class NoOp(nn.Module):
        def __init__(self): super().__init__(); self.w = nn.Parameter(torch.zeros(1, device=dev))
        def forward(self, z): return self.w.expand(len(z), 10)
    over = timeit(lambda: pixel_flipping(NoOp(), x, a, t, steps=S, internal_batch_size=best), args.repeats, sync)
    print(f"pixel_flipping's own work (ranking, building rows, scoring; a no-op model): {over * 1e3:.1f} ms "
          f"= {over / lb[best]:.2f} of the lower bound")
    print(f"interleaved pairs, median ratio to the lower bound at chunk {best}: auto internal_batch_size "
          f"{statistics.median(pairs['auto']):.2f}x, internal_batch_size={best} {statistics.median(pairs['same']):.2f}x")

    qpath = os.environ.get("ATTRIBKIT_QUANTUS_PATH")
    if not qpath:
        print("\nquantus: skipped (set ATTRIBKIT_QUANTUS_PATH to compare)"); return
    sys.path.append(qpath)                                 # appended: the project's own numpy/torch stay first
    try:
        import warnings; warnings.filterwarnings("ignore")
        import quantus
    except Exception as e:                                 # pragma: no cover - optional comparison
        print(f"\nquantus: skipped ({type(e).__name__}: {e})"); return
    import numpy as np
    xn, yn = x.cpu().numpy(), t.cpu().numpy()
    an = a.sum(1, keepdim=True).cpu().numpy()
    metric = quantus.PixelFlipping(features_in_step=256, perturb_baseline="black", normalise=False, abs=False,
                                   disable_warnings=True, display_progressbar=False)
    def q(bs=64):
        return metric(model=model, x_batch=xn, y_batch=yn, a_batch=an, device=str(dev), batch_size=bs, softmax=True)
    tq = timeit(q, args.repeats, sync)
    tq1 = timeit(lambda: q(1), max(5, args.repeats // 2), sync)
    to = timeit(lambda: pixel_flipping(model, x, a, t, steps=12, unit="pixel", internal_batch_size=ob), args.repeats, sync)
    rows12 = perturbation_rows(x, a, steps=12, fill="zero").flatten(0, 1)
    def lower12():
        with model_scope(model): batched_forward(model, rows12, best).softmax(1)
    tl12 = timeit(lower12, args.repeats, sync)             # the 13 rows per image attribkit evaluates (quantus: 12)
    qc = np.array(q())                                    # (64, 12) curves without the unperturbed point
    oc = pixel_flipping(model, x, a, t, steps=12, unit="pixel").curves[:, 1:].cpu().numpy()
    print(f"\nquantus {quantus.__version__} PixelFlipping, 12 steps x 256 elements, batch 64: {tq * 1e3:.1f} ms; "
          f"attribkit 12 steps: {to * 1e3:.1f} ms -> attribkit is {tq / to:.1f}x faster")
    print(f"quantus with batch_size=1 (one forward per image and step): {tq1 * 1e3:.1f} ms -> {tq1 / to:.1f}x")
    print(f"lower bound of these 12 steps (64x13 pre-built rows, chunk {best}): {tl12 * 1e3:.1f} ms -> quantus / lower bound "
          f"{tq / tl12:.1f}x: the most any implementation running the same forward passes can gain over quantus here; "
          f"attribkit / lower bound {to / tl12:.2f}x")
    print(f"curve agreement (quantus removes 256 elements = 85.3 pixels per step): max |diff| of mean curves "
          f"{np.abs(qc.mean(0) - oc.mean(0)).max():.3f}")


if __name__ == "__main__":
    main()
