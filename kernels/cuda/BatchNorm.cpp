//===- BatchNorm.cpp - Batch normalization on CUDA (our kernels) ----------===//
//
// The CUDA twins of kernels/cpu/BatchNorm.cpp: BatchNorm (inference),
// BatchNormTrain (y, batch mean, biased batch variance), both with the fused
// ReLU (activation = "relu"), and BatchNormTrainGrad (dx, dscale, dbias),
// whose optional sixth operand y (the fused forward's output, with
// activation = "relu") masks dy to where y > 0; epsilon (default 1e-5), x of
// rank 2 to 5. x, dy, y and dx are f32, f16 or bf16, read and written as
// they are (arithmetic in f32); the channel vectors are f32 (16-bit ones are
// widened into scratch, C elements). Not cuDNN: its training call returns
// the inverse standard deviation and an unbiased running variance, not the
// biased batch variance our contract names, and its backward pass wants the
// inverse standard deviation saved by that call.
//
// Passes (BatchNormDevice.h): training: statistics in one pass over x plus a
// merge, then the normalization; gradient: the sums of dy' and dy' * (x -
// mean) in one pass over x and dy plus a merge, then dx. Deterministic (the
// fixed orders of BatchNormPlan.h). An empty batch gives zero statistics and
// gradients, as on the CPU.
//
// Layouts (GpuLayoutRules.h): a 4-D x may be channels-last, and the kernel
// then computes channels-last; dy, the mask y and the result 0 (y or dx)
// that come in the other layout are transposed through scratch (a separate
// copy, counted).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/BatchNormDevice.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/ElemTypeOf.h"

namespace graphc {
namespace {

using namespace cuda;

class BatchNormKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    const TensorType &x = operandType(0);
    if (x.rank() < 2 || x.rank() > 5)
      return makeError("input must have rank 2 to 5, has " + llvm::Twine(x.rank()));
    if (x.dtype != DType::F32 && x.dtype != DType::F16 && x.dtype != DType::BF16)
      return makeError("takes f32, f16 or bf16 data, not " + dtypeName(x.dtype));
    n_ = x.shape[0];
    c_ = x.shape[1];
    for (size_t d = 2; d < x.rank(); ++d)
      s_ *= x.shape[d];
    eps_ = (float)node().attrs().getFloat("epsilon", 1e-5);
    const bool relu = node().attrs().getString("activation") == "relu";
    if (node().op() == Op::BatchNormTrainGrad) {
      masked_ = node().numOperands() == 6;
      if (relu != masked_)
        return makeError(
            relu ? "activation = \"relu\" needs the fused forward's output as a sixth "
                   "operand"
                 : "a sixth operand (the forward's output) needs activation = \"relu\"");
      if (masked_ && operandType(5) != x)
        return makeError("the forward's output must have the type of x");
    } else {
      relu_ = relu;
    }
    plan_ = planBatchNorm(n_, c_, s_, false, (int)dtypeSize(x.dtype));
    return llvm::Error::success();
  }

  size_t scratchBytes() const override { return place(nullptr).bytes; }

protected:
  llvm::Error layoutsChosen() override {
    compute_ = operandLayout(0);
    plan_ = planBatchNorm(n_, c_, s_, compute_ == Layout::ChannelsLast,
                          (int)dtypeSize(operandType(0).dtype));
    return llvm::Error::success();
  }

