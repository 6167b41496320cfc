"""2-process (gloo, loopback) tests of attribkit.distributed: sharded evaluation equals one process, no item lost or repeated,
DDP equals the doubled batch (the demo loop, `models.train`, `distill.distill`), resume after a kill (the demo loop and
`models.train`). Two launches in all (a killed run, then everything else), started with
`fork` so that the children do not re-import torch (seconds each on a loaded machine); `spawn` is exercised by
benchmarks/bench_distributed.py."""
import os, signal
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attribkit import distributed as D
from attribkit.metrics import evaluate_pixel_flipping, evaluate_localization, roar
from attribkit.mask import masked_input_accuracy
from attribkit import models, distill

D64 = torch.float64


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)).double()


def _data(n=13):
    g = torch.Generator().manual_seed(1)
    x = torch.relu(torch.randn(n, 1, 6, 6, generator=g, dtype=D64))        # many exact zeros → tied attributions
    m = torch.zeros(n, 6, 6, dtype=torch.bool); m[:, 1:4, 2:5] = True
    return x, torch.randint(0, 3, (n,), generator=g), m


def _gxi(model, x, t):
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(model(x).gather(1, t[:, None]).sum(), x)
    return g * x


from roar_toy import roar_data as _roar_data, roar_factory as _factory, roar_train
_train = roar_train(20)


def _roar_attr(x, y):
    w = torch.zeros(1, 5, 5); w[0, 1:3, 1:3] = 1
    return w * x * (2.0 * y - 1).view(-1, 1, 1, 1)


def _train_fit(batch_size, checkpoint=None, transform=None, epochs=3):
    "models.train on a float64 MLP without BN or dropout (24 items: divisible by 2 ranks); final state and history."
    g = torch.Generator().manual_seed(7)
    x = torch.randn(24, 4, generator=g, dtype=D64); y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    h = models.train(net, torch.utils.data.TensorDataset(x, y), epochs, lr=0.2, optimizer="sgd", batch_size=batch_size,
                     schedule="cosine", seed=3, device="cpu", progress=False, checkpoint=checkpoint, transform=transform)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}, h


