"""Pixel-flipping speed: attribkit.metrics.pixel_flipping against its lower bound (and Quantus, when available).

Workloads (`--workload`): `cnn` — 64 images 3×32×32, a small CNN, 20 steps (21 rows per image); `resnet18` —
torchvision resnet18 with random weights, 32 images 3×224×224, 48 steps (a GPU user's workload; hours on a CPU).
Zero fill, softmax probability. Lower bound: the same perturbed rows, built before the clock starts, pushed through the
model with `batched_forward` at the fastest chunk size of a sweep. Ratios are medians of >= 5 timed runs in this process.

First it prints pixel flipping's operator count (aten operators one call runs, from the profiler, with one chunk):
ranking, building the rows and scoring are a fixed set of batched operators, so the count must not grow with the
number of images or steps (on a GPU each operator is a kernel launch).

Quantus is not a dependency. Set ATTRIBKIT_QUANTUS_PATH to a folder holding an installed quantus
(e.g. made with `pip install --target DIR quantus`) to also time quantus.PixelFlipping at equal settings;
its step size must divide C·H·W, so that comparison uses 12 steps of 256 elements (`cnn`) or 48 of 3,136 (`resnet18`),
black = 0 baseline, for both.
Usage: python benchmarks/bench_metrics.py [--device cpu|cuda] [--workload cnn|resnet18] [--repeats 7]
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


def operator_counts(model, dev, shape, images=(8, 64), steps=(5, 20, 50)) -> dict:
    "{(images, steps): the aten operators one pixel_flipping call runs (one chunk)}, from the profiler."
    from torch.profiler import profile, ProfilerActivity
    out = {}
    for n in images:
        for s in steps:
            x = torch.randn(n, *shape, device=dev); a = torch.randn_like(x)
            call = lambda: pixel_flipping(model, x, a, 0, steps=s, internal_batch_size=n * (s + 1))
            call()
            with profile(activities=[ProfilerActivity.CPU]) as p: call()
            out[n, s] = sum(1 for e in p.events() if e.name.startswith("aten::")
                            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))
    return out


WORKLOADS = {"cnn": (small_cnn, (64, 3, 32, 32), 20, 12), "resnet18": (None, (32, 3, 224, 224), 48, 48)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--workload", choices=list(WORKLOADS), default="cnn")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=None, help="default: 20 (cnn), 48 (resnet18)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)                                   # a benchmark script: seeding the global RNG is fine here
    make, shape, S, QS = WORKLOADS[args.workload]
    if make is None:
        import torchvision
        make = lambda: torchvision.models.resnet18(weights=None)
    S = args.steps or S
    model = make().to(dev).eval()
    ops = operator_counts(small_cnn().to(dev).eval(), dev, (3, 32, 32))
    print("pixel_flipping's aten operators per call (small CNN, one chunk): " +
          ", ".join(f"{n} images x {s} steps: {c}" for (n, s), c in ops.items()) +
          (" -> flat in images and steps" if len(set(ops.values())) == 1 else " -> NOT flat"))
    x = torch.randn(*shape, generator=g).to(dev)
    a = torch.randn(x.shape, generator=g).to(dev)
    t = predict_target(model, x)
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
          f"torch {torch.__version__}, {args.workload}: {len(x)} images {'x'.join(map(str, x.shape[1:]))}, {S} steps "
          f"({len(rows)} rows), median of {args.repeats}")
    print("| chunk rows | lower bound (ms) | pixel_flipping (ms) |")
    print("|---|---|---|")
    for s in sizes: print(f"| {s} | {lb[s] * 1e3:.1f} | {ours[s] * 1e3:.1f} |")
    print(f"\nlower bound (fastest chunk {best}): {lb[best] * 1e3:.1f} ms")
    print(f"pixel_flipping, auto internal_batch_size ({auto_batch_size(model, x)}): {ours_auto * 1e3:.1f} ms "
          f"-> ratio {ours_auto / lb[best]:.2f}x")
    print(f"pixel_flipping, fastest chunk ({ob}): {ours[ob] * 1e3:.1f} ms -> ratio {ours[ob] / lb[best]:.2f}x")
    classes = model(x[:1]).shape[1]
    class NoOp(nn.Module):
        def __init__(self): super().__init__(); self.w = nn.Parameter(torch.zeros(1, device=dev))
        def forward(self, z): return self.w.expand(len(z), classes)
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
    metric = quantus.PixelFlipping(features_in_step=x[0].numel() // QS, perturb_baseline="black", normalise=False, abs=False,
                                   disable_warnings=True, display_progressbar=False)
    def q(bs=len(x)):
        return metric(model=model, x_batch=xn, y_batch=yn, a_batch=an, device=str(dev), batch_size=bs, softmax=True)
    tq = timeit(q, args.repeats, sync)
    tq1 = timeit(lambda: q(1), max(5, args.repeats // 2), sync)
    to = timeit(lambda: pixel_flipping(model, x, a, t, steps=QS, unit="pixel", internal_batch_size=ob), args.repeats, sync)
    rowsq = perturbation_rows(x, a, steps=QS, fill="zero").flatten(0, 1)
    def lowerq():
        with model_scope(model): batched_forward(model, rowsq, best).softmax(1)
    tlq = timeit(lowerq, args.repeats, sync)             # the QS + 1 rows per image attribkit evaluates (quantus: QS)
    qc = np.array(q())                                    # (N, QS) curves without the unperturbed point
    oc = pixel_flipping(model, x, a, t, steps=QS, unit="pixel").curves[:, 1:].cpu().numpy()
    print(f"\nquantus {quantus.__version__} PixelFlipping, {QS} steps x {x[0].numel() // QS} elements, batch {len(x)}: {tq * 1e3:.1f} ms; "
          f"attribkit {QS} steps: {to * 1e3:.1f} ms -> attribkit is {tq / to:.1f}x faster")
    print(f"quantus with batch_size=1 (one forward per image and step): {tq1 * 1e3:.1f} ms -> {tq1 / to:.1f}x")
    print(f"lower bound of these {QS} steps ({len(x)}x{QS + 1} pre-built rows, chunk {best}): {tlq * 1e3:.1f} ms -> quantus / lower bound "
          f"{tq / tlq:.1f}x: the most any implementation running the same forward passes can gain over quantus here; "
          f"attribkit / lower bound {to / tlq:.2f}x")
    print(f"curve agreement (quantus removes elements, attribkit whole pixels): max |diff| of mean curves "
          f"{np.abs(qc.mean(0) - oc.mean(0)).max():.3f}")


if __name__ == "__main__":
    main()
