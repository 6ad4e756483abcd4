//===- Softmax.cpp - Softmax, LogSoftmax and their gradients (cuDNN) ------===//
//
// The CUDA twins of kernels/cpu/Softmax.cpp through cuDNN, whose channel
// mode is exactly our contract: the tensor is viewed as [outer, L, inner, 1]
// around the axis and cuDNN normalizes over L for every (outer, inner).
//   Softmax        cudnnSoftmaxForward  ACCURATE (the maximum subtracted)
//   LogSoftmax     cudnnSoftmaxForward  LOG
//   SoftmaxGrad    cudnnSoftmaxBackward ACCURATE: y * (dy - sum(dy * y))
//   LogSoftmaxGrad cudnnSoftmaxBackward LOG:      dy - exp(y) * sum(dy)
// f32; the view must fit cuDNN's int sizes (2^31 - 1 elements). No operand
// is overwritten in place (cuDNN does not promise that for the backward).
//
//===----------------------------------------------------------------------===//

#include "kernels/LoopNest.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/CudnnDescriptors.h"
#include "kernels/cuda/KernelPlans.h"

namespace graphc {
namespace cuda {

Dims softmaxView(const Node &n) {
  const TensorType &t = n.operand(0)->type();
  int64_t axis = n.attrs().getInt("axis", -1);
  if (axis < 0)
    axis += (int64_t)t.rank();
  return {plain::product(t.shape, 0, axis), t.shape[axis],
          plain::product(t.shape, axis + 1, t.rank()), 1};
}

} // namespace cuda

namespace {

using namespace cuda;

class SoftmaxKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    elements_ = operandType(0).numElements();
    if (elements_ == 0)
      return llvm::Error::success();
    return desc_.create(libs().cudnn, softmaxView(node()));
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    if (elements_ == 0)
      return llvm::Error::success();
    const CudnnApi &api = libs().cudnn;
    Op op = node().op();
    bool log = op == Op::LogSoftmax || op == Op::LogSoftmaxGrad;
    cudnnSoftmaxAlgorithm_t algo = log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
    const float one = 1, zero = 0;
    cudnnTensorDescriptor_t d = desc_.get();
    std::lock_guard<std::mutex> lock(backend().handleMutex());
    GRAPHC_CUDNN_TRY(api, api.cudnnSetStream(backend().cudnn(), streamOf(ctx)));
    if (op == Op::Softmax || op == Op::LogSoftmax)
      GRAPHC_CUDNN_TRY(
          api, api.cudnnSoftmaxForward(backend().cudnn(), algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d,
                                       ctx.inputs[0].data, &zero, d, ctx.outputs[0].data));
    else
      GRAPHC_CUDNN_TRY(api,
                       api.cudnnSoftmaxBackward(backend().cudnn(), algo, CUDNN_SOFTMAX_MODE_CHANNEL,
                                                &one, d, ctx.inputs[0].data, d, ctx.inputs[1].data,
                                                &zero, d, ctx.outputs[0].data));
    return llvm::Error::success();
  }

private:
  int64_t elements_ = 0;
  CudnnTensor desc_;
};

} // namespace

void registerCudaSoftmaxKernels(KernelRegistry &r) {
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::SoftmaxGrad, Op::LogSoftmaxGrad})
    r.add(op, DeviceKind::GPU, DType::F32, cudaFactory<SoftmaxKernel>());
}

} // namespace graphc
