//===- DnnlCompat.h - oneDNN 2.x and 3.x behind one set of calls -*- C++ -*-===//
//
// The CPU kernels build against Debian's oneDNN 2.6 (the default) or against
// oneDNN 3.x (GRAPHC_DNNL_ROOT, scripts/fetch-onednn3). Where the two APIs
// differ, the kernels call the functions here, and this header is the only
// place that asks which version it compiles against:
//
//  - 2.x makes an operation descriptor and then its primitive descriptor; 3.x
//    makes the primitive descriptor directly, the engine first;
//  - 2.x's pooling with dilations is pooling_v2; 3.x's pooling has them;
//  - 3.x's batch normalization names its destination (and, backward, its
//    source) besides the data descriptor 2.x takes for all of them, and its
//    gradient does not take the shift, which 2.x's asks for;
//  - 2.x's eltwise post-op has a scale; 3.x's has none;
//  - 2.x fixes an output scale in the attribute; 3.x sets a scale mask there
//    and takes the value as an argument of every run (ProductScale).
//
// The kernels ask both for the same descriptors; the implementations oneDNN
// picks for them, and so their formats, scratch and rounding, may differ (3.x
// has no Winograd convolution: cpuHasWinograd() asks the library, not this
// header). docs/performance.md, "oneDNN 2.6 or 3.2", compares the two.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/DnnlEngine.h"

#include <unordered_map>

