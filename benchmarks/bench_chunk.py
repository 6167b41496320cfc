"""Is the automatic chunk size (`core.tuned_chunks`) fast on any model? IG(50) on CPU against the chunked lower bound.

For each model shape below it starts `--repeats` (≥ 5) fresh Python processes. Each process

  1. builds the model and a seeded batch, and the IG rows (`n_steps × batch`) once;
  2. sweeps the lower bound — forward+backward of those pre-built rows and nothing else
     (`bench_attribution.lower_bound_fn`) — over chunk sizes, keeping the fastest ("LB chunk");
  3. makes the first automatic IG call (the cache rule's guess while `tuned_chunks` times the chunks: "first call"),
     calls again until the tuner has settled (it explores with the calls' own rows, ×2/÷2 from the rule's guess,
     keeping the fastest per-row size; "calls" reports how many calls that took); times the bound also at the rule's
     and the tuner's sizes, so its best chunk is the best of all sizes either side tried; then times the automatic call, the
     same call at the old fixed rule (128 rows on CPU) and the lower bound at its best chunk, `--rounds` times each
     (more for short calls: at least `--min-time` seconds per variant), round-robin, and reports ratios of medians. Odd processes time the variants in the reverse order.

The table gives, per shape, the median and min–max over processes of auto/LB, first call/LB and old/LB.

The five shapes were fixed before the cache rule was chosen (on `cifar_cnn` and `issue_cnn` only); the tuner has no
per-shape constants (×2 steps, a 5 % margin). `--curve` prints the lower bound's time per chunk size.

    python benchmarks/bench_chunk.py                 # 5 shapes × 5 processes, 16 images, 2 threads
    python benchmarks/bench_chunk.py --quick         # 4 images, one timed sweep run per candidate, no old(128) column
    python benchmarks/bench_chunk.py --curve         # LB time per chunk size (one process per shape)
    python benchmarks/bench_chunk.py --large         # a user's large model: resnet18 and resnet50 at 224², 2 images

`--large` times, in `--repeats` fresh processes per model (torchvision resnet18 and resnet50, random weights, 2 images
3×224×224, IG with `--steps` steps): attribkit's first automatic call (the rule's first guess, tuner exploring), its
settled call, Captum's default call (all rows in one batch) and Captum at its best chunk (a sweep); the goal is a first
call no slower than Captum's default and a settled call no slower than Captum's best.
"""
from __future__ import annotations
import argparse, json, math, os, statistics, subprocess, sys, time
from pathlib import Path
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
from bench_attribution import cifar_cnn, lower_bound_fn, resnet18, resnet50, timed  # noqa: E402
from bench_dga import small_cnn  # noqa: E402


def mlp() -> nn.Module:
    "A 3-layer MLP on flattened 3×32×32 images (matmul-bound, tiny activations)."
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def wide_cnn() -> nn.Module:
    "A VGG-like CNN with 64/128/256 channels (large activations per row)."
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))


# name: (constructor, one image's shape, tuned on it?) — fixed before tuning
SHAPES = {
    "cifar_cnn": (cifar_cnn, (3, 32, 32), True),     # bench_attribution's CNN, 16/32/64 channels with pooling
    "issue_cnn": (small_cnn, (3, 32, 32), True),     # the CNN: 32/32/64 channels (bench_dga.small_cnn)
    "mlp": (mlp, (3, 32, 32), False),
    "wide_cnn": (wide_cnn, (3, 32, 32), False),
    "resnet18": (resnet18, (3, 32, 32), False),      # torchvision, random weights
}
CHUNKS = (8, 16, 32, 64, 128, 256, 512)


def setup(name, batch, steps):
    from attribkit.core import predict_target
    make, shape, _ = SHAPES[name]
    torch.manual_seed(0)
    model = make().eval()
    for p in model.parameters(): p.requires_grad_(False)
    x = torch.randn(batch, *shape, generator=torch.Generator().manual_seed(0))
    t = predict_target(model, x)
    rows = (torch.linspace(0, 1, steps).view(-1, *[1] * x.ndim) * x).reshape(steps * batch, *shape)
    return model, x, t, rows, t.repeat(steps)


