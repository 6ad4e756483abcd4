//===- LossScale.cpp - Dynamic loss scaling: the check and the step -------===//
//
//  CheckFinite    0 when every element of every operand is finite, +inf
//                 otherwise (a NaN counts as not finite). Tested on the bits
//                 (an all-ones exponent), so no float exception and no
//                 reliance on -ffast-math's view of infinities.
//  LossScaleStep  reads the check and the variables {var = scale, slots =
//                 [good steps, skipped steps]}; returns the step's decision
//                 {apply (1 or 0), 1 / scale, skipped steps before this one}
//                 for the Apply* nodes, then moves the scale on: after a
//                 finite step good += 1, and at growth_interval good steps
//                 the scale doubles (good = 0); after a non-finite one the
//                 scale halves (never below 1), good = 0 and skipped += 1.
//                 PyTorch's GradScaler rule (growth 2, backoff 0.5), with
//                 TensorFlow's floor of 1.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/LossScaleRule.h"
#include "kernels/cpu/PlainLoops.h"

#include <atomic>
#include <cmath>
#include <limits>

namespace graphc {
namespace {

using namespace plain;

/// Whether any of the n elements of `data` is an infinity or a NaN.
template <typename Bits>
bool anyNonFinite(const Bits *data, int64_t n, Bits exponent) {
  std::atomic<bool> found{false};
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    bool any = false;
    for (int64_t i = begin; i < end; ++i)
      any |= (data[i] & exponent) == exponent;
    if (any)
      found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

class CheckFiniteKernel : public Kernel {
public:
  CheckFiniteKernel(const Node &n, const KernelEnv &) : node_(&n) {}

  llvm::Error run(KernelContext &ctx) override {
    bool bad = false;
    for (const TensorView &in : ctx.inputs) {
      if (bad)
        break;
      int64_t n = in.numElements();
      switch (in.dtype) {
      case DType::F32:
        bad = anyNonFinite(static_cast<const uint32_t *>(in.data), n, kF32Exponent);
        break;
      case DType::F16:
        bad = anyNonFinite(static_cast<const uint16_t *>(in.data), n, (uint16_t)kF16Exponent);
        break;
      case DType::BF16:
        bad = anyNonFinite(static_cast<const uint16_t *>(in.data), n, (uint16_t)kBF16Exponent);
        break;
      default:
        return nodeError(*node_, std::string("cannot check ") + dtypeName(in.dtype).data() +
                                     " values");
      }
    }
    ctx.outputs[0].as<float>()[0] = bad ? std::numeric_limits<float>::infinity() : 0.0f;
    return llvm::Error::success();
  }

private:
  const Node *node_;
};

class LossScaleStepKernel : public Kernel {
public:
  LossScaleStepKernel(const Node &n, const KernelEnv &)
      : node_(&n), vars_{n.attrs().getString("var")},
        interval_((float)n.attrs().getInt("growth_interval", kDefaultGrowthInterval)) {
    for (const std::string &s : n.attrs().getStrings("slots"))
      vars_.push_back(s);
  }

  llvm::Error run(KernelContext &ctx) override {
    if (!ctx.variables)
      return nodeError(*node_, "no variable storage given");
    float *state[3];
    for (size_t i = 0; i < 3; ++i) {
      auto v = ctx.variables->variable(vars_[i]);
      if (!v)
        return withContext(v.takeError(), "node '" + node_->name() + "' (LossScaleStep)");
      if (v->dtype != DType::F32 || v->numElements() != 1)
        return nodeError(*node_, "variable '" + vars_[i] + "' is not an f32 scalar");
      state[i] = static_cast<float *>(v->data);
    }
    float check = ctx.inputs[0].as<const float>()[0];
    lossScaleStep(check, interval_, *state[0], *state[1], *state[2], ctx.outputs[0].as<float>());
    return llvm::Error::success();
  }

private:
  const Node *node_;
  std::vector<std::string> vars_;
  float interval_;
};

} // namespace

void registerCpuLossScaleKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  r.add(Op::CheckFinite, cpu, {DType::F32, DType::F16, DType::BF16},
        makeFactory<CheckFiniteKernel>());
  r.add(Op::LossScaleStep, cpu, DType::F32, makeFactory<LossScaleStepKernel>());
}

} // namespace graphc
