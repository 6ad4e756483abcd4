//===- Optimizers.cpp - Variable updates: Assign and the Apply* ops -------===//
//
// Update ops produce nothing; they write the variables their attributes name
// (`var`, and `slots` for optimizer state) through ctx.variables, in place.
// Operands are (grad, lr[, decision]): lr a scalar f32 fed each step, the
// decision below. weight_decay (default 0) adds wd * param to the gradient
// first, as PyTorch does.
//
//  ApplySGD      p -= lr * g
//  ApplyMomentum slots [buf]: buf = m * buf + g; p -= lr * buf, or with
//                nesterov p -= lr * (g + m * buf)   (PyTorch SGD, dampening 0)
//  ApplyRMSProp  slots [ms, mom] {decay, momentum, epsilon}: ms = decay * ms +
//                (1 - decay) * g^2; mom = momentum * mom + lr * g / sqrt(ms +
//                epsilon); p -= mom             (TensorFlow, Inception paper)
//  ApplyAdam     slots [m, v] {beta1, beta2, epsilon}: PyTorch Adam with bias
//                correction at t = step + 1
//  Assign        var = operand
//
// Sharded optimizer state (attributes rank, nranks): the gradient is piece
// `rank` of the variable (ir/Shards.h), the rule updates that piece of the
// replica in place, and the slots this device holds are that piece only.
//
// Under dynamic loss scaling an Apply* has a third operand, LossScaleStep's
// decision {apply, 1 / scale, skipped steps before}: a step whose gradients
// were not finite changes nothing, otherwise the gradient is multiplied by
// 1 / scale first, and Adam's bias correction counts the updates made (t =
// step + 1 - skipped), as PyTorch's per-parameter step does when GradScaler
// skips optimizer.step().
//
// Defaults follow the libraries they copy: momentum 0.9; decay 0.9, momentum
// 0, epsilon 1e-10 (TensorFlow's RMSProp); beta1 0.9, beta2 0.999, epsilon
// 1e-8 (PyTorch's Adam).
//
// Fusion: the updates of one rule share a fusionKey(), so the executor runs a
// device's adjacent updates through runGroup(): one parallel pass over all of
// their elements (a step's 284 inception_v3 updates, mostly small tensors
// that would each run on one thread, become one pass split across threads).
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "ir/Shards.h"
#include "kernels/cpu/PlainLoops.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace graphc {
namespace {

using namespace plain;

enum class Rule { SGD, Momentum, RMSProp, Adam };

/// Finds a variable's storage and checks that it fits the update.
llvm::Expected<void *> storage(const Node &n, KernelContext &ctx, const std::string &name,
                               const TensorView &like) {
  if (!ctx.variables)
    return nodeError(n, "no variable storage given");
  auto v = ctx.variables->variable(name);
  if (!v)
    return withContext(v.takeError(), "node '" + n.name() + "' (" + opName(n.op()) + ")");
  if (v->dtype != like.dtype || v->numElements() != like.numElements() ||
      v->layout != Layout::Plain)
    return nodeError(n, "variable '" + name + "' is " + toString(TensorType(v->dtype, v->shape)) +
                            ", the update is " + toString(TensorType(like.dtype, like.shape)));
  return v->data;
}

/// A sharded update's part of its variable (rank, nranks: ir/Shards.h): the
/// piece its gradient covers, inside the whole replica.
llvm::Expected<void *> pieceOf(const Node &n, KernelContext &ctx, const std::string &name,
                               const TensorView &grad, int64_t rank, int64_t nranks) {
  if (!ctx.variables)
    return nodeError(n, "no variable storage given");
  auto v = ctx.variables->variable(name);
  if (!v)
    return withContext(v.takeError(), "node '" + n.name() + "' (" + opName(n.op()) + ")");
  ShardRange piece = shardRange(v->numElements(), rank, nranks);
  if (v->dtype != grad.dtype || piece.size() != grad.numElements() || v->layout != Layout::Plain)
    return nodeError(n, "variable '" + name + "' is " + toString(TensorType(v->dtype, v->shape)) +
                            ", whose piece " + llvm::Twine(rank) + " of " + llvm::Twine(nranks) +
                            " is not the update's " + toString(TensorType(grad.dtype, grad.shape)));
  return static_cast<char *>(v->data) + piece.begin * (int64_t)dtypeSize(v->dtype);
}

/// Everything an update reads besides the tensors, by value so the loops
/// below keep it in registers and vectorise.
struct Hyper {
  float lr = 0, unscale = 1, wd = 0, momentum = 0, decay = 0, restOfDecay = 0, eps = 0;
  float beta1 = 0, beta2 = 0, rest1 = 0, rest2 = 0, stepSize = 0, invRootBc2 = 0;
  bool nesterov = false;
};

/// One rule over n elements; s0 and s1 are the slots the rule has.
template <Rule R>
void update(float *p, float *s0, float *s1, const float *g, int64_t n, const Hyper h) {
  if constexpr (R == Rule::SGD) {
    for (int64_t i = 0; i < n; ++i)
      p[i] -= h.lr * (g[i] * h.unscale + h.wd * p[i]);
  } else if constexpr (R == Rule::Momentum) {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] * h.unscale + h.wd * p[i];
      float buf = h.momentum * s0[i] + d;
      s0[i] = buf;
      p[i] -= h.lr * (h.nesterov ? d + h.momentum * buf : buf);
    }
  } else if constexpr (R == Rule::RMSProp) {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] * h.unscale + h.wd * p[i];
      float ms = h.decay * s0[i] + h.restOfDecay * d * d;
      float mom = h.momentum * s1[i] + h.lr * d / std::sqrt(ms + h.eps);
      s0[i] = ms;
      s1[i] = mom;
      p[i] -= mom;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] * h.unscale + h.wd * p[i];
      float m = h.beta1 * s0[i] + h.rest1 * d;
      float v = h.beta2 * s1[i] + h.rest2 * d * d;
      s0[i] = m;
      s1[i] = v;
      p[i] -= h.stepSize * m / (std::sqrt(v) * h.invRootBc2 + h.eps);
    }
  }
}

