//===- CudaKernel.cpp - The CUDA kernels' base class and helpers ----------===//

#include "kernels/cuda/CudaKernel.h"

#include "kernels/LoopNest.h"

namespace graphc {

llvm::Error inNode(const Node &n, llvm::Error e) {
  if (!e)
    return e;
  return withContext(std::move(e), "node '" + n.name() + "' (" + opName(n.op()) + ")");
}

llvm::Error CudaKernel::run(KernelContext &ctx) {
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

} // namespace graphc