def child(args):
    "One fresh process: sweep the lower bound, then time auto / old / LB round-robin; print one JSON line."
    from attribkit.core import auto_batch_size, activation_bytes, tuned_batch_size
    from attribkit.attr.gradient import IntegratedGradients
    torch.set_num_threads(args.threads)
    cpu = torch.device("cpu")
    model, x, t, rows, trows = setup(args.child, args.batch, args.steps)
    cands = [c for c in CHUNKS if c < len(rows)] + [len(rows)]
    lb_t = {}
    for c in cands:
        fn = lower_bound_fn(model, rows, trows, c); fn()
        lb_t[c] = min(timed(fn, cpu) for _ in range(1 if args.quick else 2))
    if args.curve:
        print(json.dumps({"name": args.child, "act_kib": activation_bytes(model, x) / 1024, "curve": lb_t})); return
    ig = lambda ibs=None: (lambda: IntegratedGradients(model, n_steps=args.steps, internal_batch_size=ibs).attribute(x, target=t))
    auto = ig()
    first = timed(auto, cpu)                         # the first automatic call: the cache rule's guess, tuning under way
    calls = 1
    while tuned_batch_size(model, x) is None and calls < 8:   # the tuner settles within a few calls (one-time, per model)
        auto(); calls += 1
    for c in {auto_batch_size(model, x), tuned_batch_size(model, x)} - set(lb_t) - {None}:
        if c < len(rows):                            # the bound also at the rule's and the tuner's sizes: the powers of two may miss its best chunk
            fn = lower_bound_fn(model, rows, trows, c); fn()
            lb_t[c] = min(timed(fn, cpu) for _ in range(1 if args.quick else 2))
    best = min(lb_t, key=lb_t.get)
    variants = {"auto": auto, "lb": lower_bound_fn(model, rows, trows, best)}
    if not args.quick: variants["old"] = ig(128)
    order = list(variants) if args.order == 0 else list(reversed(variants))
    times = {k: [] for k in variants}
    for k in order: variants[k]()  # warm-up
    rounds = max(args.rounds, math.ceil(args.min_time / lb_t[best]))   # short calls get more rounds: their medians are noisier
    for _ in range(rounds):
        for k in order: times[k].append(timed(variants[k], cpu))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"name": args.child, "order": order, "rule_rows": auto_batch_size(model, x), "lb_rows": best,
                      "auto_rows": tuned_batch_size(model, x), "settle_calls": calls, "rounds": rounds, "first_s": first,
                      "act_kib": activation_bytes(model, x) / 1024, **{f"{k}_s": v for k, v in med.items()}}))


LARGE = {"resnet18": resnet18, "resnet50": resnet50}


def large_child(args):
    "One fresh process, a large model at 224²: attribkit's first and settled calls, Captum's default and best; one JSON line."
    import captum.attr as ca
    from attribkit.core import auto_batch_size, tuned_batch_size
    from attribkit.attr.gradient import IntegratedGradients
    torch.set_num_threads(args.threads)
    cpu, n = torch.device("cpu"), 2
    torch.manual_seed(0)
    model = LARGE[args.child]().eval()
    for p in model.parameters(): p.requires_grad_(False)
    x = torch.randn(n, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    t = model(x).argmax(1)
    ours = lambda: IntegratedGradients(model, n_steps=args.steps).attribute(x, target=t)
    capt = lambda ibs=None: (lambda: ca.IntegratedGradients(model).attribute(x, target=t, n_steps=args.steps, internal_batch_size=ibs))
    first = timed(ours, cpu)
    calls = 1
    while tuned_batch_size(model, x) is None and calls < 6: ours(); calls += 1
    sweep = {c: timed(capt(c), cpu) for c in (8, 16, 32, 64) if c < n * args.steps}
    default = timed(capt(None), cpu)
    best = min(sweep, key=sweep.get)
    settled = min(timed(ours, cpu) for _ in range(2))
    print(json.dumps({"name": args.child, "rows": n * args.steps, "rule_rows": auto_batch_size(model, x),
                      "tuned_rows": tuned_batch_size(model, x), "calls": calls, "first_s": first, "settled_s": settled,
                      "captum_default_s": default, "captum_best_rows": best, "captum_best_s": min(sweep[best], timed(capt(best), cpu))}))


def large(args):
    "The `--large` table: per model, medians over fresh processes."
    print(f"IG({args.steps}) on 2 images 3x224x224, CPU, threads={args.threads}, torch={torch.__version__}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    print(f"{'model':<10}{'rows':>6}{'rule':>6}{'tuned':>7}{'first s':>9}{'settled s':>11}{'Captum default s':>18}"
          f"{'Captum best s (rows)':>22}{'first / default':>17}{'settled / best':>16}")
    for name in [m for m in LARGE if not args.only or m in args.only]:
        rs = []
        for _ in range(args.repeats):
            cmd = [sys.executable, __file__, "--child", name, "--large", "--threads", str(args.threads), "--steps", str(args.steps)]
            rs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]))
            print(f"  process: {json.dumps(rs[-1])}", file=sys.stderr, flush=True)
        med = lambda k: statistics.median(r[k] for r in rs)
        print(f"{name:<10}{rs[0]['rows']:>6}{rs[0]['rule_rows']:>6}{str(rs[0]['tuned_rows']):>7}{med('first_s'):>9.2f}"
              f"{med('settled_s'):>11.2f}{med('captum_default_s'):>18.2f}{med('captum_best_s'):>15.2f} ({rs[0]['captum_best_rows']})"
              f"{statistics.median(r['first_s'] / r['captum_default_s'] for r in rs):>16.2f}"
              f"{statistics.median(r['settled_s'] / r['captum_best_s'] for r in rs):>16.2f}", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}; {args.repeats} fresh processes per model; ratios < 1: attribkit faster.")


