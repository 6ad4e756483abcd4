//===- BasicPasses.h - verify, infer-shapes, bind-batch, dce -----*- C++ -*-===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// Removes nodes that neither a graph output nor a variable update needs.
bool eliminateDeadCode(Module &m);

void registerBasicPasses(PassRegistry &r);

} // namespace graphc
