"A tiny ROAR task shared by the metrics and distributed tests: the label lives in a 2x2 patch of a 5x5 image."
import torch
import torch.nn.functional as F
from torch import nn


def roar_data(n, g):
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 1, 5, 5, generator=g) * 0.5
    x[:, 0, 1:3, 1:3] += (2.0 * y - 1).view(n, 1, 1) * 1.5
    return x, y


def roar_factory(): return nn.Sequential(nn.Flatten(), nn.Linear(25, 2))


def roar_train(steps):
    "A `train_fn` for roar(): `steps` of plain full-batch gradient descent."
    def train(net, x, y, generator):
        for _ in range(steps):
            net.zero_grad(); F.cross_entropy(net(x), y).backward()
            with torch.no_grad():
                for p in net.parameters(): p -= 0.5 * p.grad
    return train
