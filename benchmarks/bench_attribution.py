"""Speed of attribkit's multi-step attributions against their lower bound and Captum.

For each workload (a CIFAR-size CNN at 16×3×32×32, torchvision resnet18 with random weights at 4×3×224×224, and
torchvision resnet50 at 16×3×224×224 for IG alone) and each method (IG with 50 steps, SmoothGrad with 50 samples, RISE
with 4000 masks; on a CPU RISE on resnet18 at 224² — 16,000 forward rows per call — and resnet50 at 224² — 800
forward+backward rows of a ResNet-50 per call — are skipped, `--quick` runs them at 64×64) it prints the time of attribkit's *default* call and its ratio to

  (a) the lower bound: the same forward+backward rows (forward only for RISE), pre-built, run at the fastest chunk size;
  (b) Captum's default call (one batch of all rows);
  (c) Captum with its best chunk size (`internal_batch_size` for IG, `nt_samples_batch_size` for NoiseTunnel).

All variants of one method are timed round-robin (so a load change hits all of them alike); each time is the
median of `--repeats` (≥ 5) runs after one warm-up. Chunk sizes for (a) and (c) are chosen by a pilot sweep.
Ratios > 1 in column "ours/LB" mean slower than the bound; ratios > 1 in "capt/ours" mean faster than Captum.

    python benchmarks/bench_attribution.py            # the issue's workloads
    python benchmarks/bench_attribution.py --quick    # smaller: batch 4, resnet18 at 64×64 (a few minutes on 1 CPU core)
    python benchmarks/bench_attribution.py --only cnn --methods smoothgrad   # one workload, one method
"""
from __future__ import annotations
import argparse, math, statistics, time
import torch
from torch import nn
import attribkit
from attribkit.core import auto_batch_size, chunks, predict_target
from attribkit.attr.gradient import IntegratedGradients, SmoothGrad

from attribkit.attr.perturbation import RISE
try:
    import captum.attr as captum_attr
except ImportError:
    captum_attr = None


def cifar_cnn() -> nn.Module:
    "A small CIFAR-size CNN (3 conv blocks + 2 linear layers)."
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10))


def resnet18() -> nn.Module:
    import torchvision
    return torchvision.models.resnet18(weights=None)


def resnet50() -> nn.Module:
    import torchvision
    return torchvision.models.resnet50(weights=None)


def sync(device):
    if device.type == "cuda": torch.cuda.synchronize()


def timed(fn, device) -> float:
    sync(device); t = time.perf_counter(); fn(); sync(device)
    return time.perf_counter() - t


def lower_bound_fn(model, rows, target, size, backward=True):
    "Forward(+backward) of pre-built rows in chunks of `size` — nothing else."
    def run():
        for s in chunks(len(rows), size):
            if backward:
                r = rows[s].detach().requires_grad_(True)
                torch.autograd.grad(model(r).gather(1, target[s, None]).sum(), r)
            else:
                with torch.no_grad(): model(rows[s])
    return run


def sweep(make, candidates, device, pilot):
    "Time each candidate chunk size `pilot` times; return the fastest size."
    best, best_t = None, math.inf
    for c in candidates:
        fn = make(c); fn()  # warm-up
        t = min(timed(fn, device) for _ in range(pilot))
        if t < best_t: best, best_t = c, t
    return best


def sizes(n_rows, unit=1, smallest=4, largest=8192):
    "Candidate chunk sizes: multiples of `unit` by powers of two from `smallest` rows, and all rows up to `largest`."
    c = {unit * 2**k for k in range(0, 14) if smallest <= unit * 2**k < min(n_rows, largest + 1)}
    return sorted(c | ({n_rows} if n_rows <= largest else set()))


def bench(name, model, x, device, repeats, pilot, methods):
    model = model.to(device).eval()
    for p in model.parameters(): p.requires_grad_(False)
    x = x.to(device); n = len(x)
    t = predict_target(model, x)
    auto = auto_batch_size(model, x)
    results = []
    for meth in methods:
        variants = {}
        if meth == "IG(50)":
            steps = 50
            rows = (torch.linspace(0, 1, steps, device=device).view(-1, 1, 1, 1, 1) * x).reshape(steps * n, *x.shape[1:])
            trows = t.repeat(steps)
            ours = lambda ibs=None: (lambda: IntegratedGradients(model, n_steps=steps, internal_batch_size=ibs).attribute(x, target=t))
            if captum_attr is not None:
                cig = captum_attr.IntegratedGradients(model)
                capt = lambda ibs=None: (lambda: cig.attribute(x, target=t, n_steps=steps, internal_batch_size=ibs))
                # captum splits by whole steps: chunk = ibs // n steps of n rows
                c_best = sweep(lambda c: capt(c), sizes(steps * n, n, smallest=1), device, pilot)
                variants["capt_default"], variants["capt_best"] = capt(None), capt(c_best)
            backward = True
        elif meth == "SmoothGrad(50)":
            ns = 50
            rows = (x.unsqueeze(0) + 0.15 * torch.randn(ns, *x.shape, device=device)).reshape(ns * n, *x.shape[1:])
            trows = t.repeat(ns)
            ours = lambda ibs=None: (lambda: SmoothGrad(model, n_samples=ns, noise_level=0.15,
                                                        internal_batch_size=ibs).attribute(x, target=t, seed=0))
            if captum_attr is not None:
                nt = captum_attr.NoiseTunnel(captum_attr.Saliency(model))
                sd = float(0.15 * (x.max() - x.min()))
                capt = lambda bs=None: (lambda: nt.attribute(x, nt_type="smoothgrad", nt_samples=ns, stdevs=sd,
                                                             target=t, abs=False, nt_samples_batch_size=bs))
                c_best = sweep(lambda c: capt(c), sizes(ns, smallest=1), device, pilot)  # in samples (× n rows)
                variants["capt_default"], variants["capt_best"] = capt(None), capt(c_best)
            backward = True
        elif meth == "RISE(4000)":
            nm = 4000
            rows = (x.unsqueeze(0) * torch.rand(nm, 1, 1, *x.shape[2:], device=device)).reshape(nm * n, *x.shape[1:])
            trows = t.repeat(nm)
            ours = lambda ibs=None: (lambda: RISE(model).attribute(x, target=t, n_masks=nm, internal_batch_size=ibs, seed=0))
            backward = False
        lb_size = sweep(lambda c: lower_bound_fn(model, rows, trows, c, backward), sizes(len(rows)), device, pilot)
        variants = {"ours": ours(), "ours_lbchunk": ours(lb_size), "lb": lower_bound_fn(model, rows, trows, lb_size, backward),
                    **variants}
        times = {k: [] for k in variants}
        for fn in variants.values(): fn()  # warm-up
        for _ in range(repeats):
            for k, fn in variants.items(): times[k].append(timed(fn, device))
        med = {k: statistics.median(v) for k, v in times.items()}
        results.append((name, meth, len(rows), auto, lb_size, med,
                        c_best if "capt_best" in variants else None))
        del rows
        print_row(results[-1], flush=True)
    return results


