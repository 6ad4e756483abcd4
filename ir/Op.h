//===- Op.h - The op enum and its static table -----------------*- C++ -*-===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace graphc {

enum class Op : unsigned short {
#define GRAPHC_OP(Name, MinIn, MaxIn, NumOut, Traits) Name,
#include "ir/Ops.def"
};

/// The bits of Ops.def's Traits column (its header says what each means).
namespace optrait {
enum : unsigned {
  None = 0,
  View = 1u << 0,
  WritesVariable = 1u << 1,
  OptimizerUpdate = 1u << 2,
  ApplyRule = 1u << 3,
  Communication = 1u << 4,
  ActivationGradient = 1u << 5,
  Convolution = 1u << 6,
  Collective = 1u << 7,
};
} // namespace optrait

struct OpInfo {
  llvm::StringRef name;
  int minInputs;
  int maxInputs;   ///< -1: variadic
  int numOutputs;  ///< -1: decided by attributes
  unsigned traits; ///< optrait bits
};

const OpInfo &opInfo(Op op);
inline llvm::StringRef opName(Op op) {
  return opInfo(op).name;
}
std::optional<Op> parseOp(llvm::StringRef name);
unsigned numOps();

inline bool hasTrait(Op op, unsigned trait) {
  return (opInfo(op).traits & trait) != 0;
}
/// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the result is the operand's bytes.
inline bool isViewOp(Op op) {
  return hasTrait(op, optrait::View);
}
/// Ops that write variables (attribute `var`, and `slots`): Assign, Apply*
/// and LossScaleStep, the one of them with a result.
inline bool isVariableUpdate(Op op) {
  return hasTrait(op, optrait::WritesVariable);
}
/// The step's updates: the Apply rules and LossScaleStep.
inline bool isOptimizerUpdate(Op op) {
  return hasTrait(op, optrait::OptimizerUpdate);
}
/// ApplySGD, ApplyMomentum, ApplyRMSProp, ApplyAdam.
inline bool isApplyRule(Op op) {
  return hasTrait(op, optrait::ApplyRule);
}
/// Transfer and the collectives.
inline bool isCommunication(Op op) {
  return hasTrait(op, optrait::Communication);
}
/// AllReduce, ReduceScatter, AllGather: run by a collective engine.
inline bool isCollective(Op op) {
  return hasTrait(op, optrait::Collective);
}
/// ReluGrad, LeakyReluGrad, SigmoidGrad, TanhGrad, ClipGrad, ErfGrad, GeluGrad,
/// HardSigmoidGrad, HardSwishGrad.
inline bool isActivationGradient(Op op) {
  return hasTrait(op, optrait::ActivationGradient);
}

inline bool isConvolution(Op op) {
  return hasTrait(op, optrait::Convolution);
}

} // namespace graphc
