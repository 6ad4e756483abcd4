#!/usr/bin/python3
"""`graphrun train --cpu-layout` end to end (issue 34: AMX's channels-last activations).

On a CPU with AMX, bf16 activations are kept channels-last (NHWC), the layout oneDNN's AMX
convolutions compute in; `--cpu-layout nhwc` forces that layout for f32 and bf16 on any CPU, which
is how it is tested where there is no AMX. Here, for resnet18 (convolutions, batch norms, pools,
residual adds) and inception_v3 (concats and their gradients' splits), in fp32 and, where the CPU
has bf16 instructions, in bf16:

- the run plan says which layout the activations took: every kept 4-d value channels-last under
  nhwc, none under blocked;
- the losses agree with the blocked run's: the first (before any update) within the convolutions'
  summation orders (f32) or bf16's roundings (bf16), the later ones loosely: the default learning
  rate moves these untrained models far in one step, which grows the runs' rounding differences
  (the kernels' gradients in each layout are checked one by one in dnnl_kernel_tests);
- an unknown layout is one error line naming the flag.
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHRUN, CliCase, dnnl_isa, run  # noqa: E402

PLAN = re.compile(r"cpu layout (\w+) \(.*\): (\d+) values blocked, (\d+) channels-last")


class CpuLayoutTest(CliCase):
    def train(self, *args, ok=True):
        return run(GRAPHRUN, "train", "--no-progress", "--threads", "2", *args, ok=ok)

    def losses(self, name, layout, *args):
        m = self.path(f"{name}-{layout}.jsonl")
        p = self.train(*args, "--no-eval", "--seed", "3", "--metrics", m, "--cpu-layout", layout)
        plan = PLAN.search(p.stdout)
        self.assertIsNotNone(plan, p.stdout)
        self.assertEqual(plan.group(1), layout)
        with open(m) as f:
            return [json.loads(l)["loss"] for l in f], int(plan.group(2)), int(plan.group(3))

    def check(self, name, precision, *args, first, later):
        blocked, kept, last = self.losses(name, "blocked", "--precision", precision, *args)
        self.assertEqual(last, 0, "blocked: nothing channels-last")
        self.assertGreater(kept, 0)
        nhwc, kept, last = self.losses(name, "nhwc", "--precision", precision, *args)
        self.assertEqual(kept, 0, "nhwc: nothing blocked")
        self.assertGreater(last, 20)
        self.assertEqual(len(blocked), len(nhwc))
        self.assertAlmostEqual(nhwc[0], blocked[0], delta=first * abs(blocked[0]), msg=(blocked, nhwc))
        for a, b in zip(blocked[1:], nhwc[1:]):
            self.assertAlmostEqual(a, b, delta=later * abs(a), msg=(blocked, nhwc))

    def test_resnet18_trains_channels_last_as_blocked(self):
        # Batch 8 at 64x64 (2x2 at the last batch norms): at 1x1 and batch 2 a batch norm
        # normalises two values, which turns the layouts' last-bit differences into large ones.
        args = ("--model", "resnet18", "--image-size", "64", "--batch", "8", "--steps", "3")
        self.check("resnet18", "fp32", *args, first=1e-5, later=5e-3)
        isa = dnnl_isa()
        if "bf16" in isa or "amx" in isa:
            self.check("resnet18-bf16", "bf16", *args, first=2e-3, later=3e-2)

    def test_inception_v3_concats_channels_last(self):
        args = ("--model", "inception_v3", "--batch", "2", "--steps", "1")
        self.check("inception", "fp32", *args, first=1e-5, later=0)
        isa = dnnl_isa()
        if "bf16" in isa or "amx" in isa:
            self.check("inception-bf16", "bf16", *args, first=5e-3, later=0)

    def test_an_unknown_layout_is_one_error_line(self):
        p = self.train("--model", "small_cnn", "--steps", "1", "--cpu-layout", "nchw16c", ok=False)
        self.assertFailsClearly(p, "--cpu-layout", "unknown CPU activation layout 'nchw16c'",
                                "blocked, nhwc, auto")


if __name__ == "__main__":
    unittest.main()
