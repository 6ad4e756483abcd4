//===- StepBreakdownTable.h - The step breakdown as text ---------*- C++ -*-===//
//
// One row per part of the step (executor/StepBreakdown.h), one column for
// the whole step and one per device, each cell milliseconds per step and
// the share of the step; a total row of 100%. With op rows, the kernels'
// time per op type follows the kernels row, slowest first.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/StepBreakdown.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

void printStepBreakdown(const StepBreakdown &b, llvm::raw_ostream &os, bool opRows);

} // namespace graphc
