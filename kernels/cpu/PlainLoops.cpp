//===- PlainLoops.cpp - Loop nests and strided copies ---------------------===//
//
// The out-of-line half of PlainLoops.h: building and collapsing loop nests,
// and the one strided copy that Transpose, Slice, Expand and friends share.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/PlainLoops.h"

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

template <typename T> static void copyRuns(T *out, const T *in, const LoopNest &nest) {
  int64_t stride = nest.innerStride(0);
  parallelFor(nest.numElements(), kGrain, [&](int64_t begin, int64_t end) {
    nest.forEachRun(begin, end, [&](int64_t o, const int64_t *off, int64_t len) {
      const T *src = in + off[0];
      T *dst = out + o;
      if (stride == 1) {
        std::memcpy(dst, src, len * sizeof(T));
      } else if (stride == 0) {
        std::fill(dst, dst + len, *src);
      } else {
        for (int64_t i = 0; i < len; ++i)
          dst[i] = src[i * stride];
      }
    });
  });
}

void stridedCopy(void *out, const void *in, const LoopNest &nest, size_t elemSize) {
  if (nest.numElements() == 0)
    return;
  switch (elemSize) {
  case 1:
    return copyRuns(static_cast<uint8_t *>(out), static_cast<const uint8_t *>(in), nest);
  case 2:
    return copyRuns(static_cast<uint16_t *>(out), static_cast<const uint16_t *>(in), nest);
  case 4:
    return copyRuns(static_cast<uint32_t *>(out), static_cast<const uint32_t *>(in), nest);
  default:
    assert(elemSize == 8 && "unexpected element size");
    return copyRuns(static_cast<uint64_t *>(out), static_cast<const uint64_t *>(in), nest);
  }
}

bool sameLayout(const KernelContext &ctx) {
  Layout l = ctx.outputs.empty() ? ctx.inputs[0].layout : ctx.outputs[0].layout;
  for (const TensorView &v : ctx.inputs)
    if (v.layout != l)
      return false;
  for (const TensorView &v : ctx.outputs)
    if (v.layout != l)
      return false;
  return true;
}

} // namespace plain
} // namespace graphc
