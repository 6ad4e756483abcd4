//===- PsRoute.h - One variable a parameter-server task holds ----*- C++ -*-===//
//
// The typed form of a plan's parameter-server shards (its `ps_variables` and
// `ps_owners`), as a worker's or a task's part of the plan sees one variable:
// which task holds it, its type, where its sum leaves the worker's step (a
// graph output) and enters the task's (an Input), and the optimizer slots
// the task holds with it. passes/PsPart.h writes the routes when it cuts a
// part; the parameter-server protocol (executor/dist/PsLayout.h) packs its
// messages by them. One type for both, so the two sides cannot drift.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"

#include <string>
#include <vector>

namespace graphc {

/// One updated variable, as a worker or a task sees it.
struct PsRoute {
  std::string var;
  unsigned task = 0;
  TensorType type;
  /// A worker: the graph output that carries its sum.
  unsigned output = 0;
  /// A task: the Input that takes the sum.
  std::string input;
  /// The optimizer slots held with it (its update's; of its type).
  std::vector<std::string> slots;
};

} // namespace graphc
