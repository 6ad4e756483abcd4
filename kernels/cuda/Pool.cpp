//===- Pool.cpp - Max and average pooling on CUDA (our kernels) -----------===//
//
// The CUDA twins of MaxPool, AveragePool, MaxPoolGrad and AveragePoolGrad
// in kernels/cpu/Pool.cpp (GlobalAveragePool is a mean in Reduce.cpp). Not
// cuDNN: its pooling descriptor has symmetric padding and floor-mode output
// sizes only, and its include-padding average divides by the full window,
// so asymmetric pads, ceil_mode and PyTorch's divisor would each need a
// correction pass; one direct kernel per direction covers all of them (the
// semantics are in PoolDevice.h). Pooling is memory-bound, and the gradients
// gather instead of scattering, so they are deterministic. Each tensor may
// be plain or channels-last on its own.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/KernelPlans.h"

namespace graphc {
namespace cuda {

/// Positions and plane sizes the 32-bit kernels can index.
constexpr int64_t kPlaneLimit = int64_t(1) << 31;

llvm::Expected<PoolParams> poolParams(const Node &n) {
  Dims x, y;
  switch (n.op()) {
  case Op::MaxPoolGrad:
    x = n.operand(0)->type().shape;
    y = n.operand(1)->type().shape;
    break;
  case Op::AveragePoolGrad:
    x = n.result()->type().shape;
    y = n.operand(0)->type().shape;
    break;
  default:
    x = n.operand(0)->type().shape;
    y = n.result()->type().shape;
    break;
  }
  if (x.size() != 4 || y.size() != 4 || x[0] != y[0] || x[1] != y[1])
    return nodeError(n, "input " + shapeToString(x) + " and output " + shapeToString(y) +
                            " do not fit a 2-d pooling");
  const Attrs &a = n.attrs();
  Ints kernel = a.getInts("kernel_shape"), strides = a.getInts("strides", Ints(2, 1));
  Ints pads = a.getInts("pads", Ints(4, 0)), dilations = a.getInts("dilations", Ints(2, 1));
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4 || dilations.size() != 2)
    return nodeError(n, "kernel_shape, strides, pads or dilations do not match a 2-d window");
  PoolParams p;
  p.max = n.op() == Op::MaxPool || n.op() == Op::MaxPoolGrad;
  p.includePad = !p.max && a.getInt("count_include_pad") != 0;
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + 2] < 0)
      return nodeError(n, "window sizes, strides and dilations must be positive, pads "
                          "non-negative");
    if (!p.max && dilations[i] != 1)
      return nodeError(n, "dilated average pooling is not supported");
    int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    int64_t floorOut = (x[2 + i] + pads[i] + pads[i + 2] - extent) / strides[i] + 1;
    if (y[2 + i] != floorOut && y[2 + i] != floorOut + 1)
      return nodeError(n, "output " + shapeToString(y) + " does not match input " +
                              shapeToString(x) + " under this window");
    // 32-bit arithmetic within a plane (PoolDevice.h): every position a
    // window reaches, padding included, stays below 2^31.
    if (x[2 + i] + pads[i] + pads[i + 2] + extent + strides[i] >= kPlaneLimit ||
        y[2 + i] * strides[i] >= kPlaneLimit)
      return nodeError(n, "input " + shapeToString(x) +
                              " with this window reaches 2^31 "
                              "positions along an axis, beyond this kernel");
  }
  for (const Dims *d : {&x, &y})
    if ((*d)[2] * (*d)[3] >= kPlaneLimit)
      return nodeError(n, "a plane of " + shapeToString(*d) +
                              " has 2^31 elements or more, beyond this kernel");
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  p.planes = x[0] * x[1];
  p.channels = x[1];
  p.h = i32(x[2]);
  p.w = i32(x[3]);
  p.oh = i32(y[2]);
  p.ow = i32(y[3]);
  p.kh = i32(kernel[0]);
  p.kw = i32(kernel[1]);
  p.sh = i32(strides[0]);
  p.sw = i32(strides[1]);
  p.dh = i32(dilations[0]);
  p.dw = i32(dilations[1]);
  p.padTop = i32(pads[0]);
  p.padLeft = i32(pads[1]);
  p.padBottom = i32(pads[2]);
  p.padRight = i32(pads[3]);
  return p;
}

} // namespace cuda

namespace {

using namespace cuda;

class PoolKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    auto p = poolParams(node());
    if (!p)
      return p.takeError();
    p_ = *p;
    return llvm::Error::success();
  }

  /// Which tensors are channels-last (GpuLayoutRules.h: each on its own).
  llvm::Error layoutsChosen() override {
    auto last = [](Layout l) { return l == Layout::ChannelsLast; };
    switch (node().op()) {
    case Op::MaxPoolGrad: // x, dy -> dx
      p_.xLast = last(operandLayout(0));
      p_.yLast = last(operandLayout(1));
      p_.dxLast = last(resultLayout());
      break;
    case Op::AveragePoolGrad: // dy -> dx
      p_.yLast = last(operandLayout(0));
      p_.dxLast = last(resultLayout());
      break;
    default: // x -> y
      p_.xLast = last(operandLayout(0));
      p_.yLast = last(resultLayout());
      break;
    }
    return llvm::Error::success();
  }

  /// MaxPoolGrad's argmax of every window (PoolDevice.h).
  size_t scratchBytes() const override {
    return node().op() == Op::MaxPoolGrad ? size_t(p_.planes * p_.oh * p_.ow) * sizeof(int) : 0;
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    float *out = ctx.outputs[0].as<float>();
    auto in = [&](unsigned i) { return ctx.inputs[i].as<const float>(); };
    switch (node().op()) {
    case Op::MaxPoolGrad:
      GRAPHC_CUDA_TRY(launchPoolBackward(p_, in(0), in(1), static_cast<int *>(ctx.scratch), out,
                                         streamOf(ctx)));
      break;
    case Op::AveragePoolGrad:
      GRAPHC_CUDA_TRY(launchPoolBackward(p_, nullptr, in(0), nullptr, out, streamOf(ctx)));
      break;
    default:
      GRAPHC_CUDA_TRY(launchPoolForward(p_, in(0), out, streamOf(ctx)));
      break;
    }
    return llvm::Error::success();
  }

private:
  PoolParams p_;
};

} // namespace

void registerCudaPoolKernels(KernelRegistry &r) {
  for (Op op : {Op::MaxPool, Op::AveragePool, Op::MaxPoolGrad, Op::AveragePoolGrad})
    r.add(op, DeviceKind::GPU, DType::F32, cudaFactory<PoolKernel>());
}

} // namespace graphc
