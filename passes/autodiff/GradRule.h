//===- GradRule.h - The gradient rule table ----------------------*- C++ -*-===//
//
// One rule per op, registered by family (ElementwiseGrad.cpp, NNGrad.cpp,
// ShapeGrad.cpp). A rule sees one forward node, the gradients of its results
// (null where a result got none) and which operands want a gradient; it builds
// the gradient nodes through the context's builder, which names them under
// `grad/<forward node name>/` and stamps the forward node's tower and requested
// device, and hands back one gradient per operand it was asked for.
//
// An op is either ruled, explicitly marked "no gradient" (it passes none to
// its operands), or absent: differentiating through an absent op is a hard
// error naming the op and the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>

namespace graphc {

class GradContext {
public:
  GradContext(Node &n, Builder &b, llvm::ArrayRef<Value *> resultGrads,
              llvm::ArrayRef<bool> operandNeeds)
      : node_(n), b_(b), dys_(resultGrads.begin(), resultGrads.end()),
        needs_(operandNeeds.begin(), operandNeeds.end()), grads_(n.numOperands(), nullptr) {}

  Node &node() const { return node_; }
  Builder &b() const { return b_; }
  const Attrs &attrs() const { return node_.attrs(); }

  Value *x(unsigned i) const { return node_.operand(i); }
  Value *y(unsigned i = 0) const { return node_.result(i); }
  /// The gradient of result i, or null when nothing downstream gave one.
  Value *dy(unsigned i = 0) const { return dys_[i]; }
  /// Whether operand i leads back to a trainable variable.
  bool needs(unsigned i) const { return needs_[i]; }

  /// Records the gradient of operand i (its type must equal the operand's).
  void setGrad(unsigned i, Value *g) { grads_[i] = g; }
  llvm::ArrayRef<Value *> grads() const { return grads_; }

  Value *create(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs = {},
                llvm::StringRef leaf = "") {
    return b_.create(op, operands, std::move(attrs), leaf);
  }
  llvm::Error fail(const llvm::Twine &msg) const;

private:
  Node &node_;
  Builder &b_;
  llvm::SmallVector<Value *, 2> dys_;
  llvm::SmallVector<bool, 4> needs_;
  llvm::SmallVector<Value *, 4> grads_;
};

using GradRule = std::function<llvm::Error(GradContext &)>;

class GradRegistry {
public:
  /// The registry holding every built-in rule.
  static const GradRegistry &global();

  void add(Op op, GradRule rule);
  /// Marks an op as passing no gradient to its operands.
  void addNoGradient(Op op);

  enum class Kind { Missing, NoGradient, Rule };
  Kind kind(Op op) const;
  /// The rule of an op of kind Rule.
  const GradRule &rule(Op op) const;

private:
  struct Entry {
    Kind kind = Kind::Missing;
    GradRule rule;
  };
  std::vector<Entry> entries_; // indexed by Op
};

void registerElementwiseGrads(GradRegistry &r);
void registerNNGrads(GradRegistry &r);
void registerShapeGrads(GradRegistry &r);

//===-- Helpers shared by the rule families -------------------------------===//

/// True for the floating-point dtypes gradients flow through.
bool isDifferentiable(DType t);

/// A scalar constant of dtype `t`.
Value *scalarConstant(Builder &b, double v, DType t, llvm::StringRef leaf = "const");

/// Undoes numpy broadcasting: sums `g` over the axes that broadcasting added
/// or stretched so that the result has `shape` (ReduceSum, then Reshape where
/// size-1 axes must come back). Returns `g` itself when shapes already agree.
Value *reduceToShape(Builder &b, Value *g, llvm::ArrayRef<int64_t> shape);

/// `v` reshaped to `shape` (returns `v` when it already has it).
Value *reshapeTo(Builder &b, Value *v, llvm::ArrayRef<int64_t> shape);

/// The attributes with `names` removed (rules copy a forward op's attributes
/// onto its gradient op).
Attrs withoutAttrs(const Attrs &a, llvm::ArrayRef<llvm::StringRef> names);

} // namespace graphc