def _distill_fit(batch_size):
    "distill.distill (SWA matching + KD) of a tiny float64 CNN student from a tiny teacher; final student state and history."
    torch.manual_seed(0)
    def cnn(c): return nn.Sequential(nn.Conv2d(2, c, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(c * 16, 3)).double()
    teacher, student = cnn(4), cnn(3)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(16, 2, 4, 4, generator=g, dtype=D64); y = torch.randint(0, 3, (16,), generator=g)
    h = distill.distill(teacher, student, (x, y), "swa", "1", "1", epochs=2, lr=0.05, batch_size=batch_size, seed=1,
                        device="cpu", progress=False)
    return {k: v.detach().clone() for k, v in student.state_dict().items()}, h


def _kill_in_epoch_3(x, g, seen=[0]):
    "A transform that kills rank 1 in the first batch of epoch 3 (after the epoch-2 checkpoint); batch 2 → 6 batches an epoch."
    seen[0] += 1
    if D.rank() == 1 and seen[0] > 2 * 6: os.kill(os.getpid(), signal.SIGKILL)
    return x


def _evaluations(path=None, train_path=None):
    "Everything the sharded evaluations return (and a resumed DDP run when `path` is given); run in one process and per rank."
    model, (x, y, m) = _cnn(), _data()
    g = torch.Generator().manual_seed(0)
    tr, te = _roar_data(41, g), _roar_data(23, g)
    return {"rank": D.rank(), "world": D.world_size(),
            "indices": D.gather(list(D.shard(7).indices), D.shard(7)),       # 7 items over 2 ranks
            "pf": evaluate_pixel_flipping(model, (x, y), _gxi, batch_size=3, steps=6, progress=False, seed=5),
            "auc": evaluate_localization(model, (x, y, m), _gxi, "mask_auc", batch_size=4, progress=False),
            "mia": masked_input_accuracy(model, (x, y), _gxi, iterations=3, batch_size=4, progress=False),
            "pg": evaluate_localization(model, (x, y, m), _gxi, "pointing_game", batch_size=4, tolerance=1, progress=False),
            "roar": roar(tr, te, _roar_attr, _factory, _train, fractions=(0.5,), repeats=2, batch_size=16,
                         fill="zero", progress=False, seed=3),
            "ddp": D._demo_fit(3, batch_size=2),
            "resumed": D._demo_fit(4, path, batch_size=2) if path is not None else None,
            "train": _train_fit(2), "distill": _distill_fit(4),
            "train_resumed": _train_fit(2, train_path, epochs=4) if train_path is not None else None}


def _kill_after_checkpoint(path, train_path):
    D._demo_fit(4, path, stop_after=2, batch_size=2)                     # leaves the epoch-2 checkpoint of the demo loop
    _train_fit(2, train_path, transform=_kill_in_epoch_3, epochs=4)       # rank 1 dies in epoch 3 of models.train
    D.barrier()                                                           # not reached: rank 0 waits in DDP until launch stops it


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    import torch._dynamo  # noqa: F401 -- DDP imports it on construction (seconds); imported once here, inherited by the forks
    path = tmp_path_factory.mktemp("ddp") / "ck.pt"
    train_path = path.with_name("train.pt")
    try: D.launch(_kill_after_checkpoint, 2, str(path), str(train_path), threads=1, start_method="fork"); killed = None
    except Exception as e: killed = e
    epoch_at_kill = torch.load(path, weights_only=True)["epoch"]
    train_epoch_at_kill = torch.load(train_path, weights_only=True)["epoch"]
    out = D.launch(_evaluations, 2, str(path), str(train_path), threads=1, start_method="fork")
    return dict(out, killed=killed, epoch_at_kill=epoch_at_kill, epoch_end=torch.load(path, weights_only=True)["epoch"],
                train_epoch_at_kill=train_epoch_at_kill, train_epoch_end=torch.load(train_path, weights_only=True)["epoch"])


@pytest.fixture(scope="module")
def one():
    return _evaluations()


def test_two_ranks_ran(two):
    assert (two["rank"], two["world"]) == (0, 2)


def test_no_item_lost_or_repeated(two):
    assert two["indices"] == [0, 1, 2, 3, 4, 5, 6]
    shards = [D.shard(13, r, 2).indices for r in range(2)] + [D.shard(13, r, 5).indices for r in range(5)]
    assert sorted(shards[0] + shards[1]) == list(range(13))
    assert sorted(i for s in shards[2:] for i in s) == list(range(13)) and [len(s) for s in shards[2:]] == [3, 3, 3, 2, 2]


def test_sharded_evaluations_equal_one_process(one, two):
    assert torch.equal(one["pf"].curves, two["pf"].curves) and torch.equal(one["pf"].auc, two["pf"].auc)
    assert torch.allclose(one["auc"].scores, two["auc"].scores, atol=1e-6, rtol=0, equal_nan=True)
    assert abs(one["auc"].mean - two["auc"].mean) <= 1e-6
    assert torch.equal(one["mia"], two["mia"]) and len(one["mia"]) == 4                        # MIA accuracies: exact
    assert torch.equal(one["pg"].scores, two["pg"].scores) and one["pg"].mean == two["pg"].mean   # accuracy: exact
    for k in one["roar"].scores: assert torch.equal(one["roar"].scores[k], two["roar"].scores[k])   # accuracies: exact


def test_ddp_two_ranks_equal_one_process_doubled_batch(two):
    ref = D._demo_fit(3, batch_size=4)
    for k in ref: assert torch.allclose(two["ddp"][k], ref[k], atol=1e-5, rtol=0), k
    assert not torch.equal(D._demo_fit(3, batch_size=2)[k], ref[k])      # the batch size matters: the check can fail


def test_killed_run_resumes_from_last_checkpoint(two):
    assert isinstance(two["killed"], torch.multiprocessing.ProcessExitedException), two["killed"]
    assert "SIGKILL" in str(two["killed"]) and (two["epoch_at_kill"], two["epoch_end"]) == (2, 4)
    ref = D._demo_fit(4, batch_size=4)                                    # uninterrupted, one process, doubled batch
    for k in ref: assert torch.allclose(two["resumed"][k], ref[k], atol=1e-5, rtol=0), k


def test_models_train_two_ranks_equal_one_process_doubled_batch(two):
    (ref, href), (two_w, two_h) = _train_fit(4), two["train"]
    for k in ref: assert torch.allclose(two_w[k], ref[k], atol=1e-5, rtol=0), k
    assert max(abs(a - b) for a, b in zip(two_h["loss"], href["loss"])) < 1e-5 and two_h["acc"] == href["acc"]
    assert not all(torch.allclose(_train_fit(2)[0][k], ref[k], atol=1e-5) for k in ref)   # the batch size matters


def test_models_train_killed_resumes_from_last_checkpoint(two):
    assert (two["train_epoch_at_kill"], two["train_epoch_end"]) == (2, 4)
    (ref, href), (res, hres) = _train_fit(4, epochs=4), two["train_resumed"]     # uninterrupted, one process, doubled batch
    for k in ref: assert torch.allclose(res[k], ref[k], atol=1e-5, rtol=0), k
    assert len(hres["loss"]) == 4 and max(abs(a - b) for a, b in zip(hres["loss"], href["loss"])) < 1e-5


def test_distill_two_ranks_equal_one_process_doubled_batch(two):
    (ref, href), (two_w, two_h) = _distill_fit(8), two["distill"]
    for k in ref: assert torch.allclose(two_w[k], ref[k], atol=1e-5, rtol=0), k
    assert max(abs(a - b) for a, b in zip(two_h["aux"], href["aux"])) < 1e-5
    assert not all(torch.allclose(_distill_fit(4)[0][k], ref[k], atol=1e-5) for k in ref)
