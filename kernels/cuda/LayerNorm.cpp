//===- LayerNorm.cpp - LayerNorm and LayerNormGrad on CUDA ----------------===//
//
// The CUDA twins of kernels/cpu/LayerNorm.cpp (our kernels, LayerNorm.cu):
// f32, plain layout, the same in-place operands (x for the forward, dy for
// the gradient). The gradient keeps each row's statistics in scratch.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/LayerNormDevice.h"

namespace graphc {
namespace {

using namespace cuda;

/// x as [rows, D] around the node's axis, and its epsilon.
struct LnView {
  int64_t rows = 0, d = 0;
  float eps = 1e-5f;
};

LnView viewOf(const Node &n) {
  const TensorType &t = n.operand(0)->type();
  int64_t axis = n.attrs().getInt("axis", -1);
  if (axis < 0)
    axis += (int64_t)t.rank();
  LnView v;
  v.rows = 1;
  v.d = 1;
  for (int64_t i = 0; i < (int64_t)t.rank(); ++i)
    (i < axis ? v.rows : v.d) *= t.shape[i];
  v.eps = (float)n.attrs().getFloat("epsilon", 1e-5);
  return v;
}

class LayerNormKernel : public CudaKernel {
public:
  LayerNormKernel(const Node &n, const KernelEnv &env) : CudaKernel(n, env), view_(viewOf(n)) {}
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    const float *bias = ctx.inputs.size() > 2 ? ctx.inputs[2].as<const float>() : nullptr;
    GRAPHC_CUDA_TRY(launchLayerNormForward(
        view_.rows, view_.d, view_.eps, ctx.inputs[0].as<const float>(),
        ctx.inputs[1].as<const float>(), bias, ctx.outputs[0].as<float>(), streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  LnView view_;
};

class LayerNormGradKernel : public CudaKernel {
public:
  LayerNormGradKernel(const Node &n, const KernelEnv &env) : CudaKernel(n, env), view_(viewOf(n)) {}
  std::optional<unsigned> inPlaceOperand() const override { return 2; }
  size_t scratchBytes() const override {
    ScratchLayout s;
    s.take<LnStats>(view_.rows);
    return s.bytes();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    ScratchLayout s(ctx.scratch);
    LnStats *stats = s.take<LnStats>(view_.rows);
    GRAPHC_CUDA_TRY(
        launchLayerNormBackward(view_.rows, view_.d, view_.eps, ctx.inputs[0].as<const float>(),
                                ctx.inputs[1].as<const float>(), ctx.inputs[2].as<const float>(),
                                stats, ctx.outputs[0].as<float>(), ctx.outputs[1].as<float>(),
                                ctx.outputs[2].as<float>(), streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  LnView view_;
};

} // namespace

void registerCudaLayerNormKernels(KernelRegistry &r) {
  r.add(Op::LayerNorm, DeviceKind::GPU, DType::F32, cudaFactory<LayerNormKernel>());
  r.add(Op::LayerNormGrad, DeviceKind::GPU, DType::F32, cudaFactory<LayerNormGradKernel>());
}

} // namespace graphc
