//===- Shape.cpp - Data movement CUDA kernels -----------------------------===//
//
// The CUDA twins of kernels/cpu/ShapeOps.cpp and Gather.cpp:
//  - Transpose, Slice (negative steps too), Expand: one strided copy each,
//    through the same merged loop nest the CPU kernel walks;
//  - Concat / ConcatBatch and Split / SplitBatch: one cudaMemcpy2DAsync per
//    operand (rows of the operand's width, the joined row as pitch); on
//    channels-last tensors along the stored axis (channels: rows of C_i);
//  - Pad (constant, reflect, edge) per output element;
//  - Gather and GatherGrad (f32 gradients, deterministic). An index outside
//    [-dim, dim) cannot fault the GPU: it is recorded in the device error
//    word (CudaBackend::takeDeviceError reports it) and reads as zero.
// Every dtype, by element size.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeInference.h"
#include "kernels/LoopNest.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/KernelPlans.h"

namespace graphc {
namespace cuda {

llvm::Expected<StridedIndex<1>> stridedCopyIndex(const Node &n) {
  return toStridedIndex<1>(n, plain::stridedCopyNest(n));
}

llvm::Expected<PadParams> padParams(const Node &n) {
  const TensorType &in = n.operand(0)->type(), &out = n.result()->type();
  if (in.rank() > (size_t)kMaxRank)
    return nodeError(n, "the CUDA Pad handles rank up to " + llvm::Twine(kMaxRank) + ", not " +
                            llvm::Twine(in.rank()));
  PadParams p;
  Ints pads = n.attrs().getInts("pads");
  std::string mode = n.attrs().getString("mode", "constant");
  p.mode = mode == "reflect" ? PadMode::Reflect
           : mode == "edge"  ? PadMode::Edge
                             : PadMode::Constant;
  p.rank = (int)in.rank();
  Dims strides = plain::contiguousStrides(in.shape);
  for (size_t d = 0; d < in.rank(); ++d) {
    p.outDims[d] = out.shape[d];
    p.inDims[d] = in.shape[d];
    p.inStrides[d] = strides[d];
    p.before[d] = pads[d];
  }
  Tensor fill(TensorType(in.dtype, {}));
  fill.set(0, n.attrs().getFloat("value", 0));
  std::memcpy(&p.fill, fill.raw(), dtypeSize(in.dtype));
  return p;
}

GatherParams gatherParams(const Node &n) {
  bool grad = n.op() == Op::GatherGrad;
  llvm::ArrayRef<int64_t> data = grad ? n.result()->type().shape : n.operand(0)->type().shape;
  const TensorType &indices = n.operand(grad ? 0 : 1)->type();
  GatherParams p;
  int64_t axis = n.attrs().getInt("axis");
  if (axis < 0)
    axis += (int64_t)data.size();
  p.pre = plain::product(data, 0, axis);
  p.dim = data[axis];
  p.post = plain::product(data, axis + 1, data.size());
  p.count = indices.numElements();
  p.wideIndices = indices.dtype == DType::I64;
  return p;
}

} // namespace cuda

namespace {

using namespace cuda;

/// Transpose, Slice, Expand: out[i] = in[nest offset at i].
class StridedCopyKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    auto index = stridedCopyIndex(node());
    if (!index)
      return index.takeError();
    index_ = *index;
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchStridedCopy(dtypeSize(resultType().dtype), index_,
                                      ctx.outputs[0].numElements(), ctx.outputs[0].data,
                                      ctx.inputs[0].data, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  StridedIndex<1> index_;
};

/// Concat and Split along `axis`: each part is `outer` rows of its own width
/// in bytes, interleaved in the joined tensor.
struct Pieces {
  int64_t outer = 1, joinedRow = 0;
  llvm::SmallVector<int64_t, 8> rowBytes, offset;

  Pieces(llvm::ArrayRef<const TensorType *> parts, int64_t axis) {
    size_t es = dtypeSize(parts[0]->dtype);
    outer = plain::product(parts[0]->shape, 0, axis);
    for (const TensorType *t : parts) {
      offset.push_back(joinedRow);
      rowBytes.push_back(plain::product(t->shape, axis, t->rank()) * (int64_t)es);
      joinedRow += rowBytes.back();
    }
  }
};

int64_t joinAxis(const Node &n, size_t rank) {
  if (n.op() == Op::ConcatBatch || n.op() == Op::SplitBatch)
    return 0;
  int64_t a = n.attrs().getInt("axis");
  return a < 0 ? a + (int64_t)rank : a;
}

/// Concat, ConcatBatch, Split, SplitBatch.
class JoinKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    split_ = node().op() == Op::Split || node().op() == Op::SplitBatch;
    planPieces(/*channelsLast=*/false);
    return llvm::Error::success();
  }

