"""Training-epoch cost of the in-memory Fashion-MNIST data set against pre-built tensors and torchvision's per-item path.

One epoch of LeNet-300-100 on the 60,000 Fashion-MNIST training images (SGD, batch 64, 2 threads), three ways:

  (a) `models.train` on `data.fashion_mnist()` — tensors decoded once, batches gathered by index;
  (b) the lower bound: the same optimiser steps on batches gathered *before* the clock starts (forward, loss, backward,
      step, nothing else);
  (c) the path attribkit used before: torchvision's `FashionMNIST` with `ToTensor`/`Normalize` through a `DataLoader`
      (a PIL image and a transform per item and epoch).

Each measurement runs in a fresh process (data decoding and module imports are outside the clock; the first steps'
warm-up is inside it for all three); the order of the three
alternates from round to round, and the ratios (a)/(b) and (c)/(b) are taken within a round. Prints the median and
the min–max over `--rounds` (≥ 5). The goal of the data issue: (a)/(b) ≤ 1.5.

    python benchmarks/bench_data.py              # 5 rounds, about 3 minutes on 2 cores
    python benchmarks/bench_data.py --rounds 7
"""
from __future__ import annotations
import argparse, gzip, json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

VARIANTS = ("train", "prebuilt", "torchvision")


def one(variant: str, raw_dir: str) -> float:
    "Seconds for one training epoch of `variant` (run inside a fresh process)."
    import torch
    import tqdm.auto  # noqa: F401  -- train's progress bar module: an import, not per-epoch cost, so outside the clock
    from attribkit import data, models
    torch.set_num_threads(2)
    fm = data.fashion_mnist()
    x, y = (t.flatten(1) if t.is_floating_point() else t for t in fm.train.tensors)
    torch.manual_seed(0)
    model = models.lenet_300_100()
    if variant == "train":
        ds = torch.utils.data.TensorDataset(x, y)
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)   # torch's one-time optimizer import (~1.6 s), as (b)
        t = time.perf_counter()
        models.train(model, ds, epochs=1, lr=0.05, batch_size=64, progress=False, device="cpu")
        return time.perf_counter() - t
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    if variant == "prebuilt":
        perm = torch.randperm(len(x))
        batches = [(x[perm[s:s + 64]], y[perm[s:s + 64]]) for s in range(0, len(x), 64)]
    else:
        import torchvision, torchvision.transforms as T
        tf = T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,)), T.Lambda(lambda im: im.flatten())])
        ds = torchvision.datasets.FashionMNIST(raw_dir, train=True, transform=tf, download=False)
        batches = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True)
    model.train()
    t = time.perf_counter()
    for xb, yb in batches:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    return time.perf_counter() - t


def torchvision_root(tmp: Path) -> Path:
    "A torchvision-layout copy (unzipped idx files) of the Fashion-MNIST that attribkit reads."
    from attribkit.data import FASHION_MNIST_FILES, fashion_mnist_dir
    src, raw = fashion_mnist_dir(), tmp / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for n in FASHION_MNIST_FILES:
        f = src / n
        (raw / n).write_bytes(f.read_bytes() if f.exists() else gzip.open(src / f"{n}.gz").read())
    return tmp


def fresh(variant: str, root: Path) -> float:
    out = subprocess.run([sys.executable, __file__, "--one", variant, "--root", str(root)], check=True,
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps({"seconds": one(a.one, a.root)})); return
    if a.rounds < 5: p.error("--rounds must be >= 5 (the spread is reported as min–max)")
    with tempfile.TemporaryDirectory() as d:
        root = torchvision_root(Path(d))
        times = {v: [] for v in VARIANTS}
        for r in range(a.rounds):
            for v in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                times[v].append(fresh(v, root))
            print(f"round {r + 1}: " + "  ".join(f"{v} {times[v][-1]:.2f} s" for v in VARIANTS), flush=True)
    lb = times["prebuilt"]
    print("\none epoch, LeNet-300-100 on 60,000 Fashion-MNIST images, batch 64, 2 threads; median (min–max) over", a.rounds, "rounds")
    print(f"{'variant':40s} {'seconds':>22s} {'/ lower bound':>22s}")
    for v, label in zip(VARIANTS, ("(a) models.train, in-memory tensors", "(b) pre-built batches (lower bound)",
                                   "(c) torchvision per-item transforms")):
        s, q = times[v], [t / b for t, b in zip(times[v], lb)]
        print(f"{label:40s} {statistics.median(s):8.2f} ({min(s):.2f}–{max(s):.2f}) "
              f"{statistics.median(q):10.2f} ({min(q):.2f}–{max(q):.2f})")


if __name__ == "__main__":
    main()
