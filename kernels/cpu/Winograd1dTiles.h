//===- Winograd1dTiles.h - 1-D Winograd tile code over one vector type -*- C++ -*-===//
//
// The bodies of IsaKernels (Winograd1dIsa.h), written once over a vector
// type I (I::V, I::B floats, load/store/set1/fma/zero) and included only by
// Winograd1dAvx512.cpp and Winograd1dAvx2.cpp, each compiled for its ISA.
// Everything here has internal linkage (an unnamed namespace per including
// file), so no copy compiled for one ISA can stand in for the other's.
//
// The products are register-blocked: R rows by NV vectors of accumulators
// (I::R, I::NV), one broadcast of A and NV loads of B per step of the
// depth; the edges take smaller blocks of the same code.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/Winograd1dIsa.h"

namespace graphc {
namespace wino1d {
namespace {

/// One R x NV-vector block of C (+)= A B (Transposed false: A is rows x
/// depth) or C (+)= A^T B (Transposed true: A is depth x rows); Load adds to
/// what C holds.
template <class I, int R, int NV, bool Transposed, bool Load>
void gemmBlock(int64_t depth, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
               int64_t ldc) {
  typename I::V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = Load ? I::load(c + r * ldc + v * I::B) : I::zero();
  for (int64_t k = 0; k < depth; ++k) {
    typename I::V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = I::load(b + k * ldb + v * I::B);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      typename I::V av = I::set1(Transposed ? a[k * lda + r] : a[r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] = I::fma(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      I::store(c + r * ldc + v * I::B, acc[r][v]);
}

using BlockFn = void (*)(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t);

/// The block functions for every rows <= I::R and vectors <= I::NV.
template <class I, bool Transposed, bool Load> struct BlockTable {
  BlockFn fn[I::R + 1][I::NV + 1] = {};
  template <int R, int NV> void fill() {
    fn[R][NV] = &gemmBlock<I, R, NV, Transposed, Load>;
    if constexpr (NV > 1)
      fill<R, NV - 1>();
    else if constexpr (R > 1)
      fill<R - 1, I::NV>();
  }
  BlockTable() { fill<I::R, I::NV>(); }
};

/// Bytes of B one slice of the depth may take: about a third of a core's
/// level-2 cache (1 MB on Zen 4 and Sapphire Rapids, 2 MB on later Xeons),
/// so the slice stays there while every block of rows passes over it.
constexpr int64_t kSliceBytes = 384 << 10;

/// Covers rows x cols with blocks. Where B fits in the level-2 cache, each
/// R x NV block runs the whole depth, the blocks of rows of one column
/// panel after another (the panel of B stays in cache); where it does not,
/// in slices of the depth whose part of B does, each block of R rows of A
/// (one slice deep, in the level-1 cache) meeting every column in turn.
/// `accumulate` adds to C.
template <class I, bool Transposed>
void blocked(int64_t rows, int64_t depth, int64_t cols, const float *a, int64_t lda, const float *b,
             int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  static const BlockTable<I, Transposed, false> fresh;
  static const BlockTable<I, Transposed, true> adding;
  const int64_t vectors = cols / I::B;
  // (Ternaries rather than std::min and std::max: no out-of-line template of
  // the standard library may be compiled into this file, Winograd1dIsa.h.)
  const int64_t slice = kSliceBytes / (cols * 4) > 16 ? kSliceBytes / (cols * 4) : 16;
  const int64_t rowStep = Transposed ? 1 : lda, depthStep = Transposed ? lda : 1;
  auto run = [&](int64_t r0, int64_t v0, int64_t d0, int64_t kc, bool load) {
    const int nr = (int)(rows - r0 < I::R ? rows - r0 : I::R);
    const int nv = (int)(vectors - v0 < I::NV ? vectors - v0 : I::NV);
    const BlockFn(*fn)[I::NV + 1] = load ? adding.fn : fresh.fn;
    fn[nr][nv](kc, a + r0 * rowStep + d0 * depthStep, lda, b + d0 * ldb + v0 * I::B, ldb,
               c + r0 * ldc + v0 * I::B, ldc);
  };
  if (depth <= slice) {
    for (int64_t v0 = 0; v0 < vectors; v0 += I::NV)
      for (int64_t r0 = 0; r0 < rows; r0 += I::R)
        run(r0, v0, 0, depth, accumulate);
    return;
  }
  for (int64_t d0 = 0; d0 < depth; d0 += slice)
    for (int64_t r0 = 0; r0 < rows; r0 += I::R)
      for (int64_t v0 = 0; v0 < vectors; v0 += I::NV)
        run(r0, v0, d0, depth - d0 < slice ? depth - d0 : slice, accumulate || d0 > 0);
}

template <class I>
void gemm(int64_t rows, int64_t depth, int64_t cols, const float *a, int64_t lda, const float *b,
          int64_t ldb, float *c, int64_t ldc) {
  blocked<I, false>(rows, depth, cols, a, lda, b, ldb, c, ldc, false);
}

template <class I>
void gemmTransposedAccumulate(int64_t rows, int64_t depth, int64_t cols, const float *a,
                              int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
  blocked<I, true>(rows, depth, cols, a, lda, b, ldb, c, ldc, true);
}

/// f(t, image, line, start) for each tile t of a job: its image, output line
/// and first output position.
template <typename F> void forEachTile(const Job &j, F &&f) {
  int64_t t = j.first;
  for (int64_t g = j.line0; g < j.line1; ++g)
    for (int64_t tile = 0; tile < j.perLine; ++tile, ++t)
      f(t, g / j.lines, g % j.lines, tile * j.tables->m);
}

// The transforms take the number of points A as a template argument, so their
// loops unroll, the tile's vectors stay in registers and every coefficient
// is one FMA with a broadcast operand; inputTransform<I> and the others pick A.

template <class I, int A>
void inputTransformA(const Job &j, const float *src, const Walk &w, int64_t channels, float *V) {
  const float *BT = j.tables->BT;
  const int64_t depth = j.fold * channels;
  forEachTile(j, [&](int64_t t, int64_t image, int64_t line, int64_t start) {
    // The tile's positions inside the line: all but near the ends.
    const int64_t first = start - j.pad;
    const bool inside = first >= 0 && first + A <= w.length;
    for (int a = 0; a < j.fold; ++a) {
      const int64_t in = line - j.padAcross + a;
      float *out = V + t * depth + a * channels;
      if (in < 0 || in >= w.lines) {
        for (int k = 0; k < A; ++k)
          for (int64_t cb = 0; cb < channels / I::B; ++cb)
            I::store(out + k * j.tiles * depth + cb * I::B, I::zero());
        continue;
      }
      for (int64_t cb = 0; cb < channels / I::B; ++cb) {
        const float *row = src + image * w.image + cb * w.block + in * w.line;
        typename I::V d[A];
#pragma GCC unroll 12
        for (int i = 0; i < A; ++i) {
          int64_t q = first + i;
          d[i] = inside || (q >= 0 && q < w.length) ? I::load(row + q * w.pos) : I::zero();
        }
#pragma GCC unroll 12
        for (int k = 0; k < A; ++k) {
          typename I::V acc = I::mul(I::set1(BT[k * A]), d[0]);
#pragma GCC unroll 12
          for (int i = 1; i < A; ++i)
            acc = I::fma(I::set1(BT[k * A + i]), d[i], acc);
          I::store(out + k * j.tiles * depth + cb * I::B, acc);
        }
      }
    }
  });
}

template <class I, int A>
void outputTransformA(const Job &j, const float *M, int64_t channels, const float *bias, float *dst,
                      const Walk &w, int post) {
  const float *AT = j.tables->AT;
  const int m = j.tables->m;
  forEachTile(j, [&](int64_t t, int64_t image, int64_t line, int64_t start) {
    const int outputs = (int)(w.length - start < m ? w.length - start : m);
    for (int64_t cb = 0; cb < channels / I::B; ++cb) {
      float *row = dst + image * w.image + cb * w.block + line * w.line;
      const float *in = M + t * channels + cb * I::B;
      typename I::V mk[A];
#pragma GCC unroll 12
      for (int k = 0; k < A; ++k)
        mk[k] = I::load(in + k * j.tiles * channels);
      typename I::V b = bias ? I::load(bias + cb * I::B) : I::zero();
      for (int i = 0; i < outputs; ++i) {
        typename I::V acc = b;
#pragma GCC unroll 12
        for (int k = 0; k < A; ++k)
          acc = I::fma(I::set1(AT[i * A + k]), mk[k], acc);
        if (post & kAddTo)
          acc = I::add(acc, I::load(row + (start + i) * w.pos));
        // max(0, acc) returns its second operand for a NaN, which passes on
        // as through oneDNN's ReLU.
        if (post & kRelu)
          acc = I::max(I::zero(), acc);
        I::store(row + (start + i) * w.pos, acc);
      }
    }
  });
}

template <class I, int A>
void gradientTransformA(const Job &j, const float *dy, const Walk &w, int64_t channels, float *E) {
  const float *AT = j.tables->AT;
  constexpr int m = 4;
  forEachTile(j, [&](int64_t t, int64_t image, int64_t line, int64_t start) {
    for (int64_t cb = 0; cb < channels / I::B; ++cb) {
      const float *row = dy + image * w.image + cb * w.block + line * w.line;
      typename I::V g[m];
#pragma GCC unroll 4
      for (int i = 0; i < m; ++i)
        g[i] = start + i < w.length ? I::load(row + (start + i) * w.pos) : I::zero();
      float *out = E + t * channels + cb * I::B;
#pragma GCC unroll 12
      for (int k = 0; k < A; ++k) {
        typename I::V acc = I::mul(I::set1(AT[k]), g[0]);
#pragma GCC unroll 4
        for (int i = 1; i < m; ++i)
          acc = I::fma(I::set1(AT[i * A + k]), g[i], acc);
        I::store(out + k * j.tiles * channels, acc);
      }
    }
  });
}

/// Calls F<A>::run for the job's number of points (F(4, 3), F(4, 5), F(4, 7)).
template <template <int> class F, typename... Args> void byPoints(const Job &j, Args... args) {
  switch (j.tables->alpha) {
  case 6:
    return F<6>::run(j, args...);
  case 8:
    return F<8>::run(j, args...);
  default:
    return F<10>::run(j, args...);
  }
}

template <class I> struct Transforms {
  template <int A> struct In {
    static void run(const Job &j, const float *src, const Walk *w, int64_t c, float *V) {
      inputTransformA<I, A>(j, src, *w, c, V);
    }
  };
  template <int A> struct Out {
    static void run(const Job &j, const float *M, int64_t c, const float *bias, float *dst,
                    const Walk *w, int post) {
      outputTransformA<I, A>(j, M, c, bias, dst, *w, post);
    }
  };
  template <int A> struct Gradient {
    static void run(const Job &j, const float *dy, const Walk *w, int64_t c, float *E) {
      gradientTransformA<I, A>(j, dy, *w, c, E);
    }
  };
};

template <class I>
void inputTransform(const Job &j, const float *src, const Walk &w, int64_t channels, float *V) {
  byPoints<Transforms<I>::template In>(j, src, &w, channels, V);
}

template <class I>
void outputTransform(const Job &j, const float *M, int64_t channels, const float *bias, float *dst,
                     const Walk &w, int post) {
  byPoints<Transforms<I>::template Out>(j, M, channels, bias, dst, &w, post);
}

template <class I>
void gradientTransform(const Job &j, const float *dy, const Walk &w, int64_t channels, float *E) {
  byPoints<Transforms<I>::template Gradient>(j, dy, &w, channels, E);
}

/// The IsaKernels of vector type I.
/// A vector type's traits I: Floats floats per vector, Rows x Vectors
/// accumulators per product block, the intrinsics of prefix Prefix
/// (_mm512, _mm256).
#define GRAPHC_WINO_VECTOR(Name, Vec, Prefix, Floats, Rows, Vectors)                               \
  struct Name {                                                                                    \
    using V = Vec;                                                                                 \
    static constexpr int B = Floats, R = Rows, NV = Vectors;                                       \
    static V zero() { return Prefix##_setzero_ps(); }                                              \
    static V load(const float *p) { return Prefix##_loadu_ps(p); }                                 \
    static void store(float *p, V v) { Prefix##_storeu_ps(p, v); }                                 \
    static V set1(float x) { return Prefix##_set1_ps(x); }                                         \
    static V mul(V a, V b) { return Prefix##_mul_ps(a, b); }                                       \
    static V add(V a, V b) { return Prefix##_add_ps(a, b); }                                       \
    static V max(V a, V b) { return Prefix##_max_ps(a, b); }                                       \
    static V fma(V a, V b, V c) { return Prefix##_fmadd_ps(a, b, c); }                             \
  }

template <class I> IsaKernels kernelsOf(const char *name) {
  return IsaKernels{I::B,
                    I::B * I::NV,
                    name,
                    &inputTransform<I>,
                    &outputTransform<I>,
                    &gradientTransform<I>,
                    &gemm<I>,
                    &gemmTransposedAccumulate<I>};
}

} // namespace
} // namespace wino1d
} // namespace graphc
