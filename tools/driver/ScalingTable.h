//===- ScalingTable.h - graphc simulate's scaling table, printed -*- C++ -*-===//
//
// The rows passes/strategy/ScalingTable.h predicts, as `graphc simulate
// --gpus LIST` prints them, with published figures for orientation.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/ScalingTable.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

void printScalingTable(llvm::ArrayRef<ScalingRow> rows, const ScalingRequest &scaling,
                       llvm::raw_ostream &os);

} // namespace graphc