class AssignKernel : public Kernel {
public:
  AssignKernel(const Node &n, const KernelEnv &) : node_(&n), var_(n.attrs().getString("var")) {}

  llvm::Error run(KernelContext &ctx) override {
    auto to = storage(*node_, ctx, var_, ctx.inputs[0]);
    if (!to)
      return to.takeError();
    if (ctx.inputs[0].bytes() && *to != ctx.inputs[0].data)
      std::memcpy(*to, ctx.inputs[0].data, ctx.inputs[0].bytes());
    return llvm::Error::success();
  }

private:
  const Node *node_;
  std::string var_;
};

template <Rule R> class ApplyKernel : public Kernel {
public:
  ApplyKernel(const Node &n, const KernelEnv &)
      : node_(&n), var_(n.attrs().getString("var")), slots_(n.attrs().getStrings("slots")) {
    const Attrs &a = n.attrs();
    rank_ = a.getInt("rank", 0);
    nranks_ = a.getInt("nranks", 0);
    wd_ = (float)a.getFloat("weight_decay", 0);
    switch (R) {
    case Rule::SGD:
      break;
    case Rule::Momentum:
      momentum_ = (float)a.getFloat("momentum", 0.9);
      nesterov_ = a.getInt("nesterov", 0) != 0;
      break;
    case Rule::RMSProp:
      decay_ = (float)a.getFloat("decay", 0.9);
      restOfDecay_ = (float)(1 - a.getFloat("decay", 0.9));
      momentum_ = (float)a.getFloat("momentum", 0.0);
      epsilon_ = (float)a.getFloat("epsilon", 1e-10);
      break;
    case Rule::Adam:
      beta1_ = a.getFloat("beta1", 0.9);
      beta2_ = a.getFloat("beta2", 0.999);
      epsilon_ = (float)a.getFloat("epsilon", 1e-8);
      break;
    }
  }

  llvm::Error run(KernelContext &ctx) override {
    auto w = work(ctx);
    if (!w)
      return w.takeError();
    updateAll(*w);
    return llvm::Error::success();
  }

  /// Any two updates by one rule fuse: each keeps its own hyper-parameters.
  std::string fusionKey() const override { return "cpu.apply." + std::to_string((int)R); }

  /// One pass over every member's elements, split evenly across the threads
  /// whatever the tensors' sizes (most are too small to split alone).
  llvm::Error runGroup(llvm::ArrayRef<Kernel *> group,
                       llvm::ArrayRef<KernelContext *> contexts) override {
    assert(group.size() == contexts.size() && "one context per kernel");
    std::vector<Work> works;
    for (size_t i = 0; i < group.size(); ++i) {
      auto *k = dynamic_cast<ApplyKernel *>(group[i]);
      if (!k)
        return nodeError(*node_, "cannot run in one group with a kernel of another rule");
      auto w = k->work(*contexts[i]);
      if (!w)
        return w.takeError();
      works.push_back(*w);
    }
    updateAll(works);
    return llvm::Error::success();
  }

private:
  /// What one update touches, checked, and its hyper-parameters this step.
  struct Work {
    float *p = nullptr, *s0 = nullptr, *s1 = nullptr;
    const float *g = nullptr;
    int64_t n = 0;
    Hyper h;
  };

  llvm::Expected<Work> work(KernelContext &ctx) const {
    constexpr size_t needed = R == Rule::SGD ? 0 : R == Rule::Momentum ? 1 : 2;
    if (slots_.size() != needed)
      return nodeError(*node_, "needs " + llvm::Twine(needed) + " optimizer slots, has " +
                                   llvm::Twine(slots_.size()));
    const TensorView &grad = ctx.inputs[0];
    // Sharded: the gradient is this rank's piece, the slots hold only it.
    auto p = nranks_ ? pieceOf(*node_, ctx, var_, grad, rank_, nranks_)
                     : storage(*node_, ctx, var_, grad);
    if (!p)
      return p.takeError();
    Work w;
    float **slots[2] = {&w.s0, &w.s1};
    for (size_t i = 0; i < needed; ++i) {
      auto slot = storage(*node_, ctx, slots_[i], grad);
      if (!slot)
        return slot.takeError();
      *slots[i] = static_cast<float *>(*slot);
    }
    Hyper &h = w.h;
    h.lr = ctx.inputs[1].as<const float>()[0];
    h.wd = wd_;
    h.momentum = momentum_;
    h.nesterov = nesterov_;
    h.decay = decay_;
    h.restOfDecay = restOfDecay_;
    h.eps = epsilon_;
    double updatesBefore = (double)ctx.step;
    if (ctx.inputs.size() == 3) {
      const float *decision = ctx.inputs[2].as<const float>();
      if (decision[0] == 0)
        return Work{}; // the gradients overflowed: this step updates nothing
      h.unscale = decision[1];
      updatesBefore -= decision[2];
    }
    if constexpr (R == Rule::Adam) {
      double t = updatesBefore + 1;
      h.beta1 = (float)beta1_;
      h.beta2 = (float)beta2_;
      h.rest1 = (float)(1 - beta1_);
      h.rest2 = (float)(1 - beta2_);
      h.stepSize = (float)(h.lr / (1 - std::pow(beta1_, t)));
      h.invRootBc2 = (float)(1 / std::sqrt(1 - std::pow(beta2_, t)));
    }
    w.p = static_cast<float *>(*p);
    w.g = grad.as<const float>();
    w.n = grad.numElements();
    return w;
  }

  /// The elements of all `works` as one range, in contiguous pieces per
  /// thread; each element's arithmetic is the same as alone.
  static void updateAll(llvm::ArrayRef<Work> works) {
    std::vector<int64_t> start{0};
    for (const Work &w : works)
      start.push_back(start.back() + w.n);
    parallelFor(start.back(), kGrain, [&](int64_t begin, int64_t end) {
      size_t i = std::upper_bound(start.begin(), start.end(), begin) - start.begin() - 1;
      for (; i < works.size() && start[i] < end; ++i) {
        const Work &w = works[i];
        int64_t b = std::max(begin, start[i]) - start[i], e = std::min(end, start[i + 1]) - start[i];
        if (b < e)
          update<R>(w.p + b, w.s0 ? w.s0 + b : nullptr, w.s1 ? w.s1 + b : nullptr, w.g + b, e - b,
                    w.h);
      }
    });
  }

  const Node *node_;
  std::string var_;
  Strings slots_;
  // 1 - decay in double first: 1 - (float)0.999 is off by 1e-5 relative.
  float wd_ = 0, momentum_ = 0, decay_ = 0, restOfDecay_ = 0, epsilon_ = 0;
  bool nesterov_ = false;
  double beta1_ = 0, beta2_ = 0;
  int64_t rank_ = 0, nranks_ = 0; ///< nranks 0: the whole variable
};

} // namespace

void registerCpuOptimizerKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  r.add(Op::Assign, cpu, {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool},
        makeFactory<AssignKernel>());
  r.add(Op::ApplySGD, cpu, DType::F32, makeFactory<ApplyKernel<Rule::SGD>>());
  r.add(Op::ApplyMomentum, cpu, DType::F32, makeFactory<ApplyKernel<Rule::Momentum>>());
  r.add(Op::ApplyRMSProp, cpu, DType::F32, makeFactory<ApplyKernel<Rule::RMSProp>>());
  r.add(Op::ApplyAdam, cpu, DType::F32, makeFactory<ApplyKernel<Rule::Adam>>());
}

} // namespace graphc
