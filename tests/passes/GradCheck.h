//===- GradCheck.h - Finite-difference checks of gradient rules -*- C++ -*-===//
//
// A test builds a tiny graph on trainable variables with given values; check()
// reduces the chosen results to a scalar with a fixed random projection
// (loss = Σ_i sum(y_i · R_i)), measures d(loss)/d(param) by central
// differences on the forward graph, then runs the autodiff pass and evaluates
// the gradient nodes it built with runGraph. Everything runs in f32 on the
// CPU kernels, so steps are 1e-2 (1e-3 near kinks) and the tolerance is
// relative (1e-2) with an absolute floor scaled by the largest gradient.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "kernels/KernelRunner.h"

#include <memory>
#include <string>

namespace graphc::passtest {

struct GradCheckOptions {
  double step = 1e-2;
  double rtol = 1e-2;
  double atol = 2e-3; ///< times max(1, largest |gradient| of the variable)
  /// Scales every analytic gradient before comparing; only for the test that
  /// shows the check can fail.
  double corrupt = 1.0;
};

class GradCheck {
public:
  explicit GradCheck(llvm::StringRef name, uint64_t seed = 1);

  Builder &b() { return b_; }
  Module &module() { return *m_; }

  /// A trainable variable holding `value`.
  Value *param(const std::string &name, Tensor value);
  /// A non-trainable variable (running statistics) holding `value`.
  Value *state(const std::string &name, Tensor value);
  /// A graph input fed with `value` (labels, indices).
  Value *input(const std::string &name, Tensor value);

  /// Standard normal values.
  Tensor normal(llvm::ArrayRef<int64_t> dims);
  /// Uniform in [lo, hi).
  Tensor uniform(llvm::ArrayRef<int64_t> dims, double lo, double hi);
  /// Uniform in [-hi, hi) but at least `margin` away from every point in `kinks`.
  Tensor awayFrom(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<double> kinks, double margin,
                  double hi = 1.5);
  /// Distinct values (a shuffled ramp with gaps of `gap`), for max pooling.
  Tensor distinct(llvm::ArrayRef<int64_t> dims, double gap = 0.05);

  /// Runs the check; failures are reported with ADD_FAILURE naming the
  /// variable and element.
  void check(llvm::ArrayRef<Value *> results, GradCheckOptions opts = {});

private:
  llvm::Expected<double> loss();

  std::unique_ptr<Module> m_;
  Builder b_;
  uint64_t seed_;
  uint64_t draws_ = 0;
  TensorVariables vars_;
  llvm::StringMap<Tensor> inputs_;
  std::vector<std::string> params_;
};

} // namespace graphc::passtest
