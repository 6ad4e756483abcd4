//===- StepCaptureRefusal.cpp - When a step cannot be a CUDA graph --------===//
//
// Pure (no CUDA): the modes and the rules of StepCapture.h, tested without a
// GPU.
//
//===----------------------------------------------------------------------===//

#include "executor/StepCapture.h"

#include "ir/Diagnostics.h"
#include "ir/Module.h"

namespace graphc {

llvm::Expected<CudaGraphs> parseCudaGraphs(llvm::StringRef s) {
  for (CudaGraphs g : {CudaGraphs::Off, CudaGraphs::Auto, CudaGraphs::On})
    if (s == cudaGraphsName(g))
      return g;
  return makeError("unknown CUDA graphs mode '" + s + "' (auto, on or off)");
}

llvm::StringRef cudaGraphsName(CudaGraphs g) {
  switch (g) {
  case CudaGraphs::Off:
    return "off";
  case CudaGraphs::Auto:
    return "auto";
  case CudaGraphs::On:
    return "on";
  }
  llvm_unreachable("CudaGraphs");
}

std::string stepCaptureRefusal(const Graph &g, llvm::ArrayRef<DeviceKind> kinds, bool profile,
                               bool checkNumerics) {
#if !GRAPHC_HAVE_CUDA
  return "this build has no CUDA backend";
#endif
  for (DeviceKind k : kinds)
    if (k != DeviceKind::GPU)
      return kHostDeviceRefusal.str();
  if (profile)
    return "profiling times every kernel from the host";
  if (checkNumerics)
    return "--check-numerics reads every result on the host";
  for (const Node *n : g.nodes()) {
    // Its kernel derives Adam's bias correction from the host's step
    // counter, which a replay would freeze. (DropoutTrain reads the device's
    // own counter, which the graph advances: kernels/DeviceStep.h.)
    if (n->op() == Op::ApplyAdam)
      return "node '" + n->name() + "' (" + opName(n->op()).str() +
             ") uses the step counter on the host";
    // Issued eagerly, each all-reduce across workers is timed against
    // --collective-timeout, and its communicator aborted when late.
    if (n->op() == Op::AllReduce && n->attrs().getInt("workers", 1) > 1)
      return "collective '" + n->attrs().getString("group") +
             "' spans workers (NCCL across processes is issued step by step)";
  }
  return "";
}

} // namespace graphc