  /// Channels-last parts (all of them: the kernel follows its operands) are
  /// joined along the axis the joined one is stored with: channels, the
  /// innermost, for inception_v3's concatenations.
  llvm::Error layoutsChosen() override {
    planPieces(operandLayout(0) == Layout::ChannelsLast);
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    const Pieces &p = *pieces_;
    for (size_t part = 0; part < p.rowBytes.size(); ++part) {
      size_t width = p.rowBytes[part];
      if (width == 0 || p.outer == 0)
        continue;
      char *joined =
          static_cast<char *>(split_ ? ctx.inputs[0].data : ctx.outputs[0].data) + p.offset[part];
      void *own = split_ ? ctx.outputs[part].data : ctx.inputs[part].data;
      if (split_)
        GRAPHC_CUDA_TRY(cudaMemcpy2DAsync(own, width, joined, p.joinedRow, width, p.outer,
                                          cudaMemcpyDeviceToDevice, streamOf(ctx)));
      else
        GRAPHC_CUDA_TRY(cudaMemcpy2DAsync(joined, p.joinedRow, own, width, width, p.outer,
                                          cudaMemcpyDeviceToDevice, streamOf(ctx)));
    }
    return llvm::Error::success();
  }

private:
  void planPieces(bool channelsLast) {
    llvm::SmallVector<TensorType, 8> parts;
    if (split_)
      for (const auto &r : node().results())
        parts.push_back(r->type());
    else
      for (const Value *v : node().operands())
        parts.push_back(v->type());
    size_t rank = split_ ? operandType(0).rank() : resultType().rank();
    int64_t axis = joinAxis(node(), rank);
    if (channelsLast) {
      for (TensorType &t : parts)
        t.shape = channelsLastDims(t.shape);
      axis = channelsLastAxis(axis);
    }
    llvm::SmallVector<const TensorType *, 8> views;
    for (const TensorType &t : parts)
      views.push_back(&t);
    pieces_.emplace(views, axis);
  }

  bool split_ = false;
  std::optional<Pieces> pieces_;
};

class PadKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    auto p = padParams(node());
    if (!p)
      return p.takeError();
    p_ = *p;
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchPad(dtypeSize(resultType().dtype), p_, ctx.outputs[0].numElements(),
                              ctx.outputs[0].data, ctx.inputs[0].data, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  PadParams p_;
};

/// gatherParams with the node's error site on this device.
GatherParams gatherParamsOn(const Node &n, CudaBackend &b) {
  GatherParams p = gatherParams(n);
  p.errors = b.deviceErrorWord();
  p.site =
      b.registerErrorSite("node '" + n.name() + "' (" + opName(n.op()).str() +
                          "): index out of range for an axis of size " + std::to_string(p.dim));
  return p;
}

class GatherKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    p_ = gatherParamsOn(node(), backend());
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchGather(dtypeSize(resultType().dtype), p_, ctx.outputs[0].data,
                                 ctx.inputs[0].data, ctx.inputs[1].data, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  GatherParams p_;
};

class GatherGradKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    if (operandType(1).dtype != DType::F32)
      return makeError("the CUDA kernel scatters f32 gradients only, not " +
                       dtypeName(operandType(1).dtype));
    p_ = gatherParamsOn(node(), backend());
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    const TensorView &dx = ctx.outputs[0];
    if (dx.bytes() == 0)
      return llvm::Error::success();
    GRAPHC_CUDA_TRY(cudaMemsetAsync(dx.data, 0, dx.bytes(), streamOf(ctx)));
    GRAPHC_CUDA_TRY(launchGatherGrad(p_, dx.as<float>(), ctx.inputs[1].as<const float>(),
                                     ctx.inputs[0].data, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  GatherParams p_;
};

} // namespace

void registerCudaShapeKernels(KernelRegistry &r) {
  const auto gpu = DeviceKind::GPU;
  auto all = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};
  for (Op op : {Op::Transpose, Op::Slice, Op::Expand})
    r.add(op, gpu, all, cudaFactory<StridedCopyKernel>());
  for (Op op : {Op::Concat, Op::ConcatBatch, Op::Split, Op::SplitBatch})
    r.add(op, gpu, all, cudaFactory<JoinKernel>());
  r.add(Op::Pad, gpu, all, cudaFactory<PadKernel>());
  r.add(Op::Gather, gpu, all, cudaFactory<GatherKernel>());
  // Keyed by the indices' dtype (operand 0), as on the CPU.
  r.add(Op::GatherGrad, gpu, {DType::I64, DType::I32}, cudaFactory<GatherGradKernel>());
}

} // namespace graphc
