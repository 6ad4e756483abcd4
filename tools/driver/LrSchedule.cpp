#include "tools/driver/LrSchedule.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

namespace graphc {

llvm::Expected<LrSchedule> LrSchedule::parse(llvm::StringRef spec, double base) {
  LrSchedule s;
  s.base_ = base;
  if (spec == "constant" || spec.empty())
    return s;
  if (spec == "cosine") {
    s.kind_ = Cosine;
    return s;
  }
  llvm::SmallVector<llvm::StringRef, 3> parts;
  spec.split(parts, ':');
  if (parts.size() == 3 && parts[0] == "step" && !parts[1].getAsInteger(10, s.every_) &&
      s.every_ > 0 && llvm::to_float(parts[2], s.factor_) && std::isfinite(s.factor_) &&
      s.factor_ > 0) {
    s.kind_ = Step;
    return s;
  }
  return makeError("bad --lr-schedule '" + spec +
                   "': expected constant, cosine or step:EVERY_EPOCHS:FACTOR (EVERY_EPOCHS and "
                   "FACTOR positive)");
}

double LrSchedule::at(int64_t step, int64_t totalSteps, int64_t epoch) const {
  switch (kind_) {
  case Constant:
    return base_;
  case Cosine:
    return totalSteps ? base_ * 0.5 * (1 + std::cos(M_PI * (double)step / totalSteps)) : base_;
  case Step:
    return base_ * std::pow(factor_, (double)(epoch / every_));
  }
  return base_;
}

} // namespace graphc
