"""Towers with per-tower BatchNorm (--bn local), computed with PyTorch.

Writes, for each case, into <out>/<case>/: the initial state (one .npy per
variable, named as graphc names it: PyTorch's state_dict keys, momentum
buffers as '<param>.momentum'), the batch (input.npy, labels.npy), the tower
batch sizes (sizes.npy) and the state after STEPS momentum-SGD steps
(final/<name>.npy).

The towers are what the classic tower code does, written independently of
graphc: the global batch is cut into consecutive slices, tower t runs its slice
through the model in training mode with its own batch statistics, the loss is
the sum of per-sample cross-entropies divided by the global batch, the towers'
gradients add up (PyTorch accumulates .grad), and one optimizer step follows.
Each tower starts from the same running statistics; the new running
statistics are the towers' results weighted by their sample counts (each
tower's update is PyTorch's own: momentum 0.1, unbiased variance of its slice).
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 3
LR = 0.02
MOMENTUM = 0.9
IMAGE = 8
CLASSES = 10

# name -> (global batch, tower sizes as graphc's uneven policy cuts them)
CASES = {
    "two_even": (8, [4, 4]),
    "three_uneven": (7, [3, 2, 2]),
    "four_with_empty": (3, [1, 1, 1, 0]),
}


class SmallCnn(nn.Module):
    """graphc's small_cnn (docs/models.md) without dropout, same names."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(64)
        side = IMAGE // 4
        self.fc1 = nn.Linear(64 * side * side, 128)
        self.fc2 = nn.Linear(128, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def save(directory, name, array):
    os.makedirs(directory, exist_ok=True)
    np.save(os.path.join(directory, name + ".npy"), np.ascontiguousarray(array))


def running_buffers(model):
    return {n: b for n, b in model.named_buffers() if n.endswith(("running_mean", "running_var"))}


def run_case(out, name, batch, sizes, seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = SmallCnn()
    # Non-trivial BatchNorm parameters and statistics, so every term matters.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.startswith("bn"):
                p.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, p.shape).astype(np.float32))
                        if n.endswith("weight") else
                        torch.from_numpy(rng.uniform(-0.2, 0.2, p.shape).astype(np.float32)))
        for n, b in running_buffers(model).items():
            b.copy_(torch.from_numpy(rng.uniform(0.1, 0.5, b.shape).astype(np.float32))
                    if n.endswith("mean") else
                    torch.from_numpy(rng.uniform(0.8, 1.6, b.shape).astype(np.float32)))
    x = torch.from_numpy(rng.normal(0.0, 1.0, (batch, 1, IMAGE, IMAGE)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, CLASSES, batch).astype(np.int64))

    directory = os.path.join(out, name)
    for n, t in model.state_dict().items():
        if not n.endswith("num_batches_tracked"):
            save(os.path.join(directory, "initial"), n, t.numpy())
    save(directory, "input", x.numpy())
    save(directory, "labels", labels.numpy())
    save(directory, "sizes", np.array(sizes, dtype=np.int64))

    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    buffers = running_buffers(model)
    for _ in range(STEPS):
        opt.zero_grad()
        start = {n: b.clone() for n, b in buffers.items()}
        mixed = {n: torch.zeros_like(b) for n, b in buffers.items()}
        offset = 0
        for size in sizes:
            if size == 0:
                continue
            with torch.no_grad():
                for n, b in buffers.items():
                    b.copy_(start[n])
            model.train()
            logits = model(x[offset:offset + size])
            loss = F.cross_entropy(logits, labels[offset:offset + size], reduction="sum") / batch
            loss.backward()
            with torch.no_grad():
                for n, b in buffers.items():
                    mixed[n] += b * (size / batch)
            offset += size
        with torch.no_grad():
            for n, b in buffers.items():
                b.copy_(mixed[n])
        opt.step()

    final = os.path.join(directory, "final")
    for n, t in model.state_dict().items():
        if not n.endswith("num_batches_tracked"):
            save(final, n, t.numpy())
    for n, p in model.named_parameters():
        save(final, n + ".momentum", opt.state[p]["momentum_buffer"].numpy())


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    for seed, (name, (batch, sizes)) in enumerate(CASES.items()):
        assert sum(sizes) == batch
        run_case(out, name, batch, sizes, seed + 1)


if __name__ == "__main__":
    main()
