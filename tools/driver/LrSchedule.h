//===- LrSchedule.h - The learning rate at a step ----------------*- C++ -*-===//
//
// --lr-schedule: constant, cosine over the run's planned steps, or
// step:EVERY_EPOCHS:FACTOR. The rate is a function of the run's global step
// (and epoch), never of how many steps this process ran, so a resumed run
// continues the schedule where it stopped.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace graphc {

class LrSchedule {
public:
  /// Errors: an unknown spelling. The base rate is checked by the caller.
  static llvm::Expected<LrSchedule> parse(llvm::StringRef spec, double base);
  /// The rate for global step `step` of a run of `totalSteps`, in `epoch`.
  double at(int64_t step, int64_t totalSteps, int64_t epoch) const;

private:
  enum Kind { Constant, Cosine, Step } kind_ = Constant;
  double base_ = 0, factor_ = 1;
  int64_t every_ = 1;
};

} // namespace graphc
