//===- OpAttrs.h - Attribute kinds checked against the op table --*- C++ -*-===//
//
// The schema of ir/OpAttrs.def as data, and the checks that hold every node
// and module to it. Readers (text IR, module files, ONNX) create nodes with
// whatever attributes a file holds; checkOpAttributes runs before any shape
// function reads them (inferResultTypes calls it, and so the parser, the
// builder and the verifier), so passes and kernels may read attributes with
// the Attrs getters without re-checking their kinds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Op.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace graphc {

class Attrs;

enum class AttrKind : unsigned char {
  Int,
  Count,
  Positive,
  Bool,
  Float,
  Bound,
  String,
  DType,
  Ints,
  Counts,
  Positives,
  Floats,
  Strings,
  Tensor,
};

/// "an integer", "a list of positive integers", ... (for messages).
llvm::StringRef describeKind(AttrKind k);

struct AttrSpec {
  llvm::StringRef name;
  AttrKind kind;
  bool required;
};

/// The rows of `op` in OpAttrs.def, in table order.
llvm::ArrayRef<AttrSpec> attrSpecs(Op op);
/// The row for `name` on `op` (or one any op may carry), or null.
const AttrSpec *findAttrSpec(Op op, llvm::StringRef name);

/// Every attribute in `attrs` is known to `op`, of its kind, and every
/// required one is present; the error, made by `fail` (which names the
/// node), names the attribute.
llvm::Error checkOpAttributes(Op op, const Attrs &attrs,
                              llvm::function_ref<llvm::Error(const llvm::Twine &)> fail);
/// The meta keys graphc reads have their kinds (others pass unchecked).
llvm::Error checkModuleMeta(const Attrs &meta);

} // namespace graphc
