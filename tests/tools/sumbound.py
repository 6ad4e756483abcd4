"""How far apart two groupings of the same sums may be (tests/common/SumBound.h, for Python).

Two runs that sum the same terms in other groupings (workers against one process, towers
against one device, micro-batches against one batch, one CPU's vector width against
another's) do not give the same bits, and no CPU's order is the right one. A K-term
float32 sum is within about K*u of its terms' magnitude whatever the order (Higham's
gamma_K, u = 2^-24), so two orders are within about K*u of each other, measured against
the tensor's largest value; K is the longest sum of the step, which `graphc inspect --json`
reports as "longest_sum" (ir/Cost.h). Values stored in 16 bits between float32 sums add one
16-bit ulp (2u16) per rounding on the path whose input may differ.

Every comparison prints its worst ratio to the bound ("[ bound    ] ..."), so a run under
each ISA cap shows the margin each test has on that CPU (docs/other-cpus.md).
"""
import json
import os
import subprocess

import numpy as np

F32 = 2.0 ** -24
F16 = 2.0 ** -11
BF16 = 2.0 ** -8

BIN = os.environ.get("GRAPHC_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))


def longest_sum(*model_args):
    """K of a training step of the model `graphc inspect` is given (e.g. "--model", "mlp",
    "--batch", "10"): the longest sum it takes."""
    p = subprocess.run([os.path.join(BIN, "graphc"), "inspect", "--json", *map(str, model_args)],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["longest_sum"]


def bound(terms, u16=0.0, roundings=0):
    """K*u_f32 for the longest sum, plus 2*u16 per 16-bit rounding on the path."""
    return terms * F32 + 2.0 * roundings * u16


def relative_error(got, want):
    """max|got - want| / max|want|, in float64 (0 for two zero tensors)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    worst = np.abs(got - want).max() if want.size else 0.0
    if np.isnan(worst):
        return float("inf")
    return 0.0 if worst == 0 else worst / max(np.abs(want).max(), 1e-30)


def report(what, worst, rel):
    print("[ bound    ] %s: worst %.3g = %.3g of the bound %.3g" % (what, worst, worst / rel, rel), flush=True)


def assert_within(test, want, got, rel, what):
    """Every tensor of `want` (a dict of name -> array) is in `got` and within rel of its
    largest value; prints the worst ratio to the bound."""
    test.assertEqual(sorted(want), sorted(got), what)
    worst, where = 0.0, None
    for name in want:
        err = relative_error(got[name], want[name])
        if err >= worst:
            worst, where = err, name
    report(what, worst, rel)
    test.assertLessEqual(worst, rel, "%s: %s is %.3g off, over the bound %.3g" % (what, where, worst, rel))


def assert_same_bits(test, want, got, what):
    """Every tensor of `want` is in `got` with the same bits: for runs that group every sum alike."""
    test.assertEqual(sorted(want), sorted(got), what)
    for name in want:
        a, b = np.asarray(want[name]), np.asarray(got[name])
        test.assertTrue(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(),
                        "%s: %s differs (expected the same bits: the sums are grouped alike)" % (what, name))
