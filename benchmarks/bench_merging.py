"""Speed of neuron merging on CPU: CIFAR VGG-16-BN (the paper's 64%-removed cfg) and ResNet-56 (inner convs, 20%).

Run: OMP_NUM_THREADS=1 python benchmarks/bench_merging.py   (target: each merge <= 1 s on CPU)"""
import os, statistics, time
import torch
from attribkit.merging import count_params, find_pairs, merge, prune
from attribkit.models import cifar_resnet, vgg16_bn_cifar


def _median_time(fn, repeats: int = 5) -> tuple[float, float]:
    "Median wall-clock and median process CPU time (the latter is robust to other jobs on a shared machine)."
    fn()  # warm-up (first fx trace, allocator)
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time(); fn()
        wall.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def main():
    torch.manual_seed(0)
    vgg = vgg16_bn_cifar().eval()
    convs = [p.producer for p in find_pairs(vgg) if p.producer.startswith("features")]
    # official CIFAR-10 cfg: conv1 64->32 and conv8-13 512->256, all other layers kept
    vgg_ratio = {convs[0]: 0.5, **{n: 0.5 for n in convs[7:]}}
    res = cifar_resnet(depth=56).eval()
    rows = []
    for name, model, ratio in (("VGG-16-BN (CIFAR)", vgg, vgg_ratio), ("ResNet-56", res, 0.2)):
        for crit in ("l1", "l2-GM"):
            (tm, cm), (tp, cp) = (_median_time(lambda: merge(model, ratio, criterion=crit)),
                                  _median_time(lambda: prune(model, ratio, criterion=crit)))
            small, rep = merge(model, ratio, criterion=crit)
            rows.append((name, crit, tm, cm, tp, cp, count_params(model), rep.params_after, len(rep.layers)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {os.cpu_count()} cores, load average {load:.1f}, median of 5")
    print("| model | criterion | merge wall s | merge CPU s | prune wall s | prune CPU s | params before | after | pairs | merge <= 1 s (CPU) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, crit, tm, cm, tp, cp, pb, pa, n in rows:
        print(f"| {name} | {crit} | {tm:.3f} | {cm:.3f} | {tp:.3f} | {cp:.3f} | {pb:,} | {pa:,} ({100 * (1 - pa / pb):.1f}% removed) | {n} | {cm <= 1.0} |")


if __name__ == "__main__":
    main()
