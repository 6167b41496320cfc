"""Shared tiny models and inputs for the tests in tests/ (float64, seeded, milliseconds to run).

`make_cnn` / `make_mlp` / `make_linear` / `make_inputs` are plain functions (importable as `from conftest import make_cnn`, for
module-level helpers and parametrize lists); the fixtures `tiny_cnn`, `tiny_mlp`, `tiny_linear` and `tiny_inputs` return them."""
import os
import pytest, torch
from torch import nn

# One torch thread pool per core, not per worker: `pytest -n 2` on 2 cores with torch's default of one thread per core gives 4
# threads on 2 cores, and the tiny models' ops then wait on each other's barriers (many times slower). The kernels and subprocesses
# that tests start inherit OMP_NUM_THREADS; a value already set is kept.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _workers)))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def make_cnn(in_ch: int = 1, width: int = 2, hw: int = 4, classes: int = 3, pool: str | None = None, bias: bool = True,
             act: type = nn.ReLU, seed: int | None = None) -> nn.Sequential:
    "Conv2d(in_ch→width, 3×3, same) → act → [MaxPool2d/AvgPool2d(2) for pool='max'/'avg'] → Flatten → Linear(→classes), float64."
    if seed is not None: torch.manual_seed(seed)
    side = hw // 2 if pool else hw
    layers = [nn.Conv2d(in_ch, width, 3, padding=1, bias=bias), act()]
    if pool: layers.append({"max": nn.MaxPool2d, "avg": nn.AvgPool2d}[pool](2))
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(width * side * side, classes, bias=bias)).double()


def make_mlp(sizes=(6, 10, 8, 3), act: type = nn.ReLU, bias: bool = True, seed: int | None = None) -> nn.Sequential:
    "Linear(sizes[0]→sizes[1]) → act → … → Linear(→sizes[-1]) (no act after the last), float64."
    if seed is not None: torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers += [nn.Linear(a, b, bias=bias)] + ([act()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers).double()


def make_linear(k: int = 3, d: int = 4, seed: int = 0, bias: bool = False) -> nn.Sequential:
    "Flatten → Linear(d→k) with N(0, 1) weights drawn from a generator seeded with `seed`, float64."
    g = torch.Generator().manual_seed(seed)
    m = nn.Sequential(nn.Flatten(), nn.Linear(d, k, bias=bias)).double()
    with torch.no_grad(): m[1].weight.copy_(torch.randn(k, d, generator=g, dtype=torch.float64))
    return m


def make_inputs(n: int = 4, c: int = 1, h: int = 4, w: int | None = None, seed: int = 0) -> torch.Tensor:
    "Standard-normal float64 inputs (n, c, h, w) from a generator seeded with `seed`."
    return torch.randn(n, c, h, h if w is None else w, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.fixture
def tiny_cnn(): return make_cnn

@pytest.fixture
def tiny_mlp(): return make_mlp

@pytest.fixture
def tiny_linear(): return make_linear

@pytest.fixture
def tiny_inputs(): return make_inputs
