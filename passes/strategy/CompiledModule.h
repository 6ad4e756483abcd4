//===- CompiledModule.h - The parts of a compiled module ---------*- C++ -*-===//
//
// A training compile keeps the single-device forward model beside the step
// (graph "forward", Compile.h). These read a module back: whether it is a
// compiled training step or a placed one, its forward model, the part the
// executor runs, and whether that part fits its cluster's memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

/// True for a module the training pipeline already produced (a module file
/// from `graphc compile` or `graphc place`).
bool isCompiledForTraining(const Module &m);
/// True when its nodes carry assigned devices.
bool isPlaced(const Module &m);
/// The single-device forward model a compiled module keeps (graph "forward").
llvm::Expected<std::unique_ptr<Module>> forwardOf(const Module &compiled);
/// The module as the executor sees it: without the kept forward graph (for
/// reports and views).
std::unique_ptr<Module> runnablePart(const Module &compiled);
/// For a module placed on a cluster (`graphc place`, `graphrun train --gpus`
/// or `--cluster`): an error when a device of its runnable part needs more
/// than its memory (placement/analysis/MemoryNeeds.h), with the figures.
/// Success for anything else.
llvm::Error checkPlanFitsCluster(const Module &compiled);

} // namespace graphc
