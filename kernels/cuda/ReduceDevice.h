//===- ReduceDevice.h - The reduction engine: plan and launchers -*- C++ -*-===//
//
// One engine sums over any axes for ReduceSum, ReduceMean, GlobalAveragePool
// and the batch-norm statistics. The input is seen as outputs o (the kept
// axes) times reduced positions r; element (o, r) lives at
// kept.offset(o) + reduced.offset(r). Each output sums its `count` terms in
// double:
//   Value             x
//   SquaredDeviation  (x - mean[o])^2
//   Product           y * (x - mean[o])     (y shaped like x)
// and is written as float(sum * scale).
//
// Determinism: the split of each output's terms into `chunks` pieces and
// the order of every partial sum depend only on the shapes (not on the GPU),
// so results are bitwise reproducible from run to run. Two kernels:
//   Block   one block per (output, chunk), threads over consecutive r (the
//           innermost reduced axis is contiguous), a fixed tree in shared
//           memory;
//   Thread  one thread per (output, chunk), walking r in order (consecutive
//           threads read consecutive outputs, which is contiguous when the
//           innermost axis is kept).
// With more than one chunk, partial sums go to scratch and a third kernel
// adds them in chunk order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

enum class ReduceTerm : uint8_t { Value, SquaredDeviation, Product };
enum class ReduceMode : uint8_t { Block, Thread };

/// Threads of a Block-mode reduction block.
inline constexpr int kReduceThreads = 256;

struct ReducePlan {
  ReduceMode mode = ReduceMode::Thread;
  int64_t outputs = 0, count = 0; ///< outputs, terms per output
  int64_t chunks = 1, chunkLen = 0;
  /// Scratch for partial sums (doubles), 0 with one chunk.
  size_t scratchBytes() const { return chunks > 1 ? (size_t)(outputs * chunks) * 8 : 0; }
};

/// How a reduction of `outputs` x `count` terms is split; `innerReduced`:
/// the innermost input axis is reduced (consecutive r are contiguous).
inline ReducePlan planReduction(int64_t outputs, int64_t count, bool innerReduced) {
  ReducePlan p;
  p.outputs = outputs;
  p.count = count;
  p.mode = innerReduced && count >= kReduceThreads ? ReduceMode::Block : ReduceMode::Thread;
  // Enough independent pieces to fill a large GPU, each still long enough
  // to be worth a block (or a thread).
  int64_t wantPieces = p.mode == ReduceMode::Block ? 1024 : 32768;
  int64_t minLen = p.mode == ReduceMode::Block ? 4096 : 128;
  int64_t chunks = outputs > 0 ? (wantPieces + outputs - 1) / outputs : 1;
  int64_t most = count > minLen ? (count + minLen - 1) / minLen : 1;
  chunks = chunks < 1 ? 1 : chunks > most ? most : chunks;
  p.chunkLen = count > 0 ? (count + chunks - 1) / chunks : 0;
  p.chunks = p.chunkLen > 0 ? (count + p.chunkLen - 1) / p.chunkLen : 1;
  return p;
}

struct ReduceArgs {
  ReduceTerm term = ReduceTerm::Value;
  StridedIndex<1> kept, reduced;
  double scale = 1;
  const float *x = nullptr;
  const float *y = nullptr;    ///< Product
  const float *mean = nullptr; ///< per output: SquaredDeviation, Product
};

/// Term r of output o.
GRAPHC_HD double reduceTerm(const ReduceArgs &a, int64_t o, int64_t keptOffset, int64_t r) {
  int64_t off;
  a.reduced.offsets(r, &off);
  off += keptOffset;
  double x = a.x[off];
  switch (a.term) {
  case ReduceTerm::SquaredDeviation: {
    double d = x - (double)a.mean[o];
    return d * d;
  }
  case ReduceTerm::Product:
    return (double)a.y[off] * (x - (double)a.mean[o]);
  default:
    return x;
  }
}

/// out[o] = float(sum over r of term(o, r) * scale); `scratch` holds
/// plan.scratchBytes(). With count == 0 every output is 0 (a mean of nothing
/// is the caller's to fill).
cudaError_t launchReduce(const ReducePlan &plan, const ReduceArgs &args, float *out, void *scratch,
                         cudaStream_t stream);

/// out[i] = value, n floats.
cudaError_t launchFill(float value, int64_t n, float *out, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
