//===- Dropout.cpp - DropoutTrain on CUDA ---------------------------------===//
//
// The CUDA twin of DropoutTrain in kernels/cpu/Dropout.cpp: the same node key
// (the name without its tower prefix, the tower, the `seed` salt), the same
// per-step key, threshold and scale, and device streams equal to the CPU's
// (DropoutDevice.h), so masks match bit for bit; a host test checks the
// device's draw order against the CPU kernel. The step is read from the
// device's step counter when there is one (DeviceStep.h). (Dropout at
// inference is a copy, in Elementwise.cpp.) A per-sample or per-tensor mask
// (ir/DropoutMask.h) is drawn as the element mask of its own shape and then
// applied, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "ir/DropoutMask.h"
#include "kernels/DropoutKey.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/DropoutDevice.h"
#include "kernels/cuda/KernelPlans.h"

namespace graphc {
namespace cuda {

DropoutParams dropoutParams(const Node &n, uint64_t seed, uint64_t step, uint64_t microStep) {
  double ratio = n.attrs().getFloat("ratio", 0.5);
  DropoutParams p;
  p.seed = seed;
  p.scale = dropoutScale(ratio);
  p.threshold = dropoutThreshold(ratio);
  p.nodeKey = dropoutNodeKey(n);
  p.step = {step, microStep};
  return p;
}

} // namespace cuda

namespace {

using namespace cuda;

class DropoutTrainKernel : public CudaKernel {
public:
  DropoutTrainKernel(const Node &n, const KernelEnv &env)
      : CudaKernel(n, env), seed_(env.seed), perElement_(dropoutMaskOf(n) == DropoutMask::Element) {
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    DropoutParams p = dropoutParams(node(), seed_, ctx.step, ctx.microStep);
    // Under an executor the step comes from the device's counter, so that a
    // captured step replays with each step's masks.
    p.counter = ctx.deviceStep;
    int dtype = (int)resultType().dtype;
    int64_t n = ctx.outputs[0].numElements();
    if (perElement_)
      GRAPHC_CUDA_TRY(launchDropoutTrain(dtype, p, n, ctx.inputs[0].data, ctx.outputs[0].data,
                                         ctx.outputs[1].data, streamOf(ctx)));
    else
      GRAPHC_CUDA_TRY(launchSampleDropoutTrain(dtype, p, n, ctx.outputs[1].numElements(),
                                               ctx.inputs[0].data, ctx.outputs[0].data,
                                               ctx.outputs[1].data, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  uint64_t seed_;
  bool perElement_;
};

} // namespace

void registerCudaDropoutKernels(KernelRegistry &r) {
  r.add(Op::DropoutTrain, DeviceKind::GPU, {DType::F32, DType::F16, DType::BF16},
        cudaFactory<DropoutTrainKernel>());
}

} // namespace graphc