  llvm::Error enqueue(KernelContext &ctx) override {
    cudaStream_t s = streamOf(ctx);
    if (plan_.elements() == 0) {
      for (const TensorView &v : ctx.outputs)
        if (v.bytes())
          GRAPHC_CUDA_TRY(cudaMemsetAsync(v.data, 0, v.bytes(), s));
      return llvm::Error::success();
    }
    const Pieces pc = place(ctx.scratch);
    const ElemType t = elemType(operandType(0).dtype);
    // Data in the layout of x, channel vectors in f32.
    const void *data[6] = {};
    for (unsigned i : dataOperands()) {
      data[i] = ctx.inputs[i].data;
      if (!pc.operands[i])
        continue;
      if (auto e = stage(ctx.inputs[i], pc.operands[i], s))
        return e;
      data[i] = pc.operands[i];
    }
    const float *channels[6] = {};
    for (unsigned i = 1; i < channelEnd(); ++i) {
      channels[i] = ctx.inputs[i].as<const float>();
      if (!pc.channelOperands[i])
        continue;
      GRAPHC_CUDA_TRY(launchCast(elemType(operandType(i).dtype), ElemType::F32, c_,
                                 pc.channelOperands[i], ctx.inputs[i].data, s));
      channels[i] = pc.channelOperands[i];
    }
    float *results[3] = {};
    for (unsigned i = 1; i < node().numResults(); ++i)
      results[i] = pc.channelResults[i] ? pc.channelResults[i] : ctx.outputs[i].as<float>();
    void *out = pc.result ? pc.result : ctx.outputs[0].data;
    // Chunks are loaded whole (the executor aligns tensors to 64 bytes).
    if (plan_.vec > 1) {
      auto misaligned = [](const void *p) {
        return reinterpret_cast<uintptr_t>(p) % kBnChunkBytes;
      };
      if (misaligned(data[0]) || misaligned(out) || misaligned(data[4]) || misaligned(data[5]))
        return makeError("needs its tensors of x's shape aligned to " + llvm::Twine(kBnChunkBytes) +
                         " bytes");
    }

    switch (node().op()) {
    case Op::BatchNorm:
      GRAPHC_CUDA_TRY(launchBatchNormForward(t, plan_, eps_, relu_, data[0], channels[1],
                                             channels[2], channels[3], channels[4], out, s));
      break;
    case Op::BatchNormTrain:
      GRAPHC_CUDA_TRY(
          launchBatchNormStatistics(t, plan_, data[0], pc.partials, results[1], results[2], s));
      GRAPHC_CUDA_TRY(launchBatchNormForward(t, plan_, eps_, relu_, data[0], channels[1],
                                             channels[2], results[1], results[2], out, s));
      break;
    default: {
      // (x, scale, mean, var, dy[, y]) -> (dx, dscale, dbias)
      const void *y = masked_ ? data[5] : nullptr;
      GRAPHC_CUDA_TRY(launchBatchNormGradientSums(t, plan_, eps_, data[0], data[4], y, channels[2],
                                                  channels[3], pc.partials, results[1], results[2],
                                                  s));
      GRAPHC_CUDA_TRY(launchBatchNormBackward(t, plan_, eps_, data[0], data[4], y, channels[1],
                                              channels[2], channels[3], results[1], results[2], out,
                                              s));
      break;
    }
    }

    for (unsigned i = 1; i < node().numResults(); ++i)
      if (pc.channelResults[i])
        GRAPHC_CUDA_TRY(launchCast(ElemType::F32, elemType(resultType(i).dtype), c_,
                                   ctx.outputs[i].data, pc.channelResults[i], s));
    if (pc.result) {
      TensorView from = ctx.outputs[0];
      from.data = pc.result;
      from.layout = compute_;
      countReorder(ctx.outputs[0].bytes());
      return convertTensor(from, ctx.outputs[0], s);
    }
    return llvm::Error::success();
  }

private:
  /// Where the scratch holds what (all null when sizing).
  struct Pieces {
    BnSums *partials = nullptr;
    void *operands[6] = {}; ///< data operands in the other layout, transposed
    void *result = nullptr; ///< result 0 when wanted in the other layout
    float *channelOperands[6] = {}, *channelResults[3] = {}; ///< 16-bit channel vectors as f32
    size_t bytes = 0;
  };

  Pieces place(void *base) const {
    ScratchLayout sl(base);
    Pieces pc;
    if (node().op() != Op::BatchNorm)
      pc.partials = sl.take<BnSums>(plan_.partials());
    const size_t dataBytes = (size_t)plan_.elements() * dtypeSize(operandType(0).dtype);
    for (unsigned i : dataOperands())
      if (operandLayout(i) != compute_)
        pc.operands[i] = sl.take(dataBytes);
    if (resultLayout(0) != compute_)
      pc.result = sl.take(dataBytes);
    for (unsigned i = 1; i < channelEnd(); ++i)
      if (operandType(i).dtype != DType::F32)
        pc.channelOperands[i] = sl.take<float>(c_);
    for (unsigned i = 1; i < node().numResults(); ++i)
      if (resultType(i).dtype != DType::F32)
        pc.channelResults[i] = sl.take<float>(c_);
    pc.bytes = sl.bytes();
    return pc;
  }

  /// The operands of x's shape besides x: dy and the mask y.
  llvm::SmallVector<unsigned, 2> dataOperands() const {
    if (node().op() != Op::BatchNormTrainGrad)
      return {};
    if (masked_)
      return {4, 5};
    return {4};
  }
  /// The channel-vector operands are 1 .. channelEnd() - 1.
  unsigned channelEnd() const {
    switch (node().op()) {
    case Op::BatchNorm:
      return 5;
    case Op::BatchNormTrain:
      return 3;
    default:
      return 4;
    }
  }

  /// `from` into scratch at `to`, in the layout of x.
  llvm::Error stage(const TensorView &from, void *to, cudaStream_t s) {
    TensorView staged = from;
    staged.data = to;
    staged.layout = compute_;
    countReorder(from.bytes());
    return convertTensor(from, staged, s);
  }

  int64_t n_ = 0, c_ = 0, s_ = 1;
  float eps_ = 1e-5f;
  bool relu_ = false;   ///< forward: activation = "relu", the fused ReLU
  bool masked_ = false; ///< gradient: the sixth operand masks dy
  Layout compute_ = Layout::Plain;
  BnPlan plan_;
};

} // namespace

void registerCudaBatchNormKernels(KernelRegistry &r) {
  for (Op op : {Op::BatchNorm, Op::BatchNormTrain, Op::BatchNormTrainGrad})
    r.add(op, DeviceKind::GPU, {DType::F32, DType::F16, DType::BF16},
          cudaFactory<BatchNormKernel>());
}

} // namespace graphc
