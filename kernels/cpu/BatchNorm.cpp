//===- BatchNorm.cpp - Batch normalization and its gradient (oneDNN) -------===//
//
// BatchNorm (x, scale, bias, mean, var) -> y, the inference form;
// BatchNormTrain (x, scale, bias) -> (y, batch mean, biased batch variance);
// both with an optional fused ReLU on y (activation = "relu");
// BatchNormTrainGrad (x, scale, mean, var, dy[, y]) -> (dx, dscale, dbias),
// the full training gradient (dx accounts for the batch statistics depending
// on x); with activation = "relu" and y, the fused forward's output
// (passes/FuseBatchNormRelu.h), the gradient of (y > 0 ? dy : 0): dy is
// masked into scratch, in the primitive's layout, as ReluGrad computes it,
// and the gradient runs on that, so the fused node gives the bits of the two
// nodes apart. All take epsilon (default 1e-5) and x of rank 2 to 5
// ([N, C, ...]).
//
// Training-mode statistics are summed in double by batchStatistics (as
// PyTorch sums them; oneDNN's float32 sums made the step several times
// noisier), and the primitive normalizes with them. A primitive computes in
// the layout of x; one per layout the executor may use, created on first use. dy and the activation results are staged
// through scratch when their layout differs from x's. Channel vectors are
// always plain.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/BatchStatistics.h"
#include "kernels/cpu/DnnlCompat.h"
#include "kernels/cpu/DnnlKernel.h"
#include "kernels/cpu/PlainLoops.h"

#include <array>

namespace graphc {
namespace {

using flags = dnnl::normalization_flags;
using bn_fwd = dnnl::batch_normalization_forward;
using bn_bwd = dnnl::batch_normalization_backward;

llvm::Error checkRank(const Node &n) {
  size_t r = n.operand(0)->type().rank();
  if (r < 2 || r > 5)
    return nodeError(n, "input must have rank 2 to 5, has " + llvm::Twine(r));
  return llvm::Error::success();
}

float epsilonOf(const Node &n) {
  return (float)n.attrs().getFloat("epsilon", 1e-5);
}

bn_fwd::primitive_desc forwardPd(const Node &n, Layout l, dnnl::prop_kind kind, flags f,
                                 const dnnl::primitive_attr &attr) {
  return onednn::batchNormForwardPd(kind, layoutDesc(n.operand(0)->type(), l), epsilonOf(n), f,
                                    attr);
}

/// BatchNorm (inference) and BatchNormTrain: one forward primitive.
class BatchNormKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    if (auto e = checkRank(node()))
      return e;
    training_ = node().op() == Op::BatchNormTrain;
    // Training computes the batch statistics itself (batchStatistics, in
    // double); the primitive normalizes with them in both modes.
    flags f = flags::use_scale | flags::use_shift | flags::use_global_stats;
    // A fused ReLU (passes/InferenceFusion.h): inference-kind primitives
    // apply it without a workspace.
    if (node().attrs().getString("activation") == "relu")
      f = f | flags::fuse_norm_relu;
    auto kind = dnnl::prop_kind::forward_inference;
    for (Layout l : layoutsOf(operandType(0)))
      prims_[(int)l].pd = forwardPd(node(), l, kind, f, userScratchpad());
    allowActivationOperand(0);
    allowActivationResult(0);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    const auto &p = prims_[(int)ls.in[0]];
    return Staging::bytes(layoutDesc(resultType(0), ls.out[0]), p.pd.dst_desc()) + p.scratchpad();
  }

  void prepareFor(const Layouts &ls) override { prims_[(int)ls.in[0]].get(); }

  void execute(KernelContext &ctx, Staging &s) override {
    auto &p = prims_[(int)ctx.inputs[0].layout];
    auto channels = p.pd.mean_desc();
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, s.read(ctx.inputs[0], p.pd.src_desc())},
        {DNNL_ARG_SCALE, s.read(ctx.inputs[1], p.pd.weights_desc())},
        {DNNL_ARG_SHIFT, s.read(ctx.inputs[2], p.pd.weights_desc())},
        {DNNL_ARG_DST, s.write(ctx.outputs[0], p.pd.dst_desc())},
        {DNNL_ARG_SCRATCHPAD, s.temp(p.pd.scratchpad_desc())}};
    // Inference reads the given statistics; training computes the batch's.
    llvm::ArrayRef<TensorView> stats = training_ ? ctx.outputs.slice(1) : ctx.inputs.slice(3);
    if (training_)
      batchStatistics(ctx.inputs[0], stats[0].as<float>(), stats[1].as<float>());
    args[DNNL_ARG_MEAN] = dnnl::memory(channels, s.engine(), stats[0].data);
    args[DNNL_ARG_VARIANCE] = dnnl::memory(channels, s.engine(), stats[1].data);
    s.execute(p.get(), args);
  }

private:
  bool training_ = false;
  std::array<LazyPrimitive<bn_fwd>, kLayoutCount> prims_;
};

