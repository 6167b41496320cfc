"""Speed of neuron merging on CPU: CIFAR VGG-16-BN (the paper's 64%-removed cfg) and ResNet-56 (inner convs, 20%).

Run: OMP_NUM_THREADS=1 python benchmarks/bench_merging.py   (target: each merge <= 1 s on CPU)"""
import statistics, time
import torch
from attribkit.merging import count_params, find_pairs, merge, prune
from attribkit.models import cifar_resnet, vgg16_bn_cifar


def _median_time(fn, repeats: int = 5) -> float:
    fn()  # warm-up (first fx trace, allocator)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


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
            tm = _median_time(lambda: merge(model, ratio, criterion=crit))
            tp = _median_time(lambda: prune(model, ratio, criterion=crit))
            small, rep = merge(model, ratio, criterion=crit)
            rows.append((name, crit, tm, tp, count_params(model), rep.params_after, len(rep.layers)))
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, median of 5")
    print("| model | criterion | merge s | prune s | merge/prune | params before | after | pairs | <= 1 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, crit, tm, tp, pb, pa, n in rows:
        print(f"| {name} | {crit} | {tm:.3f} | {tp:.3f} | {tm / tp:.2f} | {pb:,} | {pa:,} ({100 * (1 - pa / pb):.1f}% removed) | {n} | {tm <= 1.0} |")


if __name__ == "__main__":
    main()
