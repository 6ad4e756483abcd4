//===- PsLayout.h - Where each task's variables lie in messages --*- C++ -*-===//
//
// The routes of a worker's or a task's part (ir/PsRoute.h, cut by
// passes/PsPart.h), grouped by task in route order: a request carries the
// sums of its task's variables in that order, a reply their values, a state
// each variable followed by its optimizer slots.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/PsRoute.h"

#include <cstdint>
#include <vector>

namespace graphc {

class PsLayout {
public:
  PsLayout(std::vector<PsRoute> routes, unsigned tasks);
  unsigned tasks() const { return (unsigned)byTask_.size(); }
  /// The routes of `task`'s variables, in route order.
  const std::vector<const PsRoute *> &of(unsigned task) const { return byTask_[task]; }
  /// Values of the task's variables (a request's sums, a reply's variables).
  int64_t values(unsigned task) const { return values_[task]; }
  /// Values of the task's variables and slots (its state).
  int64_t stateValues(unsigned task) const { return stateValues_[task]; }

private:
  std::vector<PsRoute> routes_;
  std::vector<std::vector<const PsRoute *>> byTask_;
  std::vector<int64_t> values_, stateValues_;
};

} // namespace graphc
