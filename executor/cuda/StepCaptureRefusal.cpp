//===- StepCaptureRefusal.cpp - When a step cannot be a CUDA graph --------===//
//
// Pure (no CUDA): the rules of StepCapture.h, tested without a GPU.
//
//===----------------------------------------------------------------------===//

#include "executor/StepCapture.h"

#include "ir/Module.h"

namespace graphc {

std::string stepCaptureRefusal(const Graph &g, llvm::ArrayRef<DeviceKind> kinds, bool profile,
                               bool checkNumerics) {
#if !GRAPHC_HAVE_CUDA
  return "this build has no CUDA backend";
#endif
  for (DeviceKind k : kinds)
    if (k != DeviceKind::GPU)
      return "the step runs on a host device too (a graph holds GPU work only)";
  if (profile)
    return "profiling times every kernel from the host";
  if (checkNumerics)
    return "--check-numerics reads every result on the host";
  for (const Node *n : g.nodes()) {
    // Their kernels derive per-step values (the dropout stream, Adam's bias
    // correction) from the host's step counter, which a replay would freeze.
    if (n->op() == Op::DropoutTrain || n->op() == Op::ApplyAdam)
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
