//===- Loss.cpp - The loss op on CUDA (our kernels) -----------------------===//
//
// The CUDA twins of kernels/cpu/Loss.cpp (Loss.cu does the work; the
// formulas and the bad-label policy are in LossDevice.h). The CPU kernel
// checks labels before computing and fails the run; on the GPU a bad label
// is found by the device, so the error arrives when the executor next asks
// CudaBackend::takeDeviceError (the end of the step).
//
//===----------------------------------------------------------------------===//

#include "ir/Modes.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/LossDevice.h"

namespace graphc {
namespace {

using namespace cuda;

class CrossEntropyKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    const TensorType &logits = operandType(0);
    p_.kind = llvm::cantFail(parseLossKind(node().attrs().getString("loss", "cross-entropy")));
    p_.rows = logits.shape[0];
    p_.classes = p_.rows ? logits.numElements() / p_.rows : 0;
    const int64_t meanOver = p_.kind == LossKind::Mse ? p_.rows * p_.classes : p_.rows;
    p_.scale = node().attrs().getFloat("scale", meanOver ? 1.0 / (double)meanOver : 0.0);
    p_.wideLabels = operandType(1).dtype == DType::I64;
    p_.errors = backend().deviceErrorWord();
    p_.site =
        backend().registerErrorSite("node '" + node().name() + "' (" + opName(node().op()).str() +
                                    "): label outside [0, " + std::to_string(p_.classes) + ")");
    return llvm::Error::success();
  }

  size_t scratchBytes() const override {
    return node().op() == Op::SoftmaxCrossEntropy ? (size_t)p_.rows * sizeof(double) : 0;
  }
  std::optional<unsigned> inPlaceOperand() const override {
    return node().op() == Op::SoftmaxCrossEntropyGrad ? std::optional<unsigned>(0) : std::nullopt;
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    const float *logits = ctx.inputs[0].as<const float>();
    if (node().op() == Op::SoftmaxCrossEntropy)
      GRAPHC_CUDA_TRY(launchCrossEntropy(p_, logits, ctx.inputs[1].data,
                                         static_cast<double *>(ctx.scratch),
                                         ctx.outputs[0].as<float>(), streamOf(ctx)));
    else
      GRAPHC_CUDA_TRY(launchCrossEntropyGrad(p_, logits, ctx.inputs[1].data,
                                             ctx.inputs[2].as<const float>(),
                                             ctx.outputs[0].as<float>(), streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  LossParams p_;
};

} // namespace

void registerCudaLossKernels(KernelRegistry &r) {
  for (Op op : {Op::SoftmaxCrossEntropy, Op::SoftmaxCrossEntropyGrad})
    r.add(op, DeviceKind::GPU, DType::F32, cudaFactory<CrossEntropyKernel>());
}

} // namespace graphc
