//===- Op.h - The op enum and its static table -----------------*- C++ -*-===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace graphc {

enum class Op : unsigned short {
#define GRAPHC_OP(Name, MinIn, MaxIn, NumOut) Name,
#include "ir/Ops.def"
};

struct OpInfo {
  llvm::StringRef name;
  int minInputs;
  int maxInputs;  ///< -1: variadic
  int numOutputs; ///< -1: decided by attributes
};

const OpInfo &opInfo(Op op);
inline llvm::StringRef opName(Op op) { return opInfo(op).name; }
std::optional<Op> parseOp(llvm::StringRef name);
unsigned numOps();

/// Ops that write variables (attribute `var`, and `slots`): Assign, Apply*
/// and LossScaleStep, the one of them with a result.
bool isVariableUpdate(Op op);

} // namespace graphc
