//===- GradCheck.cpp - Finite-difference checks of gradient rules -----------===//

#include "GradCheck.h"

#include "ir/Printer.h"
#include "ir/Random.h"
#include "ir/Verifier.h"
#include "passes/autodiff/Autodiff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace graphc::passtest {

GradCheck::GradCheck(llvm::StringRef name, uint64_t seed)
    : m_(std::make_unique<Module>(name.str())), b_(m_->main()), seed_(seed ^ stableHash(name)) {}

Value *GradCheck::param(const std::string &name, Tensor value) {
  Variable v;
  v.name = name;
  v.type = value.type();
  v.kind = VarKind::Param;
  vars_.tensors[name] = value;
  params_.push_back(name);
  return b_.newVariable(std::move(v));
}

Value *GradCheck::state(const std::string &name, Tensor value) {
  Variable v;
  v.name = name;
  v.type = value.type();
  v.kind = VarKind::State;
  vars_.tensors[name] = value;
  return b_.newVariable(std::move(v));
}

Value *GradCheck::input(const std::string &name, Tensor value) {
  inputs_[name] = value;
  return b_.input(name, value.type());
}

Tensor GradCheck::normal(llvm::ArrayRef<int64_t> dims) {
  RandomStream r(seed_, ++draws_);
  Tensor t(TensorType(DType::F32, dims));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.set(i, r.normal());
  return t;
}

Tensor GradCheck::uniform(llvm::ArrayRef<int64_t> dims, double lo, double hi) {
  RandomStream r(seed_, ++draws_);
  Tensor t(TensorType(DType::F32, dims));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.set(i, lo + (hi - lo) * r.uniform());
  return t;
}

Tensor GradCheck::awayFrom(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<double> kinks,
                           double margin, double hi) {
  RandomStream r(seed_, ++draws_);
  Tensor t(TensorType(DType::F32, dims));
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v;
    do
      v = hi * (2 * r.uniform() - 1);
    while (llvm::any_of(kinks, [&](double k) { return std::abs(v - k) < margin; }));
    t.set(i, v);
  }
  return t;
}

Tensor GradCheck::distinct(llvm::ArrayRef<int64_t> dims, double gap) {
  RandomStream r(seed_, ++draws_);
  Tensor t(TensorType(DType::F32, dims));
  std::vector<int64_t> order(t.numElements());
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[r.next() % i]);
  double offset = gap * (double)order.size() / 2;
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.set(i, gap * (double)order[i] - offset);
  return t;
}

llvm::Expected<double> GradCheck::loss() {
  auto out = runGraph(m_->main(), inputs_, vars_);
  if (!out)
    return out.takeError();
  return (*out)[0].at(0);
}

void GradCheck::check(llvm::ArrayRef<Value *> results, GradCheckOptions opts) {
  Graph &g = m_->main();
  // loss = Σ sum(y_i · R_i), R_i fixed and random.
  llvm::SmallVector<Value *, 2> terms;
  for (Value *y : results) {
    Value *r = b_.constant(normal(y->type().shape), "projection");
    Attrs a;
    a.set("keepdims", int64_t(0));
    terms.push_back(b_.create(Op::ReduceSum, {b_.create(Op::Mul, {y, r})}, a, "term"));
  }
  Value *total = terms.size() == 1 ? terms[0] : b_.create(Op::AddN, terms, {}, "loss");
  g.setOutputs({total});
  if (auto e = verify(*m_)) {
    ADD_FAILURE() << "forward graph: " << llvm::toString(std::move(e));
    return;
  }

  // Central differences on the forward graph.
  auto evaluate = [&](double &value) {
    auto l = loss();
    if (!l) {
      ADD_FAILURE() << "forward evaluation failed: " << llvm::toString(l.takeError());
      return false;
    }
    value = *l;
    return true;
  };
  std::vector<std::vector<double>> numeric;
  for (const std::string &p : params_) {
    Tensor &t = vars_.tensors[p];
    numeric.emplace_back(t.numElements());
    for (int64_t i = 0; i < t.numElements(); ++i) {
      double x0 = t.at(i), plus = 0, minus = 0;
      t.set(i, x0 + opts.step);
      double hi = t.at(i); // the step actually taken in f32
      if (!evaluate(plus))
        return;
      t.set(i, x0 - opts.step);
      double lo = t.at(i);
      if (!evaluate(minus))
        return;
      t.set(i, x0);
      numeric.back()[i] = (plus - minus) / (hi - lo);
    }
  }

  auto changed = differentiate(*m_);
  if (!changed) {
    ADD_FAILURE() << "autodiff: " << llvm::toString(changed.takeError());
    return;
  }
  if (auto e = verify(*m_)) {
    ADD_FAILURE() << "after autodiff: " << llvm::toString(std::move(e));
    return;
  }
  for (const std::string &p : params_) {
    Node *gn = g.findNode("grad/" + p);
    if (!gn || gn->attrs().getString("grad_of") != p) {
      ADD_FAILURE() << "no gradient node for '" << p << "'";
      return;
    }
    g.addOutput(gn->result());
  }
  auto out = runGraph(g, inputs_, vars_);
  if (!out) {
    ADD_FAILURE() << "evaluating the gradients: " << llvm::toString(out.takeError()) << "\n"
                  << toText(*m_);
    return;
  }

  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor &analytic = (*out)[k + 1];
    const std::vector<double> &fd = numeric[k];
    double scale = 1.0;
    for (double v : fd)
      scale = std::max(scale, std::abs(v));
    std::string bad;
    int count = 0;
    for (int64_t i = 0; i < analytic.numElements(); ++i) {
      double a = analytic.at(i) * opts.corrupt;
      double tol = opts.atol * scale + opts.rtol * std::abs(fd[i]);
      if (std::abs(a - fd[i]) <= tol || count++ >= 5)
        continue;
      bad += "\n  [" + std::to_string(i) + "]: autodiff " + std::to_string(a) +
             ", central difference " + std::to_string(fd[i]) + " (tolerance " +
             std::to_string(tol) + ")";
    }
    if (count)
      ADD_FAILURE() << "d loss / d " << params_[k] << ": " << count << " of "
                    << analytic.numElements() << " elements differ" << bad;
  }
}

} // namespace graphc::passtest
