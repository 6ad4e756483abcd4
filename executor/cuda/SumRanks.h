//===- SumRanks.h - The project's own all-reduce kernel ----------*- C++ -*-===//
//
// Sums the same tensor of several ranks elementwise and writes the sum to
// every rank's output, for logical devices that share a physical GPU (NCCL
// refuses two ranks on one GPU) or reach each other's memory through peer
// access. Each element is summed in rank order starting from +0.0f, exactly
// as CpuCollectives does, so every rank gets bitwise the same value and the
// result matches the CPU engine's bit for bit.
//
// Inputs may be the outputs (in place): a thread reads an element of every
// rank before it writes that element anywhere.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace graphc {

constexpr int kSumMaxRanks = 16;
constexpr int kSumMaxTensors = 8;

/// Up to kSumMaxTensors tensors of up to kSumMaxRanks ranks, by value as the
/// kernel's parameter (about 2 KiB).
struct SumRanksBatch {
  const float *in[kSumMaxTensors][kSumMaxRanks];
  float *out[kSumMaxTensors][kSumMaxRanks];
  int64_t count[kSumMaxTensors];
  int tensors = 0;
  int ranks = 0;
};

/// Enqueues the sums on `stream` (whose device is current).
cudaError_t launchSumRanks(const SumRanksBatch &batch, cudaStream_t stream);

} // namespace graphc
