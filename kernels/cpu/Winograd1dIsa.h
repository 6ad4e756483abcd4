//===- Winograd1dIsa.h - The vector code of the 1-D Winograd, per ISA -*- C++ -*-===//
//
// What kernels/cpu/Winograd1d.cpp asks of the code compiled for one ISA
// (Winograd1dAvx512.cpp with -mavx512f, Winograd1dAvx2.cpp with -mavx2
// -mfma): the tile transforms and the products of one block of tiles, on
// channel-blocked tensors (nChw<B>c, B = 16 or 8 floats: one vector).
//
// Plain structs and function pointers only: a header with inline functions
// or templates, compiled into a file with -mavx512f, could leave a copy of
// them that the linker picks for the whole program, and that copy would
// fault on an AVX2-only CPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace graphc {
namespace wino1d {

/// The largest number of points (alpha = m + r - 1) a transform has.
inline constexpr int kMaxAlpha = 12;

/// What the forward output transform does after the bias (bits; oneDNN's
/// sum and ReLU post-ops, in that order).
enum PostOp : int { kAddTo = 1, kRelu = 2 };

/// F(m, r): m outputs of an r-tap correlation from alpha = m + r - 1 inputs,
/// y = AT [(G g) . (BT d)]; row-major f32, computed in double.
struct Tables {
  int m = 0, r = 0, alpha = 0;
  float AT[kMaxAlpha * kMaxAlpha]; ///< m x alpha
  float G[kMaxAlpha * kMaxAlpha];  ///< alpha x r
  float BT[kMaxAlpha * kMaxAlpha]; ///< alpha x alpha
};

/// Where position `pos` of line `line` of channel block `block` of image
/// `image` is in a channel-blocked tensor: the sum of each index times its
/// stride, in floats; `lines` and `length` are the tensor's sizes across and
/// along the transform's axis.
struct Walk {
  int64_t image = 0, block = 0, line = 0, pos = 0;
  int64_t lines = 0, length = 0;
};

/// A block of tiles: output lines [line0, line1) counted over the whole batch
/// (image * lines + line), every tile of each; tiles are numbered line by line
/// from `first` in buffers of `tiles` rows per point. Output position q of line p reads input
/// positions q - pad + i (i < alpha) of input lines p - padAcross + a (a <
/// fold): a window `fold` lines high is `fold` one-line transforms, the
/// products summed over them as over the channels.
struct Job {
  const Tables *tables = nullptr;
  int64_t line0 = 0, line1 = 0;
  int64_t lines = 0;     ///< output lines per image
  int64_t perLine = 0;   ///< tiles per line: ceil(output length / m)
  int64_t tiles = 0;     ///< rows of the tile buffers (a point's stride)
  int64_t first = 0;     ///< the buffers' row of line0's first tile
  int64_t pad = 0;       ///< input positions before the first, along the axis
  int64_t padAcross = 0; ///< input lines before the first
  int fold = 1;          ///< the window's size across the axis
};

/// The vector code for one ISA; matrices are row-major with the leading
/// dimensions given, every channel count a multiple of `block`. (No member
/// initializers: the ISA files build it by aggregate initialization, so they
/// define no constructor of it.)
struct IsaKernels {
  int block; ///< floats per vector: the channel block it takes
  int panel; ///< columns of B one register block of the products covers
  const char *name;
  /// V[k][t][a][c] = sum_i BT[k][i] src(line t.line - padAcross + a,
  /// position t.start - pad + i, c), zero outside the tensor; rows of
  /// fold * channels.
  void (*inputTransform)(const Job &j, const float *src, const Walk &w, int64_t channels, float *V);
  /// dst(tile t, position t.start + i, c) = bias[c] + sum_k AT[i][k] M[k][t][c],
  /// positions past the line's end left alone; bias may be null. `post`
  /// (PostOp bits): kAddTo adds what dst held, then kRelu clamps at 0.
  void (*outputTransform)(const Job &j, const float *M, int64_t channels, const float *bias,
                          float *dst, const Walk &w, int post);
  /// E[k][t][c] = sum_i AT[i][k] dy(tile t, position t.start + i, c), zero
  /// past the line's end (the filter gradient's transform of dy).
  void (*gradientTransform)(const Job &j, const float *dy, const Walk &w, int64_t channels,
                            float *E);
  /// C = A B: A rows x depth (lda), B depth x cols (ldb), C rows x cols (ldc).
  void (*gemm)(int64_t rows, int64_t depth, int64_t cols, const float *A, int64_t lda,
               const float *B, int64_t ldb, float *C, int64_t ldc);
  /// C += A^T B: A depth x rows (lda), B depth x cols (ldb), C rows x cols (ldc).
  void (*gemmTransposedAccumulate)(int64_t rows, int64_t depth, int64_t cols, const float *A,
                                   int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc);
};

/// The AVX-512 (16 floats) and AVX2 + FMA (8 floats) kernels.
const IsaKernels &avx512Kernels();
const IsaKernels &avx2Kernels();

} // namespace wino1d
} // namespace graphc
