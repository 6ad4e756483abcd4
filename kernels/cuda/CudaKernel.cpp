//===- CudaKernel.cpp - The CUDA kernels' base class and helpers ----------===//

#include "kernels/cuda/CudaKernel.h"

#include "kernels/LoopNest.h"
#include "kernels/cuda/ElemTypeOf.h"
#include "kernels/cuda/LayoutDevice.h"

namespace graphc {

llvm::Error inNode(const Node &n, llvm::Error e) {
  if (!e)
    return e;
  return withContext(std::move(e), "node '" + n.name() + "' (" + opName(n.op()) + ")");
}

CudaKernel::CudaKernel(const Node &n, const KernelEnv &env)
    : node_(&n), backend_(&cudaBackend(env)), layouts_(cuda::gpuLayoutAnswers(n, env.gpuLayout)),
      operandLayouts_(n.numOperands(), Layout::Plain),
      resultLayouts_(n.numResults(), Layout::Plain) {}

llvm::Error CudaKernel::prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) {
  assert(operands.size() == operandLayouts_.size() && results.size() == resultLayouts_.size() &&
         "a layout per operand and result");
  for (unsigned i = 0; i < operands.size(); ++i)
    if (!acceptsLayout(i, operands[i]))
      return nodeError(*node_, "cannot take operand " + llvm::Twine(i) + " in layout " +
                                   llvm::Twine((int)operands[i]));
  for (unsigned i = 0; i < results.size(); ++i)
    if (!producesLayout(i, results[i]))
      return nodeError(*node_, "cannot give result " + llvm::Twine(i) + " in layout " +
                                   llvm::Twine((int)results[i]));
  // A layout-following kernel computes all of its tensors in one layout.
  if (layouts_.follows) {
    auto differs = [&](Layout l) { return l != (operands.empty() ? results[0] : operands[0]); };
    if (llvm::any_of(operands, differs) || llvm::any_of(results, differs))
      return nodeError(*node_, "follows its operands' layout, but its tensors come in different "
                               "layouts");
  }
  operandLayouts_.assign(operands.begin(), operands.end());
  resultLayouts_.assign(results.begin(), results.end());
  return inNode(*node_, layoutsChosen());
}

llvm::Error CudaKernel::run(KernelContext &ctx) {
  for (unsigned i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].layout != operandLayouts_[i])
      return nodeError(*node_, "operand " + llvm::Twine(i) +
                                   " arrived in another layout than the kernel was prepared for");
  for (unsigned i = 0; i < ctx.outputs.size(); ++i)
    if (ctx.outputs[i].layout != resultLayouts_[i])
      return nodeError(*node_, "result " + llvm::Twine(i) +
                                   " is wanted in another layout than the kernel was prepared for");
  return inNode(*node_, enqueue(ctx));
}

llvm::Error checkStaticShapes(const Node &n) {
  for (const Value *v : n.operands())
    if (!v->type().isStatic())
      return nodeError(n, "operand '" + v->name() + "' has a symbolic shape; bind the batch");
  for (const auto &r : n.results())
    if (!r->type().isStatic())
      return nodeError(n, "result '" + r->name() + "' has a symbolic shape; bind the batch");
  return llvm::Error::success();
}

bool CudaKernel::anyEmpty() const {
  for (const Value *v : node_->operands())
    if (v->type().numElements() == 0)
      return true;
  for (const auto &r : node_->results())
    if (r->type().numElements() == 0)
      return true;
  return false;
}

template <int Ops>
llvm::Expected<cuda::StridedIndex<Ops>> toStridedIndex(const Node &n, const plain::LoopNest &nest) {
  assert(nest.strides.size() == (size_t)Ops && "operand count differs from the index");
  if (nest.dims.size() > (size_t)cuda::kMaxRank)
    return nodeError(n, "needs " + llvm::Twine(nest.dims.size()) +
                            " dimensions after merging contiguous axes; the CUDA kernels index "
                            "at most " +
                            llvm::Twine(cuda::kMaxRank));
  cuda::StridedIndex<Ops> index;
  index.rank = (int)nest.dims.size();
  for (size_t d = 0; d < nest.dims.size(); ++d) {
    index.dims[d] = nest.dims[d];
    for (int k = 0; k < Ops; ++k)
      index.strides[k][d] = nest.strides[k][d];
  }
  for (int k = 0; k < Ops; ++k)
    index.base[k] = nest.base[k];
  return index;
}

template llvm::Expected<cuda::StridedIndex<1>> toStridedIndex<1>(const Node &,
                                                                 const plain::LoopNest &);
template llvm::Expected<cuda::StridedIndex<2>> toStridedIndex<2>(const Node &,
                                                                 const plain::LoopNest &);
template llvm::Expected<cuda::StridedIndex<3>> toStridedIndex<3>(const Node &,
                                                                 const plain::LoopNest &);

llvm::Expected<cuda::StridedIndex<2>> broadcastIndex2(const Node &n, llvm::ArrayRef<int64_t> out,
                                                      llvm::ArrayRef<int64_t> a,
                                                      llvm::ArrayRef<int64_t> b) {
  return toStridedIndex<2>(
      n, plain::broadcastNest(out, {Dims(a.begin(), a.end()), Dims(b.begin(), b.end())}));
}

llvm::Error copyOnDevice(void *to, const void *from, size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || to == from)
    return llvm::Error::success();
  GRAPHC_CUDA_TRY(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
  return llvm::Error::success();
}

llvm::Error convertTensor(const TensorView &from, const TensorView &to, cudaStream_t stream) {
  assert(from.numElements() == to.numElements() && "views of one shape");
  if (from.data == to.data && from.dtype == to.dtype && from.layout == to.layout)
    return llvm::Error::success();
  if (from.layout == to.layout) {
    if (from.dtype == to.dtype)
      return copyOnDevice(to.data, from.data, to.bytes(), stream);
    GRAPHC_CUDA_TRY(cuda::launchCast(cuda::elemType(from.dtype), cuda::elemType(to.dtype),
                                     to.numElements(), to.data, from.data, stream));
    return llvm::Error::success();
  }
  assert(from.shape.size() == 4 && "layouts differ on 4-D tensors only");
  const llvm::ArrayRef<int64_t> d = from.shape;
  GRAPHC_CUDA_TRY(cuda::launchLayoutCopy(
      cuda::elemType(from.dtype), cuda::elemType(to.dtype),
      cuda::layoutCopyShape(d[0], d[1], d[2], d[3], to.layout == Layout::ChannelsLast), to.data,
      from.data, stream));
  return llvm::Error::success();
}

} // namespace graphc
