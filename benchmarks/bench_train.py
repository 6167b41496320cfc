"""A training epoch of `models.train` against its pure compute (the issue's goal: ≤ 1.2×).

`models.train`'s epoch time is the loop it records in its history (`time`: setup excluded). Pure compute: the same
model, optimizer, batch size and number of steps, on batches sliced beforehand, doing only the forward pass, the
recipe's loss (its label smoothing included), the backward pass and the optimizer step. `models.train` adds the seeded
shuffled index batches, the gather of each batch, the one-cycle scheduler and the per-step bookkeeping (running loss
and accuracy). Each measurement runs in a fresh process (one thread), the two orders alternate across rounds, and the
table gives the median ratio with its spread (min–max over rounds). A second table times the stand-ins whose recipe
trains channels-last (`models.train(channels_last=True)`) against the same epoch in the default memory format.

    OMP_NUM_THREADS=1 python benchmarks/bench_train.py                  # zoo stand-ins, 6,000 Fashion-MNIST images
    python benchmarks/bench_train.py --rounds 5 --images 12000
    python benchmarks/bench_train.py --formats --models "ResNet-8/2" "Mosaic VGG-6-BN/2"   # the memory formats only
"""
from __future__ import annotations
import argparse, json, statistics, subprocess, sys, time

MODELS = ["NIB VGG16/16", "VGG-16-BN/16", "LeNet-300-100", "Canvas VGG-16-BN/16"]


def measure(name: str, arm: str, images: int) -> float:
    "Seconds of one epoch over `images` images of stand-in `name`: `arm` 'train' (models.train), 'pure' (the bare loop), 'default' or 'channels_last' (models.train in that memory format, whatever the recipe says)."
    import torch
    import torch.nn.functional as F
    from torch.utils.data import TensorDataset
    from attribkit import data, models
    from attribkit.papers import zoo

    torch.set_num_threads(1)
    e = zoo.ZOO[name]
    if e.data == "fashion_canvases-64":  # rendered, not decoded: render only the images timed
        c = zoo.CANVASES
        x, y = data.fashion_canvases("train", images, size=c["size"], seed=0, version=c["version"]).tensors[:2]
    else:
        x, y = (t[:images] for t in zoo.splits(e.data).train.tensors[:2])
    torch.manual_seed(0)
    model = e.build()
    r = dict(e.recipe, epochs=1)
    if arm in ("default", "channels_last"):
        r["channels_last"] = arm == "channels_last"
    if arm in ("train", "default", "channels_last"):
        return models.train(model, TensorDataset(x, y), progress=False, seed=0, device="cpu", **r)["time"][0]  # the epoch's loop
    bs, fmt = r["batch_size"], torch.channels_last if r.get("channels_last") else torch.contiguous_format
    batches = [(x[s : s + bs].contiguous(memory_format=fmt), y[s : s + bs].contiguous()) for s in range(0, len(x), bs)]
    model.to(memory_format=fmt)
    opt = (torch.optim.SGD(model.parameters(), lr=r["lr"], momentum=r.get("momentum", 0.9), weight_decay=r["weight_decay"])
           if r["optimizer"] == "sgd" else torch.optim.Adam(model.parameters(), lr=r["lr"], weight_decay=r["weight_decay"]))
    model.train()
    t = time.perf_counter()
    for xb, yb in batches:
        loss = F.cross_entropy(model(xb), yb, label_smoothing=r.get("label_smoothing", 0.0))
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=6000)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--formats", action="store_true", help="only the memory-format table, for every model named (channels-last recipe or not)")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "ARM"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one[0], a.one[1], a.images))); return
    run = lambda n, arm: json.loads(subprocess.run([sys.executable, __file__, "--one", n, arm, "--images", str(a.images)],
                                                   capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    print(f"one epoch over {a.images} Fashion-MNIST images (or canvases), one thread, {a.rounds} rounds (fresh process each, order alternated)")
    if not a.formats:
        print("| stand-in | models.train (s) | pure compute (s) | ratio median | ratio min–max |\n|---|---:|---:|---:|---|")
    for n in [] if a.formats else a.models:
        tr, pu = alternated(run, n, "train", "pure", a.rounds)
        ratios = [t / p for t, p in zip(tr, pu)]
        print(f"| {n} | {statistics.median(tr):.2f} | {statistics.median(pu):.2f} | {statistics.median(ratios):.3f} | "
              f"{min(ratios):.3f}–{max(ratios):.3f} |", flush=True)
    chl = a.models if a.formats else [n for n in a.models if zoo_recipe(n).get("channels_last")]
    if chl:
        print("\n| stand-in | default format (s) | channels-last (s) | speed-up median | speed-up min–max |\n|---|---:|---:|---:|---|")
    for n in chl:
        de, cl = alternated(run, n, "default", "channels_last", a.rounds)
        ups = [d / c for d, c in zip(de, cl)]
        print(f"| {n} | {statistics.median(de):.2f} | {statistics.median(cl):.2f} | {statistics.median(ups):.2f}× | "
              f"{min(ups):.2f}–{max(ups):.2f}× |", flush=True)


def alternated(run, name: str, first: str, second: str, rounds: int) -> tuple[list, list]:
    "`run(name, arm)` for arms `first` and `second`, `rounds` times each, the order alternating: their two lists of seconds."
    got = {first: [], second: []}
    for k in range(rounds):
        for arm in ((first, second) if k % 2 == 0 else (second, first)):
            got[arm].append(run(name, arm))
    return got[first], got[second]


def zoo_recipe(name: str) -> dict:
    from attribkit.papers import zoo

    return zoo.ZOO[name].recipe


if __name__ == "__main__":
    main()
