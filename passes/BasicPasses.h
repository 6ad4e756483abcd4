//===- BasicPasses.h - verify, infer-shapes, bind-batch, dce -----*- C++ -*-===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// Removes nodes that neither a graph output nor a variable update needs.
bool eliminateDeadCode(Module &m);
bool eliminateDeadCode(Graph &g);

/// Erases the nodes of `g` that none of `roots` needs (the roots stay, and
/// every producer of an operand of a node that stays); true if any went.
bool keepWhatRootsNeed(Graph &g, llvm::ArrayRef<const Node *> roots);

void registerBasicPasses(PassRegistry &r);

} // namespace graphc
