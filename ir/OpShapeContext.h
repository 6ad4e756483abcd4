//===- OpShapeContext.h - What the shape functions share ---------*- C++ -*-===//
//
// Private to ir/: the context each infer<Op> reads (the node, its operands'
// types, its attributes) and the checks they share. The shape functions live
// in two files by op family: OpShapes.cpp (structure, elementwise, layers,
// data movement, and the dispatch inferResultTypes) and OpShapesTraining.cpp
// (training forms, gradients, updates, collectives).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/AttributeText.h"
#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"

namespace graphc::shapes {

using Types = llvm::SmallVector<TensorType, 2>;
using Result = llvm::Expected<Types>;

struct Ctx {
  const Node &n;
  /// The operands' types, read in place (shape functions run in every
  /// verification; copying each operand's type was a good part of it).
  llvm::SmallVector<const TensorType *, 4> in;

  const TensorType &operator[](unsigned i) const { return *in[i]; }
  const Attrs &attrs() const { return n.attrs(); }
  /// A string attribute read in place; "" when absent (its kind is checked
  /// before any shape function runs).
  llvm::StringRef string(llvm::StringRef name) const {
    const Attribute *a = attrs().find(name);
    const std::string *s = a ? std::get_if<std::string>(a) : nullptr;
    return s ? llvm::StringRef(*s) : llvm::StringRef();
  }
  /// A list of strings read in place; empty when absent.
  llvm::ArrayRef<std::string> strings(llvm::StringRef name) const {
    const Attribute *a = attrs().find(name);
    const Strings *s = a ? std::get_if<Strings>(a) : nullptr;
    return s ? llvm::ArrayRef<std::string>(*s) : llvm::ArrayRef<std::string>();
  }
  llvm::Error fail(const llvm::Twine &msg) const { return nodeError(n, msg); }
  /// Operand i as messages name it: its value, the node producing it when that
  /// is named differently, and its type (a mismatch names both nodes).
  std::string from(unsigned i) const {
    const Value *v = n.operand(i);
    // Appended piece by piece: GCC 12 warns wrongly about "'" + std::string&&.
    std::string s = "'";
    s.append(printable(v->name()));
    s.append("'");
    if (v->producer()->name() != v->name()) {
      s.append(" from node '");
      s.append(printable(v->producer()->name()));
      s.append("'");
    }
    s.append(" (");
    s.append(toString(*in[i]));
    s.append(")");
    return s;
  }
  int64_t axis(int64_t a, size_t rank) const { return a < 0 ? a + (int64_t)rank : a; }
};

inline Types one(TensorType t) {
  return Types{std::move(t)};
}

/// A float attribute (its default when absent) lies in [lo, hi], or in
/// [lo, hi) when `openHigh`; the kind (a finite number) is checked already.
inline llvm::Error inRange(const Ctx &c, llvm::StringRef name, double dflt, double lo, double hi,
                    bool openHigh = false) {
  double v = c.attrs().getFloat(name, dflt);
  if (v >= lo && (openHigh ? v < hi : v <= hi))
    return llvm::Error::success();
  auto bound = [](double d) {
    std::string s = formatDouble(d);
    return llvm::StringRef(s).endswith(".0") ? s.substr(0, s.size() - 2) : s;
  };
  return c.fail("attribute '" + name + "' is " + formatDouble(v) + ", outside [" + bound(lo) +
                ", " + bound(hi) + (openHigh ? ")" : "]"));
}

inline llvm::Error needRank(const Ctx &c, unsigned i, size_t rank) {
  if (c[i].rank() == rank)
    return llvm::Error::success();
  return c.fail("operand " + llvm::Twine(i) + " " + c.from(i) + " must have rank " +
                llvm::Twine(rank));
}

inline llvm::Error sameDType(const Ctx &c, unsigned i, unsigned j) {
  if (c[i].dtype == c[j].dtype)
    return llvm::Error::success();
  return c.fail("operands " + c.from(i) + " and " + c.from(j) + " have different dtypes");
}

/// Operand j has operand i's dtype, or is f32 beside 16-bit data: mixed
/// precision keeps weights, biases and channel vectors f32
/// (passes/MixedPrecision.h).
inline llvm::Error sameOrF32(const Ctx &c, unsigned i, unsigned j) {
  if (c[j].dtype == DType::F32 && (c[i].dtype == DType::BF16 || c[i].dtype == DType::F16))
    return llvm::Error::success();
  return sameDType(c, i, j);
}

struct Window {
  Ints kernel, strides, pads, dilations;
  bool ceil = false;
};

// Shared by both files (OpShapes.cpp).
llvm::Expected<Window> readWindow(const Ctx &c, Ints kernel);
llvm::Expected<Dims> windowOutput(const Ctx &c, llvm::ArrayRef<int64_t> in, int64_t channels,
                                  const Window &w);
llvm::Error checkActivation(const Ctx &c, llvm::StringRef op);
llvm::Error checkChannelVectors(const Ctx &c, unsigned first, unsigned last);
/// Gelu's `approximate`: absent, none or tanh.
llvm::Error checkApproximate(const Ctx &c);
/// Operands first..last have x's shape from `axis` on (LayerNorm), axis is
/// after the batch, and epsilon is positive.
llvm::Error checkNormalizedShape(const Ctx &c, unsigned first, unsigned last);
Result inferPool(const Ctx &c);

// OpShapesTraining.cpp.
Result inferBatchNormTrain(const Ctx &c);
Result inferDropout(const Ctx &c);
Result inferDropoutTrain(const Ctx &c);
Result inferSoftmaxCrossEntropy(const Ctx &c);
Result inferConvGradData(const Ctx &c);
Result inferConvGradFilter(const Ctx &c);
Result inferAveragePoolGrad(const Ctx &c);
Result inferGatherGrad(const Ctx &c);
Result inferMaxPoolGrad(const Ctx &c);
Result inferBatchNormTrainGrad(const Ctx &c);
Result inferLayerNormGrad(const Ctx &c);
Result inferGeluGrad(const Ctx &c);
Result inferActivationGrad(const Ctx &c);
Result inferSoftmaxCrossEntropyGrad(const Ctx &c);
Result inferUpdate(const Ctx &c);
Result inferLossScaleStep(const Ctx &c);
Result inferCheckFinite(const Ctx &c);
Result inferAllSame(const Ctx &c);
Result inferReduceScatter(const Ctx &c);
Result inferAllGather(const Ctx &c);

} // namespace graphc::shapes
