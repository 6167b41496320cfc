"""Closed-form Kronecker KL (attribkit.vsm.kronecker_gaussian_kl) at 224×224: time and memory, against what the dense form needs.

The dense form (torch.distributions.MultivariateNormal with the HW×HW covariance κ_h⊗κ_w) is NOT allocated at 224×224;
its memory is stated from its size, and its time is measured at small sizes where it fits, next to the closed form in the same run.
Usage: python benchmarks/bench_vsal.py [--batch 8] [--size 224] [--repeats 5] [--device cpu|cuda]
"""
import argparse, statistics, time
import torch
from torch.distributions import MultivariateNormal, kl_divergence
from attribkit.vsm import SoftTVPrior, kronecker_gaussian_kl


def timeit(fn, repeats, sync):
    fn(); sync()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def dense_kl(mu, lv, Ph, Pw):
    H, W = mu.shape[-2:]
    cov = torch.kron(torch.linalg.inv(Ph), torch.linalg.inv(Pw))
    p = MultivariateNormal(torch.zeros(H * W, dtype=mu.dtype, device=mu.device), covariance_matrix=cov)
    q = MultivariateNormal(mu.flatten(1), covariance_matrix=torch.diag_embed(lv.flatten(1).exp()))
    return kl_divergence(q, p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8); ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeats", type=int, default=5); ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    dt = torch.float32
    prior = SoftTVPrior("ar1", 0.9)
    H = W = a.size; B = a.batch
    g = torch.Generator(device=dev).manual_seed(0)
    mu = torch.randn(B, H, W, generator=g, device=dev, dtype=dt, requires_grad=True)
    lv = torch.randn(B, H, W, generator=g, device=dev, dtype=dt, requires_grad=True)
    Ph, lh, Pw, lw = prior.factors(H, W, dt, dev)

    def fwd(): return kronecker_gaussian_kl(mu, lv, Ph, Pw, lh, lw).sum()
    def fwd_bwd(): torch.autograd.grad(fwd(), (mu, lv))
    with torch.no_grad(): t_f = timeit(fwd, a.repeats, sync)
    t_fb = timeit(fwd_bwd, a.repeats, sync)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated(); fwd_bwd(); sync()
        peak = torch.cuda.max_memory_allocated() - base; how = "CUDA peak allocated above inputs"
    else:
        # torch's CPU allocator has no peak counter: measure the bytes autograd saves for backward (exact, via
        # saved-tensor hooks, unique storages) and add the inputs' gradients (2 maps)
        seen = {}
        def pack(t):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes(); return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fwd()
        saved = sum(seen.values()); torch.autograd.grad(out, (mu, lv))
        peak = saved + 2 * mu.numel() * mu.element_size()
        how = f"saved-for-backward {saved/2**20:.1f} MiB + 2 gradient maps"
    n = H * W
    dense_cov = n * n * mu.element_size()
    dense_batch = B * dense_cov + dense_cov        # q's B diagonal covariances as dense matrices + the prior's
    print(f"device={dev} dtype={dt} batch={B} map={H}x{W} (HW={n}) prior=ar1(0.9)")
    print(f"closed form: forward {t_f*1e3:.2f} ms, forward+backward {t_fb*1e3:.2f} ms (median of {a.repeats})")
    print(f"closed form memory: {peak/2**20:.1f} MiB ({how}); prior factors: {2*H*H*4/2**10:.0f} KiB")
    print(f"dense form (NOT allocated): one HW×HW covariance = {dense_cov/2**30:.1f} GiB; "
          f"with torch.distributions MultivariateNormal per batch ≥ {dense_batch/2**30:.1f} GiB "
          f"plus a Cholesky of an {n}×{n} matrix (~{n**3/3/1e12:.1f} TFLOP) per distribution")
    print(f"memory ratio dense/closed ≥ {dense_batch/peak:.0f}x")
    # time scaling where the dense form fits, measured in the same run
    print("\nside by side where the dense form fits (float64, batch 2, forward+backward):")
    print(f"{'H=W':>5} {'closed ms':>10} {'dense ms':>10} {'ratio':>8} {'max rel diff':>13}")
    for s in (4, 8, 16, 24, 32):
        m2 = torch.randn(2, s, s, dtype=torch.float64, device=dev, requires_grad=True)
        l2 = torch.randn(2, s, s, dtype=torch.float64, device=dev, requires_grad=True)
        P1, a1, P2, a2 = prior.factors(s, s, torch.float64, dev)
        tc = timeit(lambda: torch.autograd.grad(kronecker_gaussian_kl(m2, l2, P1, P2, a1, a2).sum(), (m2, l2)), a.repeats, sync)
        td = timeit(lambda: torch.autograd.grad(dense_kl(m2, l2, P1, P2).sum(), (m2, l2)), a.repeats, sync)
        with torch.no_grad():
            c, d = kronecker_gaussian_kl(m2, l2, P1, P2, a1, a2), dense_kl(m2, l2, P1, P2)
        print(f"{s:>5} {tc*1e3:>10.3f} {td*1e3:>10.2f} {td/tc:>8.0f} {float(((c-d)/d).abs().max()):>13.1e}")


if __name__ == "__main__":
    main()
