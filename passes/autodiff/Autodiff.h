//===- Autodiff.h - Reverse-mode differentiation of the loss -----*- C++ -*-===//
//
// The `autodiff` pass. Guarantees, for the graph "main" whose output 0 is a
// scalar floating-point loss:
//
//  1. Every trainable variable (VarKind::Param) that the loss depends on gets
//     exactly one node `Identity` named `grad/<var>` with attribute
//     `grad_of = "<var>"`, whose result is d(loss)/d(var) summed over every
//     read of the variable (AddN when there are several). Later passes (towers,
//     gradient aggregation, the optimizer) find gradients by that attribute.
//     A parameter the loss does not depend on gets none (PyTorch leaves its
//     .grad unset and its optimizer skips it).
//  2. Gradient nodes live under `grad/<forward node name>/`, carry the forward
//     node's tower and requested device, and are appended after the forward
//     nodes in a valid topological order. The seed is a Constant 1.0 named
//     `grad/seed`.
//  3. Only nodes on a path from a trainable variable to the loss are
//     differentiated, only through floating-point values; integer and label
//     paths get no gradient. Such a node whose op has no rule is an error
//     naming the op and the node (GradRule.h); an op explicitly marked "no
//     gradient" stops the sweep there.
//
// Rules are one per op, split by family: ElementwiseGrad.cpp, NNGrad.cpp,
// ShapeGrad.cpp. Dead forward nodes are left to `dce`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// Adds the gradient of graph output 0 of "main" with respect to every
/// trainable variable it depends on (see above). Returns true.
llvm::Expected<bool> differentiate(Module &m);

/// Whether autodiff can differentiate through `op` (it has a rule or is
/// marked "no gradient").
bool hasGradientRule(Op op);

} // namespace graphc
