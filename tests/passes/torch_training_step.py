#!/usr/bin/python3
"""PyTorch's side of TorchTrainingStep.cpp: two training steps of a small
two-head CNN (conv+bias, training-mode batch norm, relu, max and average
pooling, global average pooling, two linear heads, cross-entropy with the
auxiliary head weighted 0.4, SGD with Nesterov momentum and weight decay).

Usage: torch_training_step.py OUTDIR. Writes .npy files: the inputs (x,
labels), the initial variables (init/), the step-1 loss and gradients (grad/),
the step-2 loss, and every variable after two steps (after/); and the same
for fp16 in OUTDIR/fp16.

fp16 is graphc's --precision fp16 written out by hand: every value graphc
stores in f16 is rounded to f16 here, forward and backward (the convolution's
input, weights and bias, its output, the batch norm's, ReLU's and the pools'
outputs, and the gradients flowing back into each of them), each layer
computing in f32 between roundings; batch-norm statistics and parameters, the
linear heads and the loss stay f32. The loss is scaled by 1024 before the
backward pass and the gradients divided by it before the update (dynamic loss
scaling whose first scale is 1024 and which does not overflow here). PyTorch
1.13 has no f16 convolutions on a CPU, and its autocast has no f16 there.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


LOSS_SCALE = 1024.0


class ToHalf(torch.autograd.Function):
    """f16 storage of an f32 value: rounded forward, its gradient rounded backward."""

    @staticmethod
    def forward(ctx, t):
        return t.half().float()

    @staticmethod
    def backward(ctx, g):
        return g.half().float()


def main(out, fp16):
    r = ToHalf.apply if fp16 else (lambda t: t)
    for sub in ("init", "grad", "after"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    gen = torch.Generator().manual_seed(20)
    x = torch.randn(4, 3, 9, 9, generator=gen)
    labels = torch.tensor([1, 4, 0, 4], dtype=torch.int64)
    init = {
        "conv.weight": 0.3 * torch.randn(6, 3, 3, 3, generator=gen),
        "conv.bias": 0.1 * torch.randn(6, generator=gen),
        "bn.weight": 1 + 0.1 * torch.randn(6, generator=gen),
        "bn.bias": 0.1 * torch.randn(6, generator=gen),
        "fc.weight": 0.4 * torch.randn(5, 6, generator=gen),
        "fc.bias": 0.1 * torch.randn(5, generator=gen),
        "aux.weight": 0.4 * torch.randn(5, 6, generator=gen),
    }
    state = {"bn.running_mean": torch.zeros(6), "bn.running_var": torch.ones(6)}
    params = {k: v.clone().requires_grad_() for k, v in init.items()}

    def loss_of():
        y = r(F.conv2d(r(x), r(params["conv.weight"]), r(params["conv.bias"]), stride=1, padding=1))
        # PyTorch momentum 0.1 is ONNX/graphc momentum 0.9.
        y = r(F.batch_norm(y, state["bn.running_mean"], state["bn.running_var"],
                           params["bn.weight"], params["bn.bias"], training=True,
                           momentum=0.1, eps=1e-3))
        y = r(F.relu(y))
        y = r(F.max_pool2d(y, 3, stride=2, padding=1))
        y = r(F.avg_pool2d(y, 3, stride=1, padding=1, count_include_pad=False))
        h = r(F.adaptive_avg_pool2d(y, 1)).flatten(1)
        logits = F.linear(h, params["fc.weight"], params["fc.bias"])
        aux = F.linear(h, params["aux.weight"])
        return F.cross_entropy(logits, labels) + 0.4 * F.cross_entropy(aux, labels)

    def save(name, t):
        np.save(os.path.join(out, name + ".npy"), t.detach().numpy())

    save("x", x)
    save("labels", labels)
    for k, v in list(init.items()) + list(state.items()):
        save("init/" + k, v)

    opt = torch.optim.SGD(list(params.values()), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    for step in (1, 2):
        opt.zero_grad()
        loss = loss_of()
        (loss * LOSS_SCALE if fp16 else loss).backward()
        if fp16:
            for p in params.values():
                p.grad /= LOSS_SCALE
        save("loss%d" % step, loss)
        if step == 1:
            for k, p in params.items():
                save("grad/" + k, p.grad)
        opt.step()
    for k, v in list(params.items()) + list(state.items()):
        save("after/" + k, v)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], fp16=False)
    main(os.path.join(sys.argv[1], "fp16"), fp16=True)
