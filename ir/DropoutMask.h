//===- DropoutMask.h - What one dropout mask value covers --------*- C++ -*-===//
//
// Dropout and DropoutTrain take attribute `mask`: absent, one mask value per
// element (nn.Dropout); "sample", one per sample along axis 0, the batch
// (stochastic depth, torchvision's mode "row", timm's drop_path); "tensor",
// one for the whole tensor (torchvision's mode "batch"). The mask has x's
// rank with 1 on every axis it does not vary along ([N,1,1,1] per sample,
// [1,1,1,1] per tensor), so y = x * mask broadcasts and the batch axis of a
// per-sample mask is x's (passes/Rebatch.h follows it like any other).
// The shape functions check the text (ir/OpShapesTraining.cpp); everything
// after them reads the enum through dropoutMaskOf().
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include <optional>

namespace graphc {

enum class DropoutMask : unsigned char {
  Element, ///< attribute absent: one value per element
  Sample,  ///< "sample": one value per index of axis 0
  Tensor,  ///< "tensor": one value for the whole tensor
};

/// The attribute's text as the enum; nullopt for an unknown word.
inline std::optional<DropoutMask> parseDropoutMask(llvm::StringRef s) {
  if (s.empty())
    return DropoutMask::Element;
  if (s == "sample")
    return DropoutMask::Sample;
  if (s == "tensor")
    return DropoutMask::Tensor;
  return std::nullopt;
}

/// The text form (empty for Element, which is written by leaving it out).
inline llvm::StringRef dropoutMaskName(DropoutMask m) {
  switch (m) {
  case DropoutMask::Element:
    return "";
  case DropoutMask::Sample:
    return "sample";
  case DropoutMask::Tensor:
    return "tensor";
  }
  return "";
}

/// The mask kind of a verified Dropout or DropoutTrain.
inline DropoutMask dropoutMaskOf(const Node &n) {
  auto m = parseDropoutMask(n.attrs().getString("mask"));
  assert(m && "the shape function refuses other mask kinds");
  return m.value_or(DropoutMask::Element);
}

/// The mask's shape for an input of shape `x`.
inline Dims dropoutMaskShape(llvm::ArrayRef<int64_t> x, DropoutMask m) {
  Dims shape(x.begin(), x.end());
  if (m == DropoutMask::Element)
    return shape;
  for (size_t i = 0; i < shape.size(); ++i)
    if (i > 0 || m == DropoutMask::Tensor)
      shape[i] = 1;
  return shape;
}

} // namespace graphc