namespace graphc::onednn {

using desc = dnnl::memory::desc;
using dims = dnnl::memory::dims;

#if DNNL_VERSION_MAJOR >= 3
using PoolingForward = dnnl::pooling_forward;
using PoolingBackward = dnnl::pooling_backward;
#else
using PoolingForward = dnnl::pooling_v2_forward;
using PoolingBackward = dnnl::pooling_v2_backward;
#endif

/// A forward convolution; `bias` a zero descriptor (desc()) for none.
inline dnnl::convolution_forward::primitive_desc
convForwardPd(dnnl::prop_kind kind, dnnl::algorithm alg, const desc &src, const desc &weights,
              const desc &bias, const desc &dst, const dims &strides, const dims &dilates,
              const dims &padL, const dims &padR, const dnnl::primitive_attr &attr) {
  using conv = dnnl::convolution_forward;
#if DNNL_VERSION_MAJOR >= 3
  if (bias.is_zero())
    return conv::primitive_desc(cpuEngine(), kind, alg, src, weights, dst, strides, dilates, padL,
                                padR, attr);
  return conv::primitive_desc(cpuEngine(), kind, alg, src, weights, bias, dst, strides, dilates,
                              padL, padR, attr);
#else
  auto d = bias.is_zero()
               ? conv::desc(kind, alg, src, weights, dst, strides, dilates, padL, padR)
               : conv::desc(kind, alg, src, weights, bias, dst, strides, dilates, padL, padR);
  return conv::primitive_desc(d, attr, cpuEngine());
#endif
}

/// A convolution's gradient, Conv convolution_backward_data (descriptors
/// diff_src, weights, diff_dst) or convolution_backward_weights (src,
/// diff_weights, diff_dst).
template <class Conv>
typename Conv::primitive_desc
convBackwardPd(dnnl::algorithm alg, const desc &a, const desc &b, const desc &diffDst,
               const dims &strides, const dims &dilates, const dims &padL, const dims &padR,
               const dnnl::convolution_forward::primitive_desc &hint,
               const dnnl::primitive_attr &attr) {
#if DNNL_VERSION_MAJOR >= 3
  return typename Conv::primitive_desc(cpuEngine(), alg, a, b, diffDst, strides, dilates, padL,
                                       padR, hint, attr);
#else
  typename Conv::desc d(alg, a, b, diffDst, strides, dilates, padL, padR);
  return typename Conv::primitive_desc(d, attr, cpuEngine(), hint);
#endif
}

/// A matrix product; `bias` a zero descriptor (desc()) for none.
inline dnnl::matmul::primitive_desc matmulPd(const desc &src, const desc &weights, const desc &bias,
                                             const desc &dst, const dnnl::primitive_attr &attr) {
#if DNNL_VERSION_MAJOR >= 3
  if (bias.is_zero())
    return dnnl::matmul::primitive_desc(cpuEngine(), src, weights, dst, attr);
  return dnnl::matmul::primitive_desc(cpuEngine(), src, weights, bias, dst, attr);
#else
  auto d = bias.is_zero() ? dnnl::matmul::desc(src, weights, dst)
                          : dnnl::matmul::desc(src, weights, bias, dst);
  return dnnl::matmul::primitive_desc(d, attr, cpuEngine());
#endif
}

/// Pooling with dilations (oneDNN counts dilation - 1).
inline PoolingForward::primitive_desc
poolingForwardPd(dnnl::prop_kind kind, dnnl::algorithm alg, const desc &src, const desc &dst,
                 const dims &strides, const dims &kernel, const dims &dilates, const dims &padL,
                 const dims &padR, const dnnl::primitive_attr &attr) {
#if DNNL_VERSION_MAJOR >= 3
  return PoolingForward::primitive_desc(cpuEngine(), kind, alg, src, dst, strides, kernel, dilates,
                                        padL, padR, attr);
#else
  PoolingForward::desc d(kind, alg, src, dst, strides, kernel, dilates, padL, padR);
  return PoolingForward::primitive_desc(d, attr, cpuEngine());
#endif
}

inline PoolingBackward::primitive_desc poolingBackwardPd(dnnl::algorithm alg, const desc &diffSrc,
                                                         const desc &diffDst, const dims &strides,
                                                         const dims &kernel, const dims &dilates,
                                                         const dims &padL, const dims &padR,
                                                         const PoolingForward::primitive_desc &hint,
                                                         const dnnl::primitive_attr &attr) {
#if DNNL_VERSION_MAJOR >= 3
  return PoolingBackward::primitive_desc(cpuEngine(), alg, diffSrc, diffDst, strides, kernel,
                                         dilates, padL, padR, hint, attr);
#else
  PoolingBackward::desc d(alg, diffSrc, diffDst, strides, kernel, dilates, padL, padR);
  return PoolingBackward::primitive_desc(d, attr, cpuEngine(), hint);
#endif
}

/// Batch normalization whose source and destination are both in `data`.
inline dnnl::batch_normalization_forward::primitive_desc
batchNormForwardPd(dnnl::prop_kind kind, const desc &data, float epsilon,
                   dnnl::normalization_flags flags, const dnnl::primitive_attr &attr) {
  using bn = dnnl::batch_normalization_forward;
#if DNNL_VERSION_MAJOR >= 3
  return bn::primitive_desc(cpuEngine(), kind, data, data, epsilon, flags, attr);
#else
  return bn::primitive_desc(bn::desc(kind, data, epsilon, flags), attr, cpuEngine());
#endif
}

/// Its gradient (prop_kind::backward: with the scale's and shift's), every
/// activation and gradient in `data`.
inline dnnl::batch_normalization_backward::primitive_desc
batchNormBackwardPd(const desc &data, float epsilon, dnnl::normalization_flags flags,
                    const dnnl::batch_normalization_forward::primitive_desc &hint,
                    const dnnl::primitive_attr &attr) {
  using bn = dnnl::batch_normalization_backward;
  auto kind = dnnl::prop_kind::backward;
#if DNNL_VERSION_MAJOR >= 3
  return bn::primitive_desc(cpuEngine(), kind, data, data, data, epsilon, flags, hint, attr);
#else
  return bn::primitive_desc(bn::desc(kind, data, data, epsilon, flags), attr, cpuEngine(), hint);
#endif
}

/// Whether that gradient's run takes the shift (DNNL_ARG_SHIFT): 2.x asks for
/// it whenever it computes the shift's gradient, 3.x refuses it.
inline constexpr bool kBatchNormBackwardTakesShift = DNNL_VERSION_MAJOR < 3;

/// An eltwise post-op applied to the whole result (no scale).
inline void appendEltwise(dnnl::post_ops &ops, dnnl::algorithm alg, float alpha, float beta) {
#if DNNL_VERSION_MAJOR >= 3
  ops.append_eltwise(alg, alpha, beta);
#else
  ops.append_eltwise(1.0f, alg, alpha, beta);
#endif
}

/// One scale of a product, the same for every element (Gemm's alpha): 2.x
/// fixes it in the primitive's attribute as its output scale; 3.x scales the
/// weights (mask 0 in the attribute) by a value passed with every run.
class ProductScale {
public:
  /// Sets `scale` into `attr`, before the primitive descriptor is made.
  void apply(dnnl::primitive_attr &attr, float scale) {
    scale_ = scale;
#if DNNL_VERSION_MAJOR >= 3
    attr.set_scales_mask(DNNL_ARG_WEIGHTS, 0);
#else
    attr.set_output_scales(0, {scale});
#endif
  }
  /// Adds what a run of the primitive needs for the scale to `args`.
  void addArgs(std::unordered_map<int, dnnl::memory> &args) {
#if DNNL_VERSION_MAJOR >= 3
    args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS] = dnnl::memory(
        desc({1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a), cpuEngine(), &scale_);
#else
    (void)args;
#endif
  }

private:
  float scale_ = 1;
};

} // namespace graphc::onednn
