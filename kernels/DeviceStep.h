//===- DeviceStep.h - The step counter as a device keeps it -----*- C++ -*-===//
//
// A GPU device keeps the executor's step counter in its own memory, and
// kernels that derive per-step values (dropout's mask streams) read it there
// when they run instead of taking the step as a launch argument. So a step
// captured as a CUDA graph, which replays the same launches with the same
// arguments, still draws each replayed step's masks: the graph itself
// advances the counter at its end (executor/cuda/StepCounter.h).
//
// Plain C++ that nvcc and the host compiler both read.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace graphc {

/// KernelContext::step and microStep, as a device holds them.
struct DeviceStep {
  uint64_t step = 0;
  uint64_t microStep = 0;
};

inline bool operator==(const DeviceStep &a, const DeviceStep &b) {
  return a.step == b.step && a.microStep == b.microStep;
}
inline bool operator!=(const DeviceStep &a, const DeviceStep &b) {
  return !(a == b);
}

} // namespace graphc
