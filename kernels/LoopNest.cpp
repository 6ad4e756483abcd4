//===- LoopNest.cpp - Building and collapsing loop nests ------------------===//

#include "kernels/LoopNest.h"

#include "ir/ShapeInference.h"

namespace graphc {
namespace plain {

int64_t product(llvm::ArrayRef<int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i)
    p *= dims[i];
  return p;
}

Dims contiguousStrides(llvm::ArrayRef<int64_t> shape) {
  Dims s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

void LoopNest::collapse() {
  size_t ops = strides.size();
  Dims newDims;
  llvm::SmallVector<Dims, 3> newStrides(ops);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1)
      continue;
    bool merges = !newDims.empty();
    for (size_t k = 0; k < ops && merges; ++k)
      merges = newStrides[k].back() == strides[k][d] * dims[d];
    if (merges) {
      newDims.back() *= dims[d];
      for (size_t k = 0; k < ops; ++k)
        newStrides[k].back() = strides[k][d];
      continue;
    }
    newDims.push_back(dims[d]);
    for (size_t k = 0; k < ops; ++k)
      newStrides[k].push_back(strides[k][d]);
  }
  if (newDims.empty()) {
    newDims.push_back(1);
    for (size_t k = 0; k < ops; ++k)
      newStrides[k].push_back(0);
  }
  dims = std::move(newDims);
  strides = std::move(newStrides);
}

LoopNest broadcastNest(llvm::ArrayRef<int64_t> out, llvm::ArrayRef<Dims> operands) {
  LoopNest nest;
  nest.dims.assign(out.begin(), out.end());
  for (const Dims &shape : operands) {
    assert(shape.size() <= out.size() && "operand has a higher rank than the output");
    Dims own = contiguousStrides(shape);
    Dims s(out.size(), 0);
    size_t lead = out.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d)
      s[lead + d] = shape[d] == 1 ? 0 : own[d];
    nest.strides.push_back(std::move(s));
    nest.base.push_back(0);
  }
  nest.collapse();
  return nest;
}

LoopNest stridedCopyNest(const Node &n) {
  const TensorType &in = n.operand(0)->type(), &out = n.result()->type();
  if (n.op() == Op::Expand)
    return broadcastNest(out.shape, {Dims(in.shape)});
  Dims inStrides = contiguousStrides(in.shape);
  LoopNest nest;
  nest.dims = out.shape;
  nest.base.push_back(0);
  Dims strides(out.rank(), 0);
  if (n.op() == Op::Transpose) {
    Ints perm = n.attrs().getInts("perm");
    for (size_t d = 0; d < out.rank(); ++d)
      strides[d] = inStrides[perm.empty() ? out.rank() - 1 - d : perm[d]];
  } else { // Slice
    const Attrs &a = n.attrs();
    Ints starts = a.getInts("starts"), ends = a.getInts("ends");
    Ints axes = a.getInts("axes"), steps = a.getInts("steps");
    strides.assign(inStrides.begin(), inStrides.end());
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t ax = axes.empty() ? (int64_t)i : axes[i];
      if (ax < 0)
        ax += (int64_t)in.rank();
      SliceRange r = resolveSlice(in.shape[ax], starts[i], ends[i], steps.empty() ? 1 : steps[i]);
      nest.base[0] += r.start * inStrides[ax];
      strides[ax] = inStrides[ax] * r.step;
    }
  }
  nest.strides.push_back(std::move(strides));
  nest.collapse();
  return nest;
}

} // namespace plain
} // namespace graphc
