//===- OptimizerDevice.h - Optimizer updates over tensor lists ---*- C++ -*-===//
//
// Every optimizer update on the GPU, one tensor or many, is one kernel over
// a tensor list (the multi-tensor apply of fused optimizers): a launch
// carries up to kListTensors tensors (parameter, gradient, slots, learning
// rate, size) and a table that gives each CUDA block one chunk of one
// tensor, so hundreds of small parameters update in a few launches. The
// host splits any set of tensors into such launches with planTensorLists,
// a pure function the host tests check.
//
// Under dynamic loss scaling a tensor carries LossScaleStep's decision: a
// skipped step leaves it alone, otherwise the gradient is multiplied by 1 /
// scale first and Adam's t counts the updates made, as on the CPU.
//
// updateElement is the CPU kernels' arithmetic (kernels/cpu/Optimizers.cpp)
// in the same order, so only the device's fused multiply-adds separate the
// results:
//   SGD       p -= lr * (g + wd * p)
//   Momentum  d = g + wd p; buf = m buf + d; p -= lr * (nesterov ? d + m buf : buf)
//   RMSProp   d = g + wd p; ms = decay ms + (1 - decay) d^2;
//             mom = momentum mom + lr d / sqrt(ms + eps); p -= mom
//   Adam      d = g + wd p; m = b1 m + (1 - b1) d; v = b2 v + (1 - b2) d^2;
//             p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

namespace graphc {
namespace cuda {

enum class UpdateRule : uint8_t { SGD, Momentum, RMSProp, Adam };

/// Everything an update reads besides tensors and the learning rate.
struct UpdateHyper {
  float wd = 0, momentum = 0, decay = 0, restOfDecay = 0, eps = 0;
  float beta1 = 0, beta2 = 0, rest1 = 0, rest2 = 0;
  double adamBias1 = 1;   ///< 1 - beta1^t
  float invRootBias2 = 1; ///< 1 / sqrt(1 - beta2^t)
  bool nesterov = false;
  /// Adam under loss scaling: t = stepPlus1 - skipped steps, on the device.
  double beta1d = 0, beta2d = 0, stepPlus1 = 1;
};

GRAPHC_HD float rootOf(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}

/// One element; s0 and s1 are the rule's slots (unused ones may be null).
GRAPHC_HD void updateElement(UpdateRule rule, const UpdateHyper &h, float lr, float *p, float *s0,
                             float *s1, float g) {
  switch (rule) {
  case UpdateRule::SGD:
    *p -= lr * (g + h.wd * *p);
    return;
  case UpdateRule::Momentum: {
    float d = g + h.wd * *p;
    float buf = h.momentum * *s0 + d;
    *s0 = buf;
    *p -= lr * (h.nesterov ? d + h.momentum * buf : buf);
    return;
  }
  case UpdateRule::RMSProp: {
    float d = g + h.wd * *p;
    float ms = h.decay * *s0 + h.restOfDecay * d * d;
    float mom = h.momentum * *s1 + lr * d / rootOf(ms + h.eps);
    *s0 = ms;
    *s1 = mom;
    *p -= mom;
    return;
  }
  case UpdateRule::Adam: {
    float stepSize = (float)(lr / h.adamBias1);
    float d = g + h.wd * *p;
    float m = h.beta1 * *s0 + h.rest1 * d;
    float v = h.beta2 * *s1 + h.rest2 * d * d;
    *s0 = m;
    *s1 = v;
    *p -= stepSize * m / (rootOf(v) * h.invRootBias2 + h.eps);
    return;
  }
  }
}

/// Tensors and blocks per launch (the parameters stay under 4 KiB).
inline constexpr int kListTensors = 32;
inline constexpr int kListBlocks = 320;
/// Elements one CUDA block updates.
inline constexpr int64_t kListChunk = 1 << 16;

struct ListTensor {
  float *param = nullptr, *slot0 = nullptr, *slot1 = nullptr;
  const float *grad = nullptr;
  const float *lr = nullptr; ///< a device scalar
  /// Under dynamic loss scaling, LossScaleStep's decision {apply, 1 /
  /// scale, skipped steps before} on the device; null without.
  const float *decision = nullptr;
  int64_t n = 0;
};

struct TensorList {
  ListTensor tensors[kListTensors];
  uint8_t blockTensor[kListBlocks]; ///< which tensor block b updates
  int32_t blockChunk[kListBlocks];  ///< and which chunk of it
  int blocks = 0;
};

/// One launch of a plan: tensors (indices into the caller's list) and, per
/// block, (position in `tensors`, chunk).
struct ListLaunch {
  std::vector<int> tensors;
  std::vector<std::pair<int, int32_t>> blocks;
};

/// Splits tensors of `sizes` elements into launches; empty tensors get no
/// block. Limits are parameters so tests can use small ones.
inline std::vector<ListLaunch> planTensorLists(const std::vector<int64_t> &sizes,
                                               int64_t chunk = kListChunk,
                                               int maxTensors = kListTensors,
                                               int maxBlocks = kListBlocks) {
  std::vector<ListLaunch> launches;
  for (int t = 0; t < (int)sizes.size(); ++t) {
    int64_t chunks = (sizes[t] + chunk - 1) / chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      bool open = !launches.empty() && (int)launches.back().blocks.size() < maxBlocks;
      bool holds = open && launches.back().tensors.back() == t;
      if (open && !holds && (int)launches.back().tensors.size() == maxTensors)
        open = false;
      if (!open) {
        launches.emplace_back();
        holds = false;
      }
      ListLaunch &l = launches.back();
      if (!holds)
        l.tensors.push_back(t);
      l.blocks.push_back({(int)l.tensors.size() - 1, (int32_t)c});
    }
  }
  return launches;
}

/// Applies `rule` to every tensor of the list.
cudaError_t launchTensorList(UpdateRule rule, const UpdateHyper &h, const TensorList &list,
                             cudaStream_t stream);

} // namespace cuda
} // namespace graphc
