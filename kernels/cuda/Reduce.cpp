//===- Reduce.cpp - ReduceSum, ReduceMean, GlobalAveragePool on CUDA ------===//
//
// The CUDA twins of kernels/cpu/Reduce.cpp and of the CPU's global average
// pooling: f32 in and out, sums in double (the CPU's precision), through the
// reduction engine (ReduceDevice.h), deterministic. A reduction over nothing
// gives 0 (sum) or NaN (mean), as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/ReduceHost.h"

#include <algorithm>
#include <cmath>

namespace graphc {
namespace cuda {

bool ReductionGeometry::toIndices(StridedIndex<1> &kept, StridedIndex<1> &reduced) const {
  auto fill = [](StridedIndex<1> &index, const Dims &dims, const Dims &strides) {
    if (dims.size() > (size_t)kMaxRank)
      return false;
    index = StridedIndex<1>();
    index.rank = dims.empty() ? 1 : (int)dims.size();
    index.dims[0] = 1;
    index.strides[0][0] = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      index.dims[d] = dims[d];
      index.strides[0][d] = strides[d];
    }
    return true;
  };
  return fill(kept, keptDims, keptStrides) && fill(reduced, reducedDims, reducedStrides);
}

ReductionGeometry reductionGeometry(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<bool> reduced) {
  llvm::SmallVector<std::pair<int64_t, bool>, 6> runs;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!runs.empty() && runs.back().second == reduced[d])
      runs.back().first *= shape[d];
    else
      runs.push_back({shape[d], reduced[d]});
  }
  ReductionGeometry g;
  int64_t stride = 1;
  for (size_t i = runs.size(); i-- > 0;) {
    auto [size, red] = runs[i];
    Dims &dims = red ? g.reducedDims : g.keptDims;
    Dims &strides = red ? g.reducedStrides : g.keptStrides;
    dims.insert(dims.begin(), size);
    strides.insert(strides.begin(), stride);
    stride *= size;
  }
  g.innerReduced = !runs.empty() && runs.back().second;
  for (int64_t d : g.keptDims)
    g.outputs *= d;
  for (int64_t d : g.reducedDims)
    g.count *= d;
  return g;
}

} // namespace cuda

namespace {

using namespace cuda;

/// ReduceSum, ReduceMean {axes, keepdims}; GlobalAveragePool (the spatial
/// axes, a mean).
class ReduceKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    if (auto e = plan(/*channelsLast=*/false))
      return e;
    scratch_ = plan_.scratchBytes();
    // Until prepare() says, the scratch covers a channels-last input too.
    if (acceptsLayout(0, Layout::ChannelsLast)) {
      if (auto e = plan(/*channelsLast=*/true))
        return e;
      scratch_ = std::max(scratch_, plan_.scratchBytes());
    }
    return plan(/*channelsLast=*/false);
  }

  /// A channels-last input (global average pooling) is the mean over the
  /// middle axes of its stored [n, h, w, c]; the terms come in the same order.
  llvm::Error layoutsChosen() override {
    if (auto e = plan(operandLayout(0) == Layout::ChannelsLast))
      return e;
    scratch_ = plan_.scratchBytes();
    return llvm::Error::success();
  }

  size_t scratchBytes() const override { return scratch_; }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    float *out = ctx.outputs[0].as<float>();
    if (plan_.count == 0) {
      GRAPHC_CUDA_TRY(launchFill(mean_ ? NAN : 0.0f, plan_.outputs, out, streamOf(ctx)));
      return llvm::Error::success();
    }
    ReduceArgs a = args_;
    a.x = ctx.inputs[0].as<const float>();
    GRAPHC_CUDA_TRY(launchReduce(plan_, a, out, ctx.scratch, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  llvm::Error plan(bool channelsLast) {
    const TensorType &in = operandType(0);
    llvm::SmallVector<bool, 6> reduced(in.rank(), false);
    Dims shape = in.shape;
    if (node().op() == Op::GlobalAveragePool) {
      for (size_t d = 2; d < in.rank(); ++d)
        reduced[d] = true;
      if (channelsLast) {
        shape = channelsLastDims(in.shape);
        reduced = {false, true, true, false};
      }
    } else {
      Ints axes = node().attrs().getInts("axes");
      if (axes.empty())
        reduced.assign(in.rank(), true);
      for (int64_t a : axes)
        reduced[a < 0 ? a + (int64_t)in.rank() : a] = true;
    }
    ReductionGeometry g = reductionGeometry(shape, reduced);
    if (!g.toIndices(args_.kept, args_.reduced))
      return makeError("the axes form more than " + llvm::Twine(kMaxRank) +
                       " runs of kept or reduced dimensions");
    mean_ = node().op() != Op::ReduceSum;
    args_.scale = mean_ && g.count ? 1.0 / (double)g.count : 1.0;
    plan_ = planReduction(g.outputs, g.count, g.innerReduced);
    return llvm::Error::success();
  }

  ReduceArgs args_;
  ReducePlan plan_;
  size_t scratch_ = 0;
  bool mean_ = false;
};

} // namespace

void registerCudaReduceKernels(KernelRegistry &r) {
  for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::GlobalAveragePool})
    r.add(op, DeviceKind::GPU, DType::F32, cudaFactory<ReduceKernel>());
}

} // namespace graphc