/// out = (y > 0 ? dy : 0) over n elements of f32 or bf16, as ReluGrad
/// computes it (kernels/cpu/Elementwise.cpp), so the bits agree.
void maskByRelu(void *out, const void *y, const void *dy, int64_t n, DType dtype) {
  plain::parallelFor(n, plain::kGrain, [&](int64_t begin, int64_t end) {
    if (dtype == DType::BF16) {
      using plain::BFloat;
      plain::reluGradBf16(static_cast<BFloat *>(out) + begin,
                          static_cast<const BFloat *>(y) + begin,
                          static_cast<const BFloat *>(dy) + begin, end - begin);
      return;
    }
    float *o = static_cast<float *>(out);
    const float *a = static_cast<const float *>(y), *b = static_cast<const float *>(dy);
    for (int64_t i = begin; i < end; ++i)
      o[i] = a[i] > 0 ? b[i] : 0.0f;
  });
}

/// BatchNormTrainGrad (x, scale, mean, var, dy[, y]) -> (dx, dscale, dbias).
class BatchNormTrainGradKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    if (auto e = checkRank(node()))
      return e;
    relu_ = node().numOperands() == 6;
    flags f = flags::use_scale | flags::use_shift;
    for (Layout l : layoutsOf(operandType(0))) {
      auto hint =
          forwardPd(node(), l, dnnl::prop_kind::forward_training, f, dnnl::primitive_attr());
      auto data = layoutDesc(operandType(0), l);
      prims_[(int)l].pd =
          onednn::batchNormBackwardPd(data, epsilonOf(node()), f, hint, userScratchpad());
    }
    allowActivationOperand(0);
    allowActivationOperand(4);
    if (relu_)
      allowActivationOperand(5);
    allowActivationResult(0);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    const auto &p = prims_[(int)ls.in[0]];
    size_t mask = 0;
    if (relu_) // y in the primitive's layout, and the masked dy
      mask = Staging::bytes(layoutDesc(operandType(5), ls.in[5]), p.pd.diff_dst_desc()) +
             roundScratch(p.pd.diff_dst_desc().get_size());
    return Staging::bytes(layoutDesc(operandType(4), ls.in[4]), p.pd.diff_dst_desc()) +
           Staging::bytes(layoutDesc(resultType(0), ls.out[0]), p.pd.diff_src_desc()) + mask +
           p.scratchpad();
  }

  void prepareFor(const Layouts &ls) override { prims_[(int)ls.in[0]].get(); }

  void execute(KernelContext &ctx, Staging &s) override {
    auto &p = prims_[(int)ctx.inputs[0].layout];
    auto channels = p.pd.mean_desc(), weights = p.pd.weights_desc();
    dnnl::memory scale = s.read(ctx.inputs[1], weights);
    dnnl::memory dy = s.read(ctx.inputs[4], p.pd.diff_dst_desc());
    if (relu_) {
      dnnl::memory y = s.read(ctx.inputs[5], p.pd.diff_dst_desc());
      dnnl::memory masked = s.temp(p.pd.diff_dst_desc());
      s.stream().wait(); // the reorders that staged y and dy
      maskByRelu(masked.get_data_handle(), y.get_data_handle(), dy.get_data_handle(),
                 ctx.inputs[4].numElements(), ctx.inputs[4].dtype);
      dy = masked;
    }
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, s.read(ctx.inputs[0], p.pd.src_desc())},
        {DNNL_ARG_SCALE, scale},
        {DNNL_ARG_MEAN, dnnl::memory(channels, s.engine(), ctx.inputs[2].data)},
        {DNNL_ARG_VARIANCE, dnnl::memory(channels, s.engine(), ctx.inputs[3].data)},
        {DNNL_ARG_DIFF_DST, dy},
        {DNNL_ARG_DIFF_SRC, s.write(ctx.outputs[0], p.pd.diff_src_desc())},
        {DNNL_ARG_DIFF_SCALE, s.write(ctx.outputs[1], p.pd.diff_weights_desc())},
        {DNNL_ARG_DIFF_SHIFT, s.write(ctx.outputs[2], p.pd.diff_weights_desc())},
        {DNNL_ARG_SCRATCHPAD, s.temp(p.pd.scratchpad_desc())}};
    // The gradients do not depend on the shift; any [C] buffer will do.
    if (onednn::kBatchNormBackwardTakesShift)
      args[DNNL_ARG_SHIFT] = scale;
    s.execute(p.get(), args);
  }

private:
  bool relu_ = false; ///< the fused ReLU's mask: operand 5 is y
  std::array<LazyPrimitive<bn_bwd>, kLayoutCount> prims_;
};

} // namespace

void registerCpuBatchNormKernels(KernelRegistry &r) {
  // bf16 data keeps f32 channel vectors (scale, shift, statistics).
  auto types = {DType::F32, DType::BF16};
  r.add(Op::BatchNorm, DeviceKind::CPU, types, dnnlFactory<BatchNormKernel>());
  r.add(Op::BatchNormTrain, DeviceKind::CPU, types, dnnlFactory<BatchNormKernel>());
  r.add(Op::BatchNormTrainGrad, DeviceKind::CPU, types, dnnlFactory<BatchNormTrainGradKernel>());
}

} // namespace graphc