def spawn(name, order, args, curve=False):
    cmd = [sys.executable, __file__, "--child", name, "--order", str(order), "--threads", str(args.threads),
           "--batch", str(args.batch), "--steps", str(args.steps), "--rounds", str(args.rounds),
           "--min-time", str(args.min_time)]
    if args.quick: cmd.append("--quick")
    if curve: cmd.append("--curve")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    print(f"  process: {json.dumps(r)}", file=sys.stderr, flush=True)  # each fresh process's numbers as they come
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per shape (>= 5)")
    ap.add_argument("--rounds", type=int, default=5, help="timed calls per variant inside one process (median)")
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="at least this many seconds of timed calls per variant in each process (more rounds for short calls)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--only", nargs="*", default=None, help=f"shapes: {' '.join(SHAPES)}")
    ap.add_argument("--quick", action="store_true",
                    help="4 images (200 rows), one timed sweep run per chunk candidate, no old-rule column")
    ap.add_argument("--curve", action="store_true", help="print the lower bound's time per chunk size and exit")
    ap.add_argument("--large", action="store_true", help="a user's large model: resnet18 and resnet50 at 224² (see above)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--order", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick: args.batch, args.steps = min(args.batch, 4), min(args.steps, 50)
    if args.child: return large_child(args) if args.large else child(args)
    if args.large: return large(args)
    if args.repeats < 5: ap.error("--repeats must be >= 5 (min–max over at least five fresh processes)")
    names = [n for n in SHAPES if not args.only or n in args.only]
    print(f"IG({args.steps}) on {args.batch} images, CPU, threads={args.threads}, torch={torch.__version__}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    if args.curve:
        for n in names:
            r = spawn(n, 0, args, curve=True)
            print(f"{n:<13} act {r['act_kib']:8.0f} KiB/row  " + "  ".join(f"{c}:{s:.3f}" for c, s in r["curve"].items()), flush=True)
        return
    t0 = time.perf_counter()
    rng = lambda v: f"{statistics.median(v):.2f} [{min(v):.2f}–{max(v):.2f}]"
    print(f"{'shape':<11}{'tuned on':>9}{'KiB/row':>8}{'rule':>6}{'tuned':>13}{'LBbest':>14}{'calls':>6}{'auto s':>8}{'LB s':>7}"
          f"{'auto/LB':>20}{'first call/LB':>20}{'old(128)/LB':>20}")
    for n in names:
        rs = [spawn(n, i % 2, args) for i in range(args.repeats)]
        a, f = [r["auto_s"] / r["lb_s"] for r in rs], [r["first_s"] / r["lb_s"] for r in rs]
        o = [r["old_s"] / r["lb_s"] for r in rs if "old_s" in r] or [float("nan")]
        one = rs[0]["rule_rows"] >= args.batch * args.steps   # every call fits one chunk of the rule's size: nothing to tune
        tuned = "/".join(str(v) if v else ("one" if one else "0") for v in sorted({r["auto_rows"] or 0 for r in rs}))
        print(f"{n:<11}{'yes' if SHAPES[n][2] else 'no':>9}{rs[0]['act_kib']:>8.0f}{rs[0]['rule_rows']:>6}{tuned:>13}"
              f"{'/'.join(map(str, sorted({r['lb_rows'] for r in rs}))):>14}{max(r['settle_calls'] for r in rs):>6}"
              f"{statistics.median(r['auto_s'] for r in rs):>8.3f}{statistics.median(r['lb_s'] for r in rs):>7.3f}"
              f"{rng(a):>20}{rng(f):>20}{rng(o):>20}", flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s, load average at end {os.getloadavg()[0]:.2f}; {args.repeats} fresh processes "
          "per shape, order alternated. rule = the cache rule's first guess; tuned = the size the tuner settled on (0: still exploring; "
          "one: every call fits one chunk of the rule's size, nothing to tune); LBbest = the lower bound's fastest chunk; calls = IG calls until settled (max over processes); "
          "first call = the first automatic call, tuning included.")

if __name__ == "__main__":
    main()
