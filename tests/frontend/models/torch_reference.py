#!/usr/bin/python3
"""The PyTorch side of the model tests (run by ctest as a fixture, once per run).

For torchvision's inception_v3 (with and without the aux head, at 299 and 75
pixels), resnet18 and resnet50, and for PyTorch twins of our small models, writes
one JSON file holding
  - the state_dict entries in order: name, shape, kind ("param" for parameters,
    "state" for buffers); num_batches_tracked is left out, the IR has no such
    variable;
  - every Conv2d and Linear layer in execution order, counted independently of
    our cost model with forward hooks: its output shape without the batch, and
    its multiply-accumulates per sample (output elements times the inputs each
    one reads: in_channels / groups * kh * kw for a conv, in_features for a
    linear).

Usage: torch_reference.py OUT.json
"""

import json
import sys

import torch
import torchvision
from torch import nn


class SmallCnn(nn.Module):
    """small_cnn and small_cnn_nobn as docs/models.md defines them."""

    def __init__(self, batch_norm, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1, bias=not batch_norm)
        if batch_norm:
            self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1, bias=not batch_norm)
        if batch_norm:
            self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, num_classes)
        self.batch_norm = batch_norm

    def forward(self, x):
        x = self.conv1(x)
        if self.batch_norm:
            x = self.bn1(x)
        x = nn.functional.max_pool2d(torch.relu(x), 2)
        x = self.conv2(x)
        if self.batch_norm:
            x = self.bn2(x)
        x = nn.functional.max_pool2d(torch.relu(x), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(nn.functional.dropout(x, 0.5, self.training))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def describe(model, input_shape, train=False, batch=1):
    params = {name for name, _ in model.named_parameters()}
    state = []
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        state.append({"name": name, "shape": list(t.shape),
                      "kind": "param" if name in params else "state"})

    layers = []

    def hook(name):
        def record(module, inputs, output):
            per_output = (module.in_channels // module.groups * module.kernel_size[0] *
                          module.kernel_size[1] if isinstance(module, nn.Conv2d)
                          else module.in_features)
            layers.append({"name": name, "shape": list(output.shape[1:]),
                           "macs": output[0].numel() * per_output})
        return record

    handles = [m.register_forward_hook(hook(name)) for name, m in model.named_modules()
               if isinstance(m, (nn.Conv2d, nn.Linear))]
    model.train(train)
    with torch.no_grad():
        model(torch.zeros(batch, *input_shape))
    for h in handles:
        h.remove()
    return {"parameters": sum(p.numel() for p in model.parameters()),
            "state_dict": state, "layers": layers}


def main():
    torch.manual_seed(0)
    inception = torchvision.models.inception_v3
    models = {
        "inception_v3": describe(inception(aux_logits=False, init_weights=False), (3, 299, 299)),
        "inception_v3_75": describe(inception(aux_logits=False, init_weights=False), (3, 75, 75)),
        # The aux head runs only in training mode; BatchNorm then needs two samples.
        "inception_v3_aux": describe(inception(aux_logits=True, init_weights=False),
                                     (3, 299, 299), train=True, batch=2),
        "resnet18": describe(torchvision.models.resnet18(), (3, 224, 224)),
        "resnet50": describe(torchvision.models.resnet50(), (3, 224, 224)),
        "small_cnn": describe(SmallCnn(True), (1, 28, 28)),
        "small_cnn_nobn": describe(SmallCnn(False), (1, 28, 28)),
        "mlp": describe(Mlp(), (784,)),
    }
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__,
                   "models": models}, f, indent=1)


if __name__ == "__main__":
    main()
