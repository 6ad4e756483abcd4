#!/usr/bin/python3
"""Writes PyTorch references for tests/reference: one momentum-SGD training step.

For each case: the model exported to ONNX (training mode, weights included),
an input batch and labels, and PyTorch's loss, logits, gradient of every
parameter, every parameter and BatchNorm statistic after one SGD-momentum
step, and the state before it. Dropout is p = 0 on both sides (dropout masks
are tested elsewhere).

Cases whose BatchNorm uses batch statistics are also computed in float64 (the
`*64` folders): in inception_v3 at small sizes the gradient through batch
statistics is so ill-conditioned that PyTorch's own float32 result differs from
float64 by far more than 1e-4 (docs/reference-tests.md has the figures), so
float32 is judged against float64 there.

    make_reference.py OUTDIR
"""
import copy
import inspect
import os
import sys

import numpy as np
import torch
import torchvision

# The TorchScript exporter, which these references were written with: PyTorch 2.9 and later
# default to the dynamo exporter (other opsets, external data, no training mode).
TORCHSCRIPT_EXPORTER = ({"dynamo": False}
                        if "dynamo" in inspect.signature(torch.onnx.export).parameters
                        else {})

LR, MOMENTUM = 0.1, 0.9


class SmallCnn(torch.nn.Module):
    """The same topology as graphc's small_cnn (docs/models.md)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(32)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(64)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


class EmbeddingLstm(torch.nn.Module):
    """Token ids (an int64 graph input) through nn.Embedding and an LSTM: the table's gradient
    is a GatherGrad, the LSTM is unrolled at import."""
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 12)
        self.rnn = torch.nn.LSTM(12, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, tokens):
        _, (h, c) = self.rnn(self.embed(tokens))
        return self.head(h[-1] + c[-1])


def save(path, array):
    if torch.is_tensor(array):
        array = array.detach().to(torch.float32 if array.is_floating_point() else array.dtype).numpy()
    np.save(path, np.ascontiguousarray(array))


def step(model, x, labels, d, suffix):
    """One step on `model`; writes loss, logits, grad, after into d/<what><suffix>."""
    for sub in ("grad", "after"):
        os.makedirs(os.path.join(d, sub + suffix), exist_ok=True)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    save(os.path.join(d, "logits%s.npy" % suffix), logits)
    save(os.path.join(d, "loss%s.npy" % suffix), loss.reshape([]))
    for pname, p in model.named_parameters():
        save(os.path.join(d, "grad" + suffix, pname + ".npy"), p.grad)
    opt.step()
    for sname, t in model.state_dict().items():
        if t.dtype.is_floating_point:
            save(os.path.join(d, "after" + suffix, sname + ".npy"), t)


def case(out, name, model, x, labels, opset, batch_stats, with_float64):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "before"), exist_ok=True)
    model.train() if batch_stats else model.eval()
    for sname, t in model.state_dict().items():
        if t.dtype.is_floating_point:
            save(os.path.join(d, "before", sname + ".npy"), t)
    # Export a copy: tracing runs the model and would move BN's running statistics.
    exported = copy.deepcopy(model).train()
    torch.onnx.export(exported, x, os.path.join(d, "model.onnx"), opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"], **TORCHSCRIPT_EXPORTER)
    save(os.path.join(d, "input.npy"), x)
    save(os.path.join(d, "labels.npy"), labels.to(torch.int64))
    if with_float64:
        step(copy.deepcopy(model).double(), x.double(), labels, d, "64")
    step(model, x, labels, d, "")


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(2)
    case(out, "small_cnn", SmallCnn(), torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,)),
         opset=13, batch_stats=True, with_float64=False)

    case(out, "embedding_lstm", EmbeddingLstm(), torch.randint(0, 50, (8, 7)), torch.randint(0, 10, (8,)),
         opset=17, batch_stats=True, with_float64=False)

    def inception():
        m = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
        m.dropout.p = 0.0
        return m

    # BatchNorm with running statistics (graphc --bn frozen, PyTorch eval-mode BN): well
    # conditioned, so float32 is compared with float32 at 1e-4.
    case(out, "inception_v3_75_frozen_bn", inception(), torch.randn(2, 3, 75, 75),
         torch.randint(0, 1000, (2,)), opset=17, batch_stats=False, with_float64=False)
    # BatchNorm with batch statistics: judged against float64.
    case(out, "inception_v3_107_batch_bn", inception(), torch.randn(8, 3, 107, 107),
         torch.randint(0, 1000, (8,)), opset=17, batch_stats=True, with_float64=True)


if __name__ == "__main__":
    main()
