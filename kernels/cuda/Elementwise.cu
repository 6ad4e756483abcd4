//===- Elementwise.cu - Binary, unary, Cast, AddN, compare and Where -------===//
//
// Grid-stride loops over the output with 64-bit indices; each thread reads
// its operands and writes its own output element, so an output may alias a
// same-shaped operand. The per-element work is ElementwiseDevice.h's.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Dispatch.cuh"

namespace graphc {
namespace cuda {
namespace {

template <typename T>
__global__ void binaryKernel(BinaryOp op, ElemParams p, StridedIndex<2> index, int64_t n, T *out,
                             const T *a, const T *b) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t off[2];
    index.offsets(i, off);
    out[i] = binaryElement(op, a[off[0]], b[off[1]], p);
  }
}

template <typename T>
__global__ void unaryKernel(UnaryOp op, ElemParams p, int64_t n, T *out, const T *in) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = unaryElement(op, in[i], p);
}

template <typename To, typename From>
__global__ void castKernel(int64_t n, To *out, const From *in) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = convertElement<To>(in[i]);
}

template <typename T> __global__ void addNKernel(int64_t n, T *out, AddNOperands ops) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    if constexpr (isHalfLike<T>) {
      float acc = toFloat(static_cast<const T *>(ops.in[0])[i]);
      for (int k = 1; k < ops.count; ++k)
        acc += toFloat(static_cast<const T *>(ops.in[k])[i]);
      out[i] = fromFloat<T>(acc);
    } else {
      T acc = static_cast<const T *>(ops.in[0])[i];
      for (int k = 1; k < ops.count; ++k)
        acc += static_cast<const T *>(ops.in[k])[i];
      out[i] = acc;
    }
  }
}

template <typename T>
__global__ void compareKernel(CompareOp op, StridedIndex<2> index, int64_t n, Bool8 *out,
                              const T *a, const T *b) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t off[2];
    index.offsets(i, off);
    out[i] = compareElement(op, a[off[0]], b[off[1]]);
  }
}

__global__ void notKernel(int64_t n, Bool8 *out, const Bool8 *in) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = notElement(in[i]);
}

template <typename T>
__global__ void whereKernel(StridedIndex<3> index, int64_t n, T *out, const Bool8 *c, const T *a,
                            const T *b) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t off[3];
    index.offsets(i, off);
    out[i] = whereElement(c[off[0]], a[off[1]], b[off[2]]);
  }
}

} // namespace

cudaError_t launchCompare(CompareOp op, ElemType t, const StridedIndex<2> &index, int64_t n,
                          void *out, const void *a, const void *b, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitNumericType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    compareKernel<T><<<l.blocks, l.threads, 0, stream>>>(op, index, n, static_cast<Bool8 *>(out),
                                                         static_cast<const T *>(a),
                                                         static_cast<const T *>(b));
    return launched();
  });
}

cudaError_t launchNot(int64_t n, void *out, const void *in, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  notKernel<<<l.blocks, l.threads, 0, stream>>>(n, static_cast<Bool8 *>(out),
                                                static_cast<const Bool8 *>(in));
  return launched();
}

cudaError_t launchWhere(ElemType t, const StridedIndex<3> &index, int64_t n, void *out,
                        const void *cond, const void *a, const void *b, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitAnyType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    whereKernel<T><<<l.blocks, l.threads, 0, stream>>>(
        index, n, static_cast<T *>(out), static_cast<const Bool8 *>(cond),
        static_cast<const T *>(a), static_cast<const T *>(b));
    return launched();
  });
}

cudaError_t launchBinary(BinaryOp op, ElemType t, ElemParams p, const StridedIndex<2> &index,
                         int64_t n, void *out, const void *a, const void *b, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitNumericType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binaryKernel<T><<<l.blocks, l.threads, 0, stream>>>(op, p, index, n, static_cast<T *>(out),
                                                        static_cast<const T *>(a),
                                                        static_cast<const T *>(b));
    return launched();
  });
}

cudaError_t launchUnary(UnaryOp op, ElemType t, ElemParams p, int64_t n, void *out, const void *in,
                        cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitNumericType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unaryKernel<T><<<l.blocks, l.threads, 0, stream>>>(op, p, n, static_cast<T *>(out),
                                                       static_cast<const T *>(in));
    return launched();
  });
}

cudaError_t launchCast(ElemType from, ElemType to, int64_t n, void *out, const void *in,
                       cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitAnyType(from, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    return visitAnyType(to, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      castKernel<To, From><<<l.blocks, l.threads, 0, stream>>>(n, static_cast<To *>(out),
                                                               static_cast<const From *>(in));
      return launched();
    });
  });
}

cudaError_t launchAddN(ElemType t, int64_t n, void *out, const AddNOperands &ops,
                       cudaStream_t stream) {
  if (ops.count < 1 || ops.count > kMaxAddN)
    return cudaErrorInvalidValue;
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitNumericType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    addNKernel<T><<<l.blocks, l.threads, 0, stream>>>(n, static_cast<T *>(out), ops);
    return launched();
  });
}

} // namespace cuda
} // namespace graphc
