//===- LossScale.cpp - Dynamic loss scaling on CUDA -----------------------===//
//
// The CUDA twins of kernels/cpu/LossScale.cpp: CheckFinite (f32, f16, bf16
// operands; the check is zeroed, then each launch's test of up to 32
// operands may mark it) and
// LossScaleStep (the rule on the device's replica of the three variables;
// the decision stays on the device for the Apply* kernels to read).
//
//===----------------------------------------------------------------------===//

#include "kernels/LossScaleRule.h"
#include "kernels/cuda/CudaCheck.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/LossScaleDevice.h"

namespace graphc {
namespace {

using namespace cuda;

class CheckFiniteKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    for (unsigned i = 0; i < node().numOperands(); ++i) {
      DType t = operandType(i).dtype;
      if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
        return makeError(std::string("cannot check ") + dtypeName(t).data() + " values");
    }
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    cudaStream_t s = streamOf(ctx);
    float *check = ctx.outputs[0].as<float>();
    GRAPHC_CUDA_TRY(cudaMemsetAsync(check, 0, sizeof(float), s));
    // A launch per kCheckTensors tensors (inception_v3 has 284 gradients).
    CheckList list;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      const TensorView &in = ctx.inputs[i];
      list.tensors[list.count++] = {in.data, in.numElements(),
                                    in.dtype == DType::F32   ? kF32Exponent
                                    : in.dtype == DType::F16 ? kF16Exponent
                                                             : kBF16Exponent,
                                    in.dtype == DType::F32 ? 4 : 2};
      if (list.count == kCheckTensors || i + 1 == ctx.inputs.size()) {
        GRAPHC_CUDA_TRY(launchCheckFinite(list, check, s));
        list.count = 0;
      }
    }
    return llvm::Error::success();
  }
};

class LossScaleStepKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    vars_ = {node().attrs().getString("var")};
    for (const std::string &s : node().attrs().getStrings("slots"))
      vars_.push_back(s);
    if (vars_.size() != 3)
      return makeError("needs the scale and 2 slots");
    interval_ = (float)node().attrs().getInt("growth_interval", kDefaultGrowthInterval);
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    if (!ctx.variables)
      return makeError("no variable storage given");
    float *state[3];
    for (size_t i = 0; i < 3; ++i) {
      auto v = ctx.variables->variable(vars_[i]);
      if (!v)
        return v.takeError();
      if (v->dtype != DType::F32 || v->numElements() != 1)
        return makeError("variable '" + vars_[i] + "' is not an f32 scalar");
      state[i] = static_cast<float *>(v->data);
    }
    GRAPHC_CUDA_TRY(launchLossScaleStep(ctx.inputs[0].as<const float>(), interval_, state[0],
                                        state[1], state[2], ctx.outputs[0].as<float>(),
                                        streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  std::vector<std::string> vars_;
  float interval_ = kDefaultGrowthInterval;
};

} // namespace

void registerCudaLossScaleKernels(KernelRegistry &r) {
  const auto gpu = DeviceKind::GPU;
  r.add(Op::CheckFinite, gpu, {DType::F32, DType::F16, DType::BF16},
        cudaFactory<CheckFiniteKernel>());
  r.add(Op::LossScaleStep, gpu, DType::F32, cudaFactory<LossScaleStepKernel>());
}

} // namespace graphc
