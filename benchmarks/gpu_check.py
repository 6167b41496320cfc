"""The prepared GPU check: one command to run on a CUDA machine, writing one JSON of what it measured.

On a machine with CUDA it runs, each in its own process and with its wall time:

  1. `bench_attribution.py --device cuda` — IG, SmoothGrad and RISE (resnet18 at 224² included) and IG on resnet50 at
     16×3×224² against the lower bound and Captum at its best chunk;
  2. `bench_metrics.py --device cuda`, then with `--workload resnet18` (32 images at 224², 48 steps) — pixel flipping's
     operator count, its ratio to its lower bound and, where `ATTRIBKIT_QUANTUS_PATH` points at an installed Quantus,
     Quantus's time at equal settings (goals: ≤ 1.5× the bound on the small CNN, Quantus ≥ 10× slower);
  3. `tests/test_cuda.py` — the library on a CUDA model with CPU data sets (MIA, masks, ROAR) and attributions against
     the CPU's;
  4. the smoke reproduction of every notebook with `--device cuda`.

It writes `gpu_check.json` (`--out`): per step the command, exit status, wall time and the last lines of its output
(the benchmarks print their ratio tables there). On a machine without CUDA it says so and exits 0.

    python benchmarks/gpu_check.py --out gpu_check.json     # or: make gpu-check
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def step(name: str, cmd: list[str], timeout: int) -> dict:
    "Run one command; return its record (never raises)."
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = 124, f"timed out after {timeout} s\n" + (e.stdout or b"").decode(errors="replace")[-4000:]
    rec = {"step": name, "command": " ".join(cmd), "rc": rc, "wall_s": round(time.perf_counter() - t, 1),
           "output_tail": out[-6000:]}
    print(f"{name}: rc {rc}, {rec['wall_s']} s", flush=True)
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu_check.json")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds each step may take")
    ap.add_argument("--skip", nargs="*", default=[], choices=["attribution", "metrics", "tests", "reproduce"])
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("gpu-check: no CUDA device on this machine; nothing to check (run it on a CUDA machine).")
        return 0
    py = sys.executable
    steps = []
    if "attribution" not in a.skip:
        steps.append(step("attribution", [py, str(HERE / "bench_attribution.py"), "--device", "cuda"], a.timeout))
    if "metrics" not in a.skip:
        steps.append(step("metrics", [py, str(HERE / "bench_metrics.py"), "--device", "cuda"], a.timeout))
        steps.append(step("metrics resnet18", [py, str(HERE / "bench_metrics.py"), "--device", "cuda", "--workload", "resnet18"],
                          a.timeout))
    if "tests" not in a.skip:
        steps.append(step("tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cuda.py"], a.timeout))
    if "reproduce" not in a.skip:
        with tempfile.TemporaryDirectory() as d:
            steps.append(step("reproduce smoke", [py, "-m", "attribkit.reproduce", "--scale", "smoke", "--device", "cuda",
                                                  "--out", d, "--jobs", str(min(4, os.cpu_count() or 1)), "--force"], a.timeout))
            summary = Path(d) / "summary.md"   # the failed notebooks with their failing cell and error, kept in the report
            if summary.exists():
                steps[-1]["failed"] = [l for l in summary.read_text().splitlines() if "| failed" in l]
                for l in steps[-1]["failed"]: print("  " + l, flush=True)
    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "steps": steps}
    Path(a.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"gpu-check: wrote {a.out}")
    return 1 if any(s["rc"] != 0 for s in steps) else 0


if __name__ == "__main__":
    sys.exit(main())
