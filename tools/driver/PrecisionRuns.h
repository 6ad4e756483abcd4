//===- PrecisionRuns.h - Where a 16-bit plan may run --------------*- C++ -*-===//
//
// graphrun refuses, in one line and before anything is allocated, a plan
// whose 16-bit layers land where they cannot run, or where they would run
// several times slower than f32. Where a node runs is the executor's
// answer (ExecutorOptions::deviceMap and physicalGpu: --emulate runs a
// plan's GPUs as CPU devices, or folds them onto fewer physical GPUs):
//
//  1. fp16: every f16 convolution is on a GPU of the plan, real or emulated
//     (CPU devices then compute f16 layers through their f32 kernels); on the
//     host it is refused (CPUs here have no f16 arithmetic).
//  2. bf16 on CPU devices (the host, or emulated GPUs): a bf16 convolution
//     there needs bf16 instructions (AVX512_BF16 or AMX) that oneDNN may use;
//     without them oneDNN emulates bf16, slower than f32.
//  3. bf16 on GPUs: every physical GPU that runs a bf16 value must have
//     compute capability 8.0 or newer (kernels/cuda/ComputeCapability.h).
//
// bf16 needs no loss scaling (f32's exponent range); fp16's is the tools'
// default (passes/LossScaling.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>

namespace graphc {

class Module;
struct ExecutorOptions;

/// What the rules ask of the machine (tests stand in for it).
struct PrecisionMachine {
  bool cpuHasBf16 = false; ///< oneDNN may use bf16 instructions here
  bool cpuHasAmx = false;  ///< oneDNN may use AMX here
  /// Why physical GPU `index` cannot compute in `dtype`, or "" (unset: none refuses).
  std::function<std::string(unsigned index, DType dtype)> gpuRefusal;

  /// This machine: its CPU within the ISA cap, and the device registry's GPUs.
  static PrecisionMachine here();
};

/// Rules 1-3 for `plan`, its nodes running where `exec` maps them.
llvm::Error checkPrecisionRuns(const Module &plan, const ExecutorOptions &exec,
                               const PrecisionMachine &machine = PrecisionMachine::here());

/// A note for a bf16 plan whose convolutions run on CPU devices of a CPU
/// with AMX, where oneDNN 2.6's bf16 convolutions ran slower than our fp32
/// ones (docs/performance.md); empty otherwise.
std::string precisionNote(const Module &plan, const ExecutorOptions &exec,
                          const PrecisionMachine &machine = PrecisionMachine::here());

} // namespace graphc
