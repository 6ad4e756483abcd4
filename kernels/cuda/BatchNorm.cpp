//===- BatchNorm.cpp - Batch normalization on CUDA (our kernels) ----------===//
//
// The CUDA twins of kernels/cpu/BatchNorm.cpp: BatchNorm (inference),
// BatchNormTrain (y, batch mean, biased batch variance) and
// BatchNormTrainGrad (dx, dscale, dbias); epsilon (default 1e-5), x of rank
// 2 to 5. Not cuDNN: its training call returns the inverse standard
// deviation and an unbiased running variance, not the biased batch variance
// our contract names (recovering it loses precision when the variance is
// small next to epsilon), and its backward pass wants the inverse standard
// deviation saved by that call. Statistics come from the reduction engine
// (double sums, two passes for the variance, deterministic); the per-element
// passes are BatchNorm.cu. An empty batch gives zero statistics and
// gradients, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/BatchNormDevice.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/ReduceHost.h"

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
    shape_.n = x.shape[0];
    shape_.c = x.shape[1];
    for (size_t d = 2; d < x.rank(); ++d)
      shape_.s *= x.shape[d];
    eps_ = (float)node().attrs().getFloat("epsilon", 1e-5);
    relu_ = node().attrs().getString("activation") == "relu";
    ReductionGeometry g = reductionGeometry({shape_.n, shape_.c, shape_.s}, {true, false, true});
    if (!g.toIndices(stats_.kept, stats_.reduced))
      return makeError("cannot index the statistics");
    // Channels of size 1 merge away; the plan still has one output per channel.
    plan_ = planReduction(shape_.c, shape_.n * shape_.s, g.innerReduced);
    return llvm::Error::success();
  }

  size_t scratchBytes() const override {
    Op op = node().op();
    return op == Op::BatchNorm ? 0 : plan_.scratchBytes();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    cudaStream_t s = streamOf(ctx);
    if (shape_.elements() == 0) {
      for (const TensorView &v : ctx.outputs)
        if (v.bytes())
          GRAPHC_CUDA_TRY(cudaMemsetAsync(v.data, 0, v.bytes(), s));
      return llvm::Error::success();
    }
    auto in = [&](unsigned i) { return ctx.inputs[i].as<const float>(); };
    auto out = [&](unsigned i) { return ctx.outputs[i].as<float>(); };
    switch (node().op()) {
    case Op::BatchNorm:
      GRAPHC_CUDA_TRY(launchBatchNormForward(shape_, eps_, relu_, in(0), in(1), in(2), in(3), in(4),
                                             out(0), s));
      return llvm::Error::success();
    case Op::BatchNormTrain: {
      float *mean = out(1), *var = out(2);
      if (auto e = reduce(ReduceTerm::Value, in(0), nullptr, nullptr, mean, ctx))
        return e;
      if (auto e = reduce(ReduceTerm::SquaredDeviation, in(0), nullptr, mean, var, ctx))
        return e;
      GRAPHC_CUDA_TRY(
          launchBatchNormForward(shape_, eps_, relu_, in(0), in(1), in(2), mean, var, out(0), s));
      return llvm::Error::success();
    }
    default: {
      // (x, scale, mean, var, dy) -> (dx, dscale, dbias)
      const float *x = in(0), *scale = in(1), *mean = in(2), *var = in(3), *dy = in(4);
      float *dx = out(0), *dscale = out(1), *dbias = out(2);
      if (auto e = reduce(ReduceTerm::Value, dy, nullptr, nullptr, dbias, ctx))
        return e;
      if (auto e = reduce(ReduceTerm::Product, x, dy, mean, dscale, ctx))
        return e;
      GRAPHC_CUDA_TRY(launchBatchNormScaleGrad(shape_.c, eps_, var, dscale, s));
      GRAPHC_CUDA_TRY(
          launchBatchNormBackward(shape_, eps_, x, dy, scale, mean, var, dscale, dbias, dx, s));
      return llvm::Error::success();
    }
    }
  }

private:
  /// Per-channel sums of `term` into `to`; means for the statistics.
  llvm::Error reduce(ReduceTerm term, const float *x, const float *y, const float *mean, float *to,
                     KernelContext &ctx) {
    ReduceArgs a = stats_;
    a.term = term;
    a.x = x;
    a.y = y;
    a.mean = mean;
    bool statistic = node().op() == Op::BatchNormTrain;
    a.scale = statistic ? 1.0 / (double)(shape_.n * shape_.s) : 1.0;
    GRAPHC_CUDA_TRY(launchReduce(plan_, a, to, ctx.scratch, streamOf(ctx)));
    return llvm::Error::success();
  }

  ChannelShape shape_;
  float eps_ = 1e-5f;
  bool relu_ = false; ///< activation = "relu": the fused ReLU
  ReduceArgs stats_;
  ReducePlan plan_;
};

} // namespace

void registerCudaBatchNormKernels(KernelRegistry &r) {
  for (Op op : {Op::BatchNorm, Op::BatchNormTrain, Op::BatchNormTrainGrad})
    r.add(op, DeviceKind::GPU, DType::F32, cudaFactory<BatchNormKernel>());
}

} // namespace graphc
