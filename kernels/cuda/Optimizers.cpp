//===- Optimizers.cpp - Variable updates on CUDA, fused across tensors ----===//
//
// The CUDA twins of kernels/cpu/Optimizers.cpp: Assign (a device copy, any
// dtype) and ApplySGD / ApplyMomentum / ApplyRMSProp / ApplyAdam (f32), with
// the same attributes, defaults, slot checks and formulas, and the same
// third operand under dynamic loss scaling (LossScaleStep's decision). Storage comes
// from ctx.variables, which on a CUDA device hands out device pointers; the
// learning rate stays on the device (each update reads its own lr operand).
//
// Fusion: every Apply* kernel runs through the tensor-list kernel
// (OptimizerDevice.h), alone or in a group. Its fusionKey() is the rule and
// the exact hyper-parameters, so the executor may hand any set of a
// device's updates with one key to runGroup(), which updates them all in
// ceil(chunks / 320) launches instead of one launch per parameter.
//
//===----------------------------------------------------------------------===//

#include "ir/Shards.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/KernelPlans.h"
#include "kernels/cuda/OptimizerDevice.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace graphc {

cuda::UpdateRule cuda::updateRuleOf(Op op) {
  switch (op) {
  case Op::ApplyMomentum:
    return UpdateRule::Momentum;
  case Op::ApplyRMSProp:
    return UpdateRule::RMSProp;
  case Op::ApplyAdam:
    return UpdateRule::Adam;
  default:
    return UpdateRule::SGD;
  }
}

namespace {

using namespace cuda;

/// Finds a variable's device storage and checks that it fits the update.
llvm::Expected<void *> storage(KernelContext &ctx, const std::string &name,
                               const TensorView &like) {
  if (!ctx.variables)
    return makeError("no variable storage given");
  auto v = ctx.variables->variable(name);
  if (!v)
    return v.takeError();
  if (v->dtype != like.dtype || v->numElements() != like.numElements() ||
      v->layout != Layout::Plain)
    return makeError("variable '" + name + "' is " + toString(TensorType(v->dtype, v->shape)) +
                     ", the update is " + toString(TensorType(like.dtype, like.shape)));
  return v->data;
}

/// A sharded update's piece of its variable (rank, nranks: ir/Shards.h),
/// inside the whole replica.
llvm::Expected<void *> pieceOf(KernelContext &ctx, const std::string &name, const TensorView &grad,
                               int64_t rank, int64_t nranks) {
  if (!ctx.variables)
    return makeError("no variable storage given");
  auto v = ctx.variables->variable(name);
  if (!v)
    return v.takeError();
  ShardRange piece = shardRange(v->numElements(), rank, nranks);
  if (v->dtype != grad.dtype || piece.size() != grad.numElements() || v->layout != Layout::Plain)
    return makeError("variable '" + name + "' is " + toString(TensorType(v->dtype, v->shape)) +
                     ", whose piece " + llvm::Twine(rank) + " of " + llvm::Twine(nranks) +
                     " is not the update's " + toString(TensorType(grad.dtype, grad.shape)));
  return static_cast<char *>(v->data) + piece.begin * (int64_t)dtypeSize(v->dtype);
}

class AssignKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    auto to = storage(ctx, node().attrs().getString("var"), ctx.inputs[0]);
    if (!to)
      return to.takeError();
    return copyOnDevice(*to, ctx.inputs[0].data, ctx.inputs[0].bytes(), streamOf(ctx));
  }
};

size_t slotsOf(UpdateRule r) {
  return r == UpdateRule::SGD ? 0 : r == UpdateRule::Momentum ? 1 : 2;
}

class ApplyKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    const Attrs &a = node().attrs();
    rule_ = updateRuleOf(node().op());
    var_ = a.getString("var");
    slots_ = a.getStrings("slots");
    rank_ = a.getInt("rank", 0);
    nranks_ = a.getInt("nranks", 0);
    h_.wd = (float)a.getFloat("weight_decay", 0);
    switch (rule_) {
    case UpdateRule::SGD:
      break;
    case UpdateRule::Momentum:
      h_.momentum = (float)a.getFloat("momentum", 0.9);
      h_.nesterov = a.getInt("nesterov", 0) != 0;
      break;
    case UpdateRule::RMSProp:
      h_.decay = (float)a.getFloat("decay", 0.9);
      // 1 - decay in double first: 1 - (float)0.999 is off by 1e-5 relative.
      h_.restOfDecay = (float)(1 - a.getFloat("decay", 0.9));
      h_.momentum = (float)a.getFloat("momentum", 0.0);
      h_.eps = (float)a.getFloat("epsilon", 1e-10);
      break;
    case UpdateRule::Adam:
      beta1_ = a.getFloat("beta1", 0.9);
      beta2_ = a.getFloat("beta2", 0.999);
      h_.beta1 = (float)beta1_;
      h_.beta2 = (float)beta2_;
      h_.rest1 = (float)(1 - beta1_);
      h_.rest2 = (float)(1 - beta2_);
      h_.eps = (float)a.getFloat("epsilon", 1e-8);
      break;
    }
    if (slots_.size() != slotsOf(rule_))
      return makeError("needs " + llvm::Twine(slotsOf(rule_)) + " optimizer slots, has " +
                       llvm::Twine(slots_.size()));
    if (operandType(0).dtype != DType::F32)
      return makeError("updates f32 variables only");
    return llvm::Error::success();
  }

  std::string fusionKey() const override {
    std::string key;
    llvm::raw_string_ostream os(key);
    os << "cuda.apply." << (int)rule_ << ":" << llvm::format_hex(bitsOf(h_.wd), 10) << ":"
       << llvm::format_hex(bitsOf(h_.momentum), 10) << ":" << h_.nesterov << ":"
       << llvm::format_hex(bitsOf(h_.decay), 10) << ":"
       << llvm::format_hex(bitsOf(h_.restOfDecay), 10) << ":"
       << llvm::format_hex(bitsOf(h_.eps), 10) << ":" << llvm::format("%a", beta1_) << ":"
       << llvm::format("%a", beta2_);
    return os.str();
  }

  llvm::Error runGroup(llvm::ArrayRef<Kernel *> group,
                       llvm::ArrayRef<KernelContext *> contexts) override {
    return updateAll(group, contexts, /*nameNodes=*/true);
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    Kernel *self = this;
    KernelContext *c = &ctx;
    return updateAll(self, c, /*nameNodes=*/false); // run() names the node
  }

