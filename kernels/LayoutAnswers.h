//===- LayoutAnswers.h - A kernel's layout answers, as data ------*- C++ -*-===//
//
// Kernel's layout questions (acceptsLayout, producesLayout, the preferred
// layouts, layoutFollowsOperands) answered once, from the node: the CUDA
// kernels compute theirs at creation from their node alone
// (kernels/cuda/GpuLayoutRules.h), so tests of the layout assignment can ask
// the same rules about a GPU plan on a machine without a GPU, through
// DeclaredLayoutKernel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

#include "llvm/ADT/SmallVector.h"

namespace graphc {

struct LayoutAnswers {
  /// Per operand and result, a bit (1 << Layout) per layout it may take;
  /// plain always.
  llvm::SmallVector<unsigned char, 4> operands, results;
  llvm::SmallVector<std::optional<Layout>, 4> preferOperands, preferResults;
  bool follows = false; ///< Kernel::layoutFollowsOperands

  /// Plain for every operand and result, no preference, not following.
  static LayoutAnswers plainOnly(const Node &n);
  /// What `k` (the kernel of `n`) answers.
  static LayoutAnswers of(const Kernel &k, const Node &n);

  bool accepts(unsigned i, Layout l) const { return operands[i] & bit(l); }
  bool produces(unsigned i, Layout l) const { return results[i] & bit(l); }
  void allowOperand(unsigned i, Layout l) { operands[i] |= bit(l); }
  void allowResult(unsigned i, Layout l) { results[i] |= bit(l); }

  static unsigned char bit(Layout l) { return (unsigned char)(1u << (unsigned)l); }
};

/// A kernel that answers the layout questions from LayoutAnswers and
/// computes nothing: the layout assignment's tests stand it in for kernels
/// that cannot be created where they run (a GPU's, without a GPU).
class DeclaredLayoutKernel : public Kernel {
public:
  explicit DeclaredLayoutKernel(LayoutAnswers answers) : answers_(std::move(answers)) {}
  llvm::Error run(KernelContext &) override;
  bool acceptsLayout(unsigned i, Layout l) const override { return answers_.accepts(i, l); }
  bool producesLayout(unsigned i, Layout l) const override { return answers_.produces(i, l); }
  std::optional<Layout> preferredOperandLayout(unsigned i) const override {
    return answers_.preferOperands[i];
  }
  std::optional<Layout> preferredResultLayout(unsigned i) const override {
    return answers_.preferResults[i];
  }
  bool layoutFollowsOperands() const override { return answers_.follows; }

private:
  LayoutAnswers answers_;
};

} // namespace graphc
