"""DGA speed: 30-step DGA vs 30 forward+backward passes of the same local attribution on the same batch, and vs the
paper's appendix listing run per sample (`appendix_dga`).

Run: python benchmarks/bench_dga.py [--repeats 5] [--local gxi ufg]. Each repeat times the passes, DGA and the listing
back to back (interleaved, so load drift on a shared machine hits all three alike); the table gives the medians and the
median of the per-repeat ratios, all measured in this run."""
import argparse, statistics, time
import torch
from torch import nn
from attribkit.core import target_grad, model_scope, as_local
from attribkit.dga import DGA, appendix_dga


def gxi(model, x, t):
    return x * target_grad(model, x, t)


def small_cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10)).eval()


def timed(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0


def bench(local_name, repeats, steps, batch):
    model, x = small_cnn(), torch.randn(batch, 3, 32, 32)
    t = torch.arange(batch) % 10
    local = gxi if local_name == "gxi" else as_local(local_name)
    dga = DGA(model, local=local, n_steps=steps)
    def passes():
        with model_scope(model):
            for _ in range(steps): local(model, x, t)
    passes(); dga.attribute(x[:2], target=t[:2])  # warm-up
    rows = {"passes": [], "dga": [], "ref": []}
    for _ in range(repeats):
        rows["passes"].append(timed(passes))
        rows["dga"].append(timed(lambda: dga.attribute(x, target=t)))
        rows["ref"].append(timed(lambda: appendix_dga(x, model, t, local, 0.9, steps)))
    med = {k: statistics.median(v) for k, v in rows.items()}
    r_pass = statistics.median(d / p for d, p in zip(rows["dga"], rows["passes"]))
    r_ref = statistics.median(r / d for d, r in zip(rows["dga"], rows["ref"]))
    return med, r_pass, r_ref, (min(d / p for d, p in zip(rows["dga"], rows["passes"])),
                                max(d / p for d, p in zip(rows["dga"], rows["passes"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5); ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16); ap.add_argument("--local", nargs="+", default=["gxi", "ufg"])
    a = ap.parse_args()
    print(f"batch {a.batch}x3x32x32, small CNN (3 conv + BN + 2 FC), {a.steps} steps, {torch.get_num_threads()} threads, "
          f"{a.repeats} interleaved repeats, device cpu")
    print("| local | 30 x (F+B) s | DGA s | listing s | DGA / passes (min–max) | goal | listing / DGA | goal |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.local:
        med, r_pass, r_ref, (lo, hi) = bench(name, a.repeats, a.steps, a.batch)
        print(f"| {name} | {med['passes']:.3f} | {med['dga']:.3f} | {med['ref']:.3f} | {r_pass:.2f} ({lo:.2f}–{hi:.2f}) | "
              f"{'ok' if r_pass <= 1.15 else 'MISSED'} <= 1.15 | {r_ref:.2f} | {'ok' if r_ref >= 1.5 else 'MISSED'} >= 1.5 |")


if __name__ == "__main__":
    main()
