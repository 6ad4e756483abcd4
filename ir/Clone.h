//===- Clone.h - Deep copies of modules and graphs ---------------*- C++ -*-===//
//
// cloneModule copies everything: meta, variables (data shared copy-on-write
// is not attempted: tensors are cloned), graphs with names, attributes and
// placement. graphrun uses it to derive the training and the inference module
// from one imported model; tests use it to compare a pass's input and output.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include <memory>

namespace graphc {

/// A deep copy. Variable data is shared when `shareData` (tensors are
/// reference-counted and immutable in the compiler), else cloned.
std::unique_ptr<Module> cloneModule(const Module &m, bool shareData = true);

/// Appends a copy of `src`'s nodes to `dst` (names must not collide);
/// returns the copies of src's outputs.
std::vector<Value *> cloneGraphInto(const Graph &src, Graph &dst);

} // namespace graphc
