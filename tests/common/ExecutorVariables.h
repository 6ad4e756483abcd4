//===- ExecutorVariables.h - Every variable an executor holds -----*- C++ -*-===//
//
// What training tests compare after their steps: each variable's value, by
// name. Header-only, so only the suites that use it link the executor.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace graphc {

/// Every variable's value (first replica); a variable that cannot be read is
/// a test failure.
inline std::map<std::string, Tensor> variables(const Executor &ex) {
  std::map<std::string, Tensor> out;
  for (const std::string &name : ex.variableNames()) {
    auto t = ex.readVariable(name);
    if (t)
      out[name] = *t;
    else
      ADD_FAILURE() << llvm::toString(t.takeError());
  }
  return out;
}

} // namespace graphc
