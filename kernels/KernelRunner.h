//===- KernelRunner.h - Run one node's CPU kernel on host tensors -*- C++ -*-===//
//
// For kernel tests and reference checks: allocates the node's results as host
// tensors, creates its CPU kernel and runs it once. Not the executor.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {

/// Variables held in host tensors, by name.
class TensorVariables : public VariableAccess {
public:
  llvm::StringMap<Tensor> tensors;
  llvm::Expected<TensorView> variable(llvm::StringRef name) override;
};

/// A view of a host tensor (plain layout).
TensorView viewOf(const Tensor &t);

llvm::Expected<std::vector<Tensor>> runNode(const Node &n, llvm::ArrayRef<Tensor> inputs,
                                            VariableAccess *variables = nullptr, uint64_t step = 0,
                                            uint64_t seed = 0);

/// Runs a whole graph node by node with runNode (no memory planning, no
/// parallelism): the slow, obvious evaluator that tests compare the executor
/// and the passes against. `inputs` feeds Input nodes by name; Variable nodes
/// read `variables`, which update ops write in place. Returns the graph's
/// outputs in order.
llvm::Expected<std::vector<Tensor>> runGraph(const Graph &g, const llvm::StringMap<Tensor> &inputs,
                                             TensorVariables &variables, uint64_t step = 0,
                                             uint64_t seed = 0);

} // namespace graphc
