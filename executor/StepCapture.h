//===- StepCapture.h - A whole step as one CUDA graph ------------*- C++ -*-===//
//
// ExecutorOptions::cudaGraphs: when every device of a step is a GPU, the
// executor captures the second step (the first one builds the kernels'
// lazily made state) into one CUDA graph over all devices' streams, and
// replays that graph for every later step instead of issuing each kernel
// from the host. The step's issue order, events and collectives are the
// same as when issuing eagerly: the capture records exactly what the device
// threads issue.
//
// A graph replays the same launches with the same arguments, so a step can
// be captured only when nothing the host computes per step reaches a kernel:
// stepCaptureRefusal says why a graph is refused (a host device, profiling,
// check-numerics, ops that use the step counter on the host, collectives
// across worker processes). Kernels that need the step read it from the
// device's own counter, which the graph advances (kernels/DeviceStep.h), and
// a batch that would be split on the host is staged on a GPU
// (BatchStaging.h), so inception_v3's training step on GPUs is capturable.
// Under CudaGraphs::Auto a refused or failed capture runs the step eagerly
// and the executor says why (Executor::cudaGraphNote); under On it is an
// error.
//
// The interface is CUDA-free so the executor includes it in every build; the
// implementation (executor/cuda/CudaStepGraph.cpp) exists only with the CUDA
// backend, which creates it for the executor (DeviceBackend::createStepCapture).
// The refusal rules (executor/cuda/StepCaptureRefusal.cpp) build everywhere.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace graphc {

class Graph;

/// ExecutorOptions::cudaGraphs.
enum class CudaGraphs : unsigned char {
  Off,  ///< every step issued from the host
  Auto, ///< captured where the step allows it; otherwise issued, and why
  On,   ///< captured, or an error that says why not
};

/// "off", "auto", "on"; anything else is an error naming the three.
llvm::Expected<CudaGraphs> parseCudaGraphs(llvm::StringRef s);
llvm::StringRef cudaGraphsName(CudaGraphs g);

class StepCapture {
public:
  virtual ~StepCapture() = default;
  /// Before the devices issue the step to capture.
  virtual llvm::Error begin() = 0;
  /// After every device issued (and "synchronized") the step: ends the
  /// capture and instantiates the graph; nothing has run yet.
  virtual llvm::Error finish() = 0;
  /// A failed capture: ends it and puts the devices back to eager issue.
  virtual void abandon() = 0;
  /// Runs the captured step and waits for it.
  virtual llvm::Error replay() = 0;
  virtual bool ready() const = 0;
};

/// The refusal where a host device takes part in the step.
inline constexpr llvm::StringLiteral kHostDeviceRefusal =
    "the step runs on a host device too (a graph holds GPU work only)";

/// Why the step of `g` over devices of `kinds` cannot be captured, or "".
std::string stepCaptureRefusal(const Graph &g, llvm::ArrayRef<DeviceKind> kinds, bool profile,
                               bool checkNumerics);

} // namespace graphc
