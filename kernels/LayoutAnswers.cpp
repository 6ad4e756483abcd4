//===- LayoutAnswers.cpp - A kernel's layout answers, as data -------------===//

#include "kernels/LayoutAnswers.h"

#include "ir/Diagnostics.h"

namespace graphc {

namespace {
constexpr Layout kLayouts[] = {Layout::Plain, Layout::Blocked, Layout::ChannelsLast};
}

LayoutAnswers LayoutAnswers::plainOnly(const Node &n) {
  LayoutAnswers a;
  a.operands.assign(n.numOperands(), bit(Layout::Plain));
  a.results.assign(n.numResults(), bit(Layout::Plain));
  a.preferOperands.assign(n.numOperands(), std::nullopt);
  a.preferResults.assign(n.numResults(), std::nullopt);
  return a;
}

LayoutAnswers LayoutAnswers::of(const Kernel &k, const Node &n) {
  LayoutAnswers a = plainOnly(n);
  for (Layout l : kLayouts) {
    for (unsigned i = 0; i < n.numOperands(); ++i)
      if (k.acceptsLayout(i, l))
        a.allowOperand(i, l);
    for (unsigned i = 0; i < n.numResults(); ++i)
      if (k.producesLayout(i, l))
        a.allowResult(i, l);
  }
  for (unsigned i = 0; i < n.numOperands(); ++i)
    a.preferOperands[i] = k.preferredOperandLayout(i);
  for (unsigned i = 0; i < n.numResults(); ++i)
    a.preferResults[i] = k.preferredResultLayout(i);
  a.follows = k.layoutFollowsOperands();
  return a;
}

llvm::Error DeclaredLayoutKernel::run(KernelContext &) {
  return makeError("a kernel that only declares its layouts was run");
}

} // namespace graphc
