#!/usr/bin/python3
"""How much error Winograd's transforms add to a bf16 convolution.

A bf16 convolution on a CPU rounds its inputs and weights to bf16 and sums
their products in f32 (oneDNN's and graphrun's --precision bf16). A Winograd
convolution in bf16 would round the *transformed* tiles and weights instead,
then transform the f32 products back; the transforms' large coefficients
amplify that rounding. This prints, for the tile sizes a CPU Winograd uses,
the error of each way against the exact (float64) result on the same f32
data, relative to the output's mean magnitude:

  f32 Winograd      f32 transforms and products (graphrun's f32 kernels)
  bf16 direct       inputs and weights rounded to bf16, f32 sums
  bf16 Winograd     transforms in f32, transformed operands rounded to bf16,
                    f32 sums and output transform

Toom-Cook points 0, +-1, +-2, +-1/2, +-3/4 and infinity, as kernels/cpu/
Winograd1d.cpp takes them; 1-D F(m, r) along one axis and 2-D F(m x m, 3 x 3).

    /usr/bin/python3 bench/bf16_winograd_error.py [--channels C] [--tiles T]
"""
import argparse

import numpy as np

POINTS = [0, 1, -1, 2, -2, 0.5, -0.5, 0.75, -0.75]


def bf16(a):
    """a rounded to the nearest bf16 (ties to even), kept as float32."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def toom_cook(m, r):
    """AT (m x a), G (a x r), BT (a x a), a = m + r - 1, with
    y[i] = sum_j d[i + j] g[j] = (AT [(G g) * (BT d)])[i]."""
    a = m + r - 1
    G = np.zeros((a, r))
    AT = np.zeros((m, a))
    for k, p in enumerate(POINTS[:a - 1]):
        G[k] = [p ** l for l in range(r)]
        AT[:, k] = [p ** i for i in range(m)]
    G[a - 1, r - 1] = AT[m - 1, a - 1] = 1
    # BT from the identity above: sum_k AT[i,k] G[k,l] BT[k,j] = [j == i + l].
    system = np.zeros((m * r * a, a * a))
    rhs = np.zeros(m * r * a)
    for i in range(m):
        for l in range(r):
            for j in range(a):
                row = (i * r + l) * a + j
                system[row, np.arange(a) * a + j] = AT[i] * G[:, l]
                rhs[row] = float(j == i + l)
    BT = np.linalg.lstsq(system, rhs, rcond=None)[0].reshape(a, a)
    assert np.abs(system @ BT.ravel() - rhs).max() < 1e-9, "no exact F(%d, %d)" % (m, r)
    scale = np.abs(BT).max(axis=1)  # rows of BT at most 1, G takes the rest
    return AT, G * scale[:, None], BT / scale[:, None]


def errors(y, exact):
    e = y - exact
    mean = np.abs(exact).mean()
    return np.sqrt((e * e).mean()) / mean, np.abs(e).max() / mean


def study_1d(m, r, channels, tiles, rng):
    AT, G, BT = (t.astype(np.float32) for t in toom_cook(m, r))
    a = m + r - 1
    d = rng.standard_normal((tiles, channels, a)).astype(np.float32)
    g = rng.standard_normal((channels, r)).astype(np.float32)
    windows = np.stack([d[:, :, i:i + r] for i in range(m)], 2)  # tiles, C, m, r

    def direct(dd, gg):
        w = np.stack([dd[:, :, i:i + r] for i in range(m)], 2)
        return np.einsum("tcir,cr->ti", w.astype(np.float64), gg.astype(np.float64))

    def winograd(dd, gg, round_):
        V = np.einsum("kj,tcj->tck", BT, dd)
        U = gg @ G.T
        if round_:
            V, U = bf16(V), bf16(U)
        return np.einsum("tck,ck->tk", V, U) @ AT.T

    exact = np.einsum("tcir,cr->ti", windows.astype(np.float64), g.astype(np.float64))
    return exact, winograd(d, g, False), direct(bf16(d), bf16(g)), winograd(bf16(d), bf16(g), True)


def study_2d(m, channels, tiles, rng):
    r = 3
    AT, G, BT = (t.astype(np.float32) for t in toom_cook(m, r))
    a = m + r - 1
    d = rng.standard_normal((tiles, channels, a, a)).astype(np.float32)
    g = rng.standard_normal((channels, r, r)).astype(np.float32)

    def direct(dd, gg):
        out = np.zeros((tiles, m, m))
        for i in range(m):
            for j in range(m):
                out[:, i, j] = np.einsum("tcuv,cuv->t", dd[:, :, i:i + r, j:j + r].astype(np.float64),
                                         gg.astype(np.float64))
        return out

    def winograd(dd, gg, round_):
        V = np.einsum("ki,tcij,lj->tckl", BT, dd, BT)
        U = np.einsum("ki,cij,lj->ckl", G, gg, G)
        if round_:
            V, U = bf16(V), bf16(U)
        M = np.einsum("tckl,ckl->tkl", V, U)
        return np.einsum("ik,tkl,jl->tij", AT, M, AT)

    exact = direct(d, g)
    return exact, winograd(d, g, False), direct(bf16(d), bf16(g)), winograd(bf16(d), bf16(g), True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--channels", type=int, default=192, help="input channels summed over (192)")
    ap.add_argument("--tiles", type=int, default=2000, help="tiles per case (2000)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = [("F(%d, %d)" % (m, r), study_1d(m, r, args.channels, args.tiles, rng))
             for m, r in ((2, 3), (4, 3), (4, 5), (2, 7), (4, 7))]
    cases += [("F(%dx%d, 3x3)" % (m, m), study_2d(m, args.channels, args.tiles // 4, rng))
              for m in (2, 4)]
    print("error relative to the output's mean magnitude, %d channels, normal data" % args.channels)
    print("%-14s %21s %21s %21s %9s" % ("transform", "f32 Winograd rms/max", "bf16 direct rms/max",
                                         "bf16 Winograd rms/max", "wino/dir"))
    for name, (exact, f32w, bf16d, bf16w) in cases:
        cols = [errors(y, exact) for y in (f32w, bf16d, bf16w)]
        print("%-14s" % name + "".join("   %8.1e / %8.1e" % c for c in cols) +
              " %8.1fx" % (cols[2][0] / cols[1][0]))


if __name__ == "__main__":
    main()
