//===- DropoutDevice.h - Dropout masks, bit for bit the CPU's ----*- C++ -*-===//
//
// DropoutTrain draws its mask on the device with the CPU kernel's streams
// (kernels/cpu/Dropout.cpp), so a mask is the same bits on either device:
// the tensor is cut into blocks of 4096 elements; block b draws from
// xoshiro256** seeded as RandomStream(seed, splitmix64(stepKey + b)), and
// each 64-bit draw decides two elements by its low and high 32-bit halves
// (dropped when below ratio * 2^32). The masks are computed on the device
// rather than on the host and copied: no host work or transfer per step, and
// a step stays one asynchronous launch.
//
// A per-sample mask (stochastic depth) is drawn as the element mask of its
// own N values, then applied by a second launch; the CPU kernel does the same.
//
// A block's draws are sequential, so one thread of a CUDA block draws 256 at
// a time into shared memory and all threads apply them; blocks of the mask
// run in parallel.
//
// The step's key (kernels/DropoutKey.h's dropoutStepKey) is derived on the
// device, from the step counter the device keeps in its memory
// (kernels/DeviceStep.h), when the kernel runs: a launch captured into a CUDA
// graph replays with the same arguments, and still draws the replayed step's
// masks. Kernels run outside an executor (the twin tests) pass the step as
// an argument instead.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/DeviceStep.h"
#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

/// Elements per independently seeded block of the mask (the CPU's).
inline constexpr int64_t kMaskBlock = 4096;

/// splitmix64 of a value (ir/Random.h's splitmix64 on a copy).
GRAPHC_HD uint64_t mix64(uint64_t x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// ir/Random.h's RandomStream (xoshiro256**), callable on the device.
struct Xoshiro {
  uint64_t s[4];

  GRAPHC_HD Xoshiro(uint64_t seed, uint64_t key) {
    uint64_t x = seed ^ (key * 0xd1342543de82ef95ull);
    for (uint64_t &w : s) {
      w = mix64(x);
      x += 0x9e3779b97f4a7c15ull;
    }
  }
  GRAPHC_HD static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  GRAPHC_HD uint64_t next() {
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

struct DropoutParams {
  uint64_t seed = 0;    ///< the run's seed
  uint64_t nodeKey = 0; ///< dropoutNodeKey: the name, the tower, the salt
  /// The device's step counter (KernelContext::deviceStep), read when the
  /// kernel runs; null: `step` below.
  const DeviceStep *counter = nullptr;
  DeviceStep step;        ///< the step, when there is no counter
  uint64_t threshold = 0; ///< ratio * 2^32
  float scale = 2;        ///< 1 / (1 - ratio), or 0
};

/// The step the mask is drawn for.
GRAPHC_HD DeviceStep maskStep(const DropoutParams &p) {
  return p.counter ? *p.counter : p.step;
}

/// dropoutStepKey (kernels/DropoutKey.h), callable on the device.
GRAPHC_HD uint64_t maskStepKey(uint64_t nodeKey, DeviceStep s) {
  return mix64(nodeKey ^ (s.step * 0xbf58476d1ce4e5b9ull) ^ (s.microStep * 0x94d049bb133111ebull));
}

/// The stream of mask block b at the step whose key is `stepKey`.
GRAPHC_HD Xoshiro maskStream(const DropoutParams &p, uint64_t stepKey, int64_t b) {
  return Xoshiro(p.seed, mix64(stepKey + (uint64_t)b));
}

/// The mask value element `half` (0: low, 1: high bits) of a draw decides.
GRAPHC_HD float maskValue(const DropoutParams &p, uint64_t draw, int half) {
  uint64_t bits = half ? draw >> 32 : draw & 0xffffffffull;
  return bits < p.threshold ? 0.0f : p.scale;
}

/// What a per-sample mask value read back from the mask tensor (0, or the
/// scale rounded to the tensor's type) multiplies its sample by: the float
/// scale itself, as the CPU kernel multiplies, so y keeps the CPU's bits
/// in f16 and bf16 too.
GRAPHC_HD float sampleScale(const DropoutParams &p, float stored) {
  return stored == 0.0f ? 0.0f : p.scale;
}

/// y = x * mask and the mask itself, n elements of dtype t (f32, f16, bf16;
/// numbered as ElemType).
cudaError_t launchDropoutTrain(int dtype, const DropoutParams &p, int64_t n, const void *x, void *y,
                               void *mask, cudaStream_t stream);

/// A per-sample (or per-tensor) mask (ir/DropoutMask.h): the mask's
/// `samples` values are drawn as an element mask of that many elements (one
/// launch), then each value scales n / samples consecutive elements of x
/// (a second launch on the same stream).
cudaError_t launchSampleDropoutTrain(int dtype, const DropoutParams &p, int64_t n, int64_t samples,
                                     const void *x, void *y, void *mask, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