private:
  /// The tensor-list launches for a group; errors name the failing node
  /// when `nameNodes`.
  llvm::Error updateAll(llvm::ArrayRef<Kernel *> group, llvm::ArrayRef<KernelContext *> contexts,
                        bool nameNodes) {
    assert(group.size() == contexts.size() && !group.empty() && "one context per kernel");
    auto named = [&](const Node &n, llvm::Error e) {
      return nameNodes ? inNode(n, std::move(e)) : std::move(e);
    };
    std::string key = fusionKey();
    std::vector<ListTensor> tensors;
    for (size_t i = 0; i < group.size(); ++i) {
      auto *k = dynamic_cast<ApplyKernel *>(group[i]);
      if (!k || k->fusionKey() != key)
        return named(node(), makeError("cannot fuse with a kernel of another update rule or "
                                       "other hyper-parameters"));
      if (contexts[i]->step != contexts[0]->step || contexts[i]->stream != contexts[0]->stream)
        return named(k->node(), makeError("a fused update group spans steps or streams"));
      auto t = k->tensor(*contexts[i]);
      if (!t)
        return named(k->node(), t.takeError());
      tensors.push_back(*t);
    }
    UpdateHyper h = hyperAt(contexts[0]->step);
    std::vector<int64_t> sizes;
    for (const ListTensor &t : tensors)
      sizes.push_back(t.n);
    for (const ListLaunch &l : planTensorLists(sizes)) {
      TensorList list;
      for (size_t i = 0; i < l.tensors.size(); ++i)
        list.tensors[i] = tensors[l.tensors[i]];
      list.blocks = (int)l.blocks.size();
      for (size_t b = 0; b < l.blocks.size(); ++b) {
        list.blockTensor[b] = (uint8_t)l.blocks[b].first;
        list.blockChunk[b] = l.blocks[b].second;
      }
      if (auto e = checkLaunch(launchTensorList(rule_, h, list, streamOf(*contexts[0]))))
        return named(node(), std::move(e));
    }
    return llvm::Error::success();
  }

  static llvm::Error checkLaunch(cudaError_t status) {
    GRAPHC_CUDA_TRY(status);
    return llvm::Error::success();
  }

  /// This update's tensors in the context.
  llvm::Expected<ListTensor> tensor(KernelContext &ctx) {
    const TensorView &grad = ctx.inputs[0];
    ListTensor t;
    // Sharded: the gradient is this rank's piece, the slots hold only it.
    auto p = nranks_ ? pieceOf(ctx, var_, grad, rank_, nranks_) : storage(ctx, var_, grad);
    if (!p)
      return p.takeError();
    t.param = static_cast<float *>(*p);
    float **slot[2] = {&t.slot0, &t.slot1};
    for (size_t i = 0; i < slots_.size(); ++i) {
      auto s = storage(ctx, slots_[i], grad);
      if (!s)
        return s.takeError();
      *slot[i] = static_cast<float *>(*s);
    }
    t.grad = grad.as<const float>();
    t.lr = ctx.inputs[1].as<const float>();
    if (ctx.inputs.size() == 3)
      t.decision = ctx.inputs[2].as<const float>();
    t.n = grad.numElements();
    return t;
  }

  /// The hyper-parameters with Adam's bias corrections at t = step + 1.
  UpdateHyper hyperAt(uint64_t step) const {
    UpdateHyper h = h_;
    if (rule_ == UpdateRule::Adam) {
      double t = (double)step + 1;
      h.adamBias1 = 1 - std::pow(beta1_, t);
      h.invRootBias2 = (float)(1 / std::sqrt(1 - std::pow(beta2_, t)));
      h.beta1d = beta1_;
      h.beta2d = beta2_;
      h.stepPlus1 = t;
    }
    return h;
  }

  UpdateRule rule_ = UpdateRule::SGD;
  std::string var_;
  Strings slots_;
  UpdateHyper h_;
  double beta1_ = 0, beta2_ = 0;
  int64_t rank_ = 0, nranks_ = 0; ///< nranks 0: the whole variable
};

} // namespace

void registerCudaOptimizerKernels(KernelRegistry &r) {
  const auto gpu = DeviceKind::GPU;
  r.add(Op::Assign, gpu, {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool},
        cudaFactory<AssignKernel>());
  for (Op op : {Op::ApplySGD, Op::ApplyMomentum, Op::ApplyRMSProp, Op::ApplyAdam})
    r.add(op, gpu, DType::F32, cudaFactory<ApplyKernel>());
}

} // namespace graphc