HEADER = (f"{'workload':<22}{'method':<16}{'rows':>7}{'auto':>6}{'LBchunk':>8}{'ours s':>9}{'LB s':>8}"
          f"{'ours/LB':>9}{'@LBchunk':>9}{'capt s':>9}{'capt/ours':>10}{'bestchunk':>10}{'best s':>8}{'best/ours':>10}{'capt gain':>10}")


def print_row(r, flush=False):
    name, meth, nrows, auto, lb_size, med, cb = r
    s = f"{name:<22}{meth:<16}{nrows:>7}{auto:>6}{lb_size:>8}{med['ours']:>9.3f}{med['lb']:>8.3f}{med['ours'] / med['lb']:>9.2f}{med['ours_lbchunk'] / med['lb']:>9.2f}"
    if "capt_default" in med:
        s += (f"{med['capt_default']:>9.3f}{med['capt_default'] / med['ours']:>10.2f}{cb:>10}{med['capt_best']:>8.3f}"
              f"{med['capt_best'] / med['ours']:>10.2f}{med['capt_default'] / med['capt_best']:>10.2f}")
    else:
        s += f"{'—':>9}{'—':>10}{'—':>10}{'—':>8}{'—':>10}{'—':>10}"
    print(s, flush=flush)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller batches / images (see module docstring)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per variant (median; >= 5)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--only", nargs="*", default=None, help="workloads to run: cnn resnet18 resnet50")
    ap.add_argument("--methods", nargs="*", default=None, help="methods to run: ig smoothgrad rise")
    args = ap.parse_args(argv)
    if args.repeats < 5: ap.error("--repeats must be >= 5 (the median of at least five runs)")
    if args.threads: torch.set_num_threads(args.threads)
    device = attribkit.core.resolve_device(args.device)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if args.quick:
        work = {"cnn": ("cifar_cnn 4x3x32x32", cifar_cnn, (4, 3, 32, 32)),
                "resnet18": ("resnet18 2x3x64x64", resnet18, (2, 3, 64, 64)),
                "resnet50": ("resnet50 2x3x64x64", resnet50, (2, 3, 64, 64))}
    else:
        work = {"cnn": ("cifar_cnn 16x3x32x32", cifar_cnn, (16, 3, 32, 32)),
                "resnet18": ("resnet18 4x3x224x224", resnet18, (4, 3, 224, 224)),
                "resnet50": ("resnet50 16x3x224x224", resnet50, (16, 3, 224, 224))}
    methods = ["IG(50)", "SmoothGrad(50)", "RISE(4000)"]
    if args.methods: methods = [m for m in methods if m.split("(")[0].lower() in args.methods]
    print(f"device={device} threads={torch.get_num_threads()} torch={torch.__version__} repeats={args.repeats} "
          f"captum={'yes' if captum_attr else 'no'}")
    print(HEADER)
    t0 = time.perf_counter()
    for key, (name, make, shape) in work.items():
        if args.only and key not in args.only: continue
        big_cpu = device.type == "cpu" and not args.quick      # hours on a CPU: RISE on resnet18 and resnet50 at 224²
        ms = [m for m in methods if not (m.startswith("RISE") and key == "resnet18" and big_cpu)]
        if key == "resnet50": ms = [] if big_cpu else [m for m in ms if m.startswith("IG")]   # the IG workload of a GPU user
        if not ms: continue
        x = torch.randn(*shape, generator=g)
        bench(name, make(), x, device, args.repeats, pilot=1 if args.quick else 2, methods=ms)
    print(f"total {time.perf_counter() - t0:.0f} s. ours = attribkit default call; @LBchunk = ours at the LB chunk size / LB; LB = lower bound (a); capt = Captum "
          f"default (b); best = Captum at its best chunk (c); capt gain = capt/best (what Captum gains by chunking).")


if __name__ == "__main__":
    main()
