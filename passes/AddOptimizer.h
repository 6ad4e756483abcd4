//===- AddOptimizer.h - One update node per parameter ------------*- C++ -*-===//
//
// The `add-optimizer` pass. Guarantees, in graph "main":
//
//  1. An Input `lr` : f32[] (fed each step by the executor, so schedules and
//     learning-rate scaling need no recompile; an existing one is reused).
//  2. For every gradient node (attribute `grad_of = "<var>"`, see autodiff),
//     in module variable order, one update node `update/<var>` reading
//     (gradient, lr), with the attributes its kernel expects:
//       sgd       ApplySGD      {var, weight_decay}
//       momentum  ApplyMomentum {var, slots = [<var>.momentum], momentum,
//                                nesterov, weight_decay}          (PyTorch)
//       rmsprop   ApplyRMSProp  {var, slots = [<var>.rms, <var>.momentum],
//                                decay, momentum, epsilon}        (TensorFlow)
//       adam      ApplyAdam     {var, slots = [<var>.adam_m, <var>.adam_v],
//                                beta1, beta2, epsilon, weight_decay} (PyTorch)
//     Slots are new variables of kind Slot, the parameter's type, zeros.
//  3. Module meta "optimizer" = the optimizer's name.
//
// Weight decay applies to every parameter that has a gradient (PyTorch's
// default parameter group). Errors: an unknown optimizer; no gradient nodes
// (autodiff has not run); two gradient nodes for one variable; a slot name
// that is already taken.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> addOptimizer(Module &m, const OptimizerOptions &opts);

} // namespace graphc
