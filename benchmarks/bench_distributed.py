"""Sharded pixel-flipping evaluation of 512 images: 2 CPU processes (gloo, loopback) vs 1.

Prints the median (of --repeats runs) wall time of `evaluate_pixel_flipping` in one process and per rank on two, the
speed-up, and the communication overhead: the `gather` of the per-batch curves timed on its own after a barrier (pure
communication) and the wait at that barrier (load imbalance between the ranks). Every process uses one thread, so on a
2-core machine the ideal speed-up is 2x. Process start-up (spawn + imports) is reported separately: it is paid once per
`launch`, not per evaluation. Usage: OMP_NUM_THREADS=1 python benchmarks/bench_distributed.py [--n 512] [--repeats 5]
"""
import argparse, os, statistics, time
import torch
from torch import nn
from attribkit import distributed as D
from attribkit.metrics import evaluate_pixel_flipping


def gxi(model, x, t):
    "Gradient x input of the target logit."
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(model(x).gather(1, t[:, None]).sum(), x)
    return g * x


def setup(n: int):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(256, 10)).eval()
    g = torch.Generator().manual_seed(1)
    return model, torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def run(n: int, repeats: int, batch_size: int, t_start: float | None = None) -> dict:
    "Evaluate `repeats` times in this process (one rank of a group, or alone); return timings and the AUCs."
    torch.set_num_threads(1)
    started = time.time() - t_start if t_start is not None else 0.0
    model, x, y = setup(n)
    kw = dict(batch_size=batch_size, steps=20, progress=False, seed=0)
    evaluate_pixel_flipping(model, (x[:batch_size], y[:batch_size]), gxi, **kw)        # warm-up
    walls, waits, comms = [], [], []
    for _ in range(repeats):
        D.barrier(); t0 = time.perf_counter()
        res = evaluate_pixel_flipping(model, (x, y), gxi, **kw)
        walls.append(time.perf_counter() - t0)
        # the same gather sharded_map performs, timed on its own: barrier wait (imbalance), then pure communication
        sh = D.shard(D.num_batches(n, batch_size))
        mine = [res.curves[b * batch_size:(b + 1) * batch_size] for b in sh.indices]
        t0 = time.perf_counter(); D.barrier(); waits.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); D.gather(mine, sh); comms.append(time.perf_counter() - t0)
    return {"wall": statistics.median(walls), "wait": statistics.median(waits), "comm": statistics.median(comms),
            "auc": res.auc, "startup": started, "world": D.world_size()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512); ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32)
    a = ap.parse_args()
    one_a = run(a.n, a.repeats, a.batch_size)
    t0 = time.perf_counter()
    two = D.launch(run, 2, a.n, a.repeats, a.batch_size, time.time(), threads=1)       # spawn, gloo on 127.0.0.1
    launch_s = time.perf_counter() - t0
    one_b = run(a.n, a.repeats, a.batch_size)                                           # baseline again: drift check
    one = min(one_a["wall"], one_b["wall"])
    assert torch.equal(one_a["auc"], two["auc"]), "sharded AUCs differ from one process"
    print(f"pixel flipping (gxi, 21 steps) of {a.n} images 1x28x28, batch {a.batch_size}, median of {a.repeats}, "
          f"1 thread per process, cpu_count={os.cpu_count()}")
    print(f"1 process : {one_a['wall']:.3f} s / {one_b['wall']:.3f} s (before / after)")
    print(f"2 processes: {two['wall']:.3f} s per evaluation (rank 0, gather included)")
    print(f"speed-up   : {one / two['wall']:.2f}x (ideal 2x)")
    print(f"gather (pure communication): {two['comm'] * 1e3:.2f} ms = {100 * two['comm'] / two['wall']:.2f}% of the evaluation; "
          f"barrier wait (imbalance): {two['wait'] * 1e3:.2f} ms")
    print(f"process start-up: {two['startup']:.1f} s to reach the worker; whole launch {launch_s:.1f} s (once per launch)")
    print("sharded AUCs == one-process AUCs: True")
