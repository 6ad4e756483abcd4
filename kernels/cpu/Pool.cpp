//===- Pool.cpp - Max, average and global average pooling (oneDNN) ---------===//
//
// MaxPool, AveragePool (count_include_pad 0/1), GlobalAveragePool, and the
// gradients MaxPoolGrad (x, dy) and AveragePoolGrad (dy; input_shape), with
// asymmetric pads, ceil_mode and (MaxPool) dilations.
//
// A pooling primitive computes in the layout of its leading activation (x,
// or dy for AveragePoolGrad); one primitive per layout the executor may use,
// created on first use. Other activations are staged through scratch when
// their layout differs.
//
// ceil_mode is oneDNN's floor with a wider end padding. That padding is
// invisible to max pooling and to average pooling without padding counted;
// with count_include_pad=1 PyTorch divides a window that overhangs the padded
// input by the part of it inside (input plus explicit pads), where oneDNN
// divides by the full window, so those border outputs (and their gradients)
// are corrected after the primitive runs.
//
// MaxPoolGrad needs the forward pass's argmax workspace, which the graph does
// not carry: it recomputes the forward pooling of x into scratch. Ties go to
// the first maximum in the window, as in PyTorch.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/DnnlCompat.h"
#include "kernels/cpu/DnnlKernel.h"

#include <array>

namespace graphc {
namespace {

using dims = dnnl::memory::dims;

struct PoolGeometry {
  Dims x, y; // [N,C,H,W...], [N,C,OH,OW...]
  dims kernel, strides, dilates, padL, padR;
  Ints padEnd; ///< the explicit end pads (padR may be wider, for ceil_mode)
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  DType dtype = DType::F32; ///< f32 or bf16

  /// Average pooling with padding counted whose window overhangs the padded
  /// input somewhere: the case whose divisors need correcting.
  bool overhangs() const {
    if (alg != dnnl::algorithm::pooling_avg_include_padding)
      return false;
    for (size_t i = 0; i < kernel.size(); ++i)
      if ((y[2 + i] - 1) * strides[i] - padL[i] + kernel[i] > x[2 + i] + padEnd[i])
        return true;
    return false;
  }
};

llvm::Expected<PoolGeometry> readGeometry(const Node &n, Dims x, Dims y) {
  PoolGeometry g;
  g.x = std::move(x);
  g.y = std::move(y);
  g.dtype = n.operand(0)->type().dtype;
  // Windows are 2-d except for GlobalAveragePool's, which has 1 to 3
  // spatial dimensions.
  bool global = n.op() == Op::GlobalAveragePool;
  if ((global ? g.x.size() < 3 || g.x.size() > 5 : g.x.size() != 4) || g.y.size() != g.x.size() ||
      g.x[0] != g.y[0] || g.x[1] != g.y[1])
    return nodeError(n, "input " + shapeToString(g.x) + " and output " + shapeToString(g.y) +
                            " do not fit a pooling");
  const Attrs &a = n.attrs();
  size_t s = g.x.size() - 2;
  if (n.op() == Op::MaxPool || n.op() == Op::MaxPoolGrad)
    g.alg = dnnl::algorithm::pooling_max;
  else if (global || !a.getInt("count_include_pad"))
    g.alg = dnnl::algorithm::pooling_avg_exclude_padding;
  else
    g.alg = dnnl::algorithm::pooling_avg_include_padding;
  Ints kernel = a.getInts("kernel_shape"), strides = a.getInts("strides", Ints(s, 1));
  Ints pads = a.getInts("pads", Ints(2 * s, 0)), dilations = a.getInts("dilations", Ints(s, 1));
  if (global) {
    kernel.assign(g.x.begin() + 2, g.x.end());
    strides = dilations = Ints(s, 1);
    pads = Ints(2 * s, 0);
  }
  if (kernel.size() != s || strides.size() != s || pads.size() != 2 * s || dilations.size() != s)
    return nodeError(n, "kernel_shape, strides, pads or dilations do not match a " +
                            llvm::Twine(s) + "-d window");
  bool average = g.alg != dnnl::algorithm::pooling_max;
  for (size_t i = 0; i < s; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + s] < 0)
      return nodeError(n, "window sizes, strides and dilations must be positive, pads "
                          "non-negative");
    if (average && dilations[i] != 1)
      return nodeError(n, "dilated average pooling is not supported");
    int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    int64_t floorOut = (g.x[2 + i] + pads[i] + pads[i + s] - extent) / strides[i] + 1;
    if (g.y[2 + i] != floorOut && g.y[2 + i] != floorOut + 1)
      return nodeError(n, "output " + shapeToString(g.y) + " does not match input " +
                              shapeToString(g.x) + " under this window");
    g.kernel.push_back(kernel[i]);
    g.strides.push_back(strides[i]);
    g.dilates.push_back(dilations[i] - 1);
    g.padL.push_back(pads[i]);
    g.padEnd.push_back(pads[i + s]);
    // ceil_mode: one more window than the floor gives; widen the end padding.
    g.padR.push_back(
        std::max(pads[i + s], (g.y[2 + i] - 1) * strides[i] + extent - g.x[2 + i] - pads[i]));
  }
  if (g.overhangs() && g.dtype != DType::F32)
    return nodeError(n, "average pooling that counts padding with ceil_mode is f32 only");
  return g;
}

/// Where a window overhangs the padded input (count_include_pad=1 with
/// ceil_mode), PyTorch divides by the part inside the padded input and
/// oneDNN by the whole window. For output (oh, ow): the window's first input
/// row/column and the true divisor.
struct Overhang {
  const PoolGeometry &g;

  int64_t start(int d, int64_t o) const { return o * g.strides[d] - g.padL[d]; }
  int64_t inside(int d, int64_t o) const {
    return std::min(start(d, o) + g.kernel[d], g.x[2 + d] + g.padEnd[d]) - start(d, o);
  }
  /// Calls fn(oh, ow, divisor) for every output whose divisor differs.
  template <typename Fn> void forEach(Fn fn) const {
    int64_t full = g.kernel[0] * g.kernel[1];
    for (int64_t oh = 0; oh < g.y[2]; ++oh)
      for (int64_t ow = 0; ow < g.y[3]; ++ow) {
        int64_t divisor = inside(0, oh) * inside(1, ow);
        if (divisor != full)
          fn(oh, ow, divisor);
      }
  }

  /// y was divided by the full window; divide by the true divisor instead.
  void forward(float *y, Layout l) const {
    Index4 iy{g.y[1], g.y[2], g.y[3], l};
    double full = g.kernel[0] * g.kernel[1];
#pragma omp parallel for
    for (int64_t nc = 0; nc < g.y[0] * g.y[1]; ++nc)
      forEach([&](int64_t oh, int64_t ow, int64_t divisor) {
        y[iy(nc / g.y[1], nc % g.y[1], oh, ow)] *= (float)(full / divisor);
      });
  }

  /// dx got dy / full window over each window's inputs; add the difference.
  void backward(const float *dy, float *dx, Layout l) const {
    Index4 iy{g.y[1], g.y[2], g.y[3], l}, ix{g.x[1], g.x[2], g.x[3], l};
    double full = g.kernel[0] * g.kernel[1];
#pragma omp parallel for
    for (int64_t nc = 0; nc < g.y[0] * g.y[1]; ++nc) {
      int64_t n = nc / g.y[1], c = nc % g.y[1];
      forEach([&](int64_t oh, int64_t ow, int64_t divisor) {
        float extra = (float)(dy[iy(n, c, oh, ow)] * (1.0 / divisor - 1.0 / full));
        for (int64_t h = std::max<int64_t>(start(0, oh), 0);
             h < std::min(start(0, oh) + g.kernel[0], g.x[2]); ++h)
          for (int64_t w = std::max<int64_t>(start(1, ow), 0);
               w < std::min(start(1, ow) + g.kernel[1], g.x[3]); ++w)
            dx[ix(n, c, h, w)] += extra;
      });
    }
  }
};

onednn::PoolingForward::primitive_desc
forwardPd(const PoolGeometry &g, Layout l, dnnl::prop_kind kind, const dnnl::primitive_attr &attr) {
  return onednn::poolingForwardPd(kind, g.alg, layoutDesc(TensorType(g.dtype, g.x), l),
                                  layoutDesc(TensorType(g.dtype, g.y), l), g.strides, g.kernel,
                                  g.dilates, g.padL, g.padR, attr);
}

/// The gradient of `fwd`, in its layouts.
onednn::PoolingBackward::primitive_desc
backwardPd(const PoolGeometry &g, const onednn::PoolingForward::primitive_desc &fwd,
           const dnnl::primitive_attr &attr) {
  return onednn::poolingBackwardPd(g.alg, fwd.src_desc(), fwd.dst_desc(), g.strides, g.kernel,
                                   g.dilates, g.padL, g.padR, fwd, attr);
}

/// MaxPool, AveragePool, GlobalAveragePool.
class PoolKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    auto g = readGeometry(node(), operandType(0).shape, resultType(0).shape);
    if (!g)
      return g.takeError();
    geo_ = *g;
    for (Layout l : layoutsOf(operandType(0)))
      prims_[(int)l].pd = forwardPd(geo_, l, dnnl::prop_kind::forward_inference, userScratchpad());
    allowActivationOperand(0);
    allowActivationResult(0);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    const auto &p = prims_[(int)ls.in[0]];
    return Staging::bytes(layoutDesc(resultType(0), ls.out[0]), p.pd.dst_desc()) + p.scratchpad();
  }

  void prepareFor(const Layouts &ls) override { prims_[(int)ls.in[0]].get(); }

  void execute(KernelContext &ctx, Staging &s) override {
    Layout l = ctx.inputs[0].layout;
    auto &p = prims_[(int)l];
    dnnl::memory y = s.write(ctx.outputs[0], p.pd.dst_desc());
    s.execute(p.get(), {{DNNL_ARG_SRC, s.read(ctx.inputs[0], p.pd.src_desc())},
                                 {DNNL_ARG_DST, y},
                                 {DNNL_ARG_SCRATCHPAD, s.temp(p.pd.scratchpad_desc())}});
    if (geo_.overhangs()) {
      s.stream().wait();
      Overhang{geo_}.forward(static_cast<float *>(y.get_data_handle()), l);
    }
  }

private:
  PoolGeometry geo_;
  std::array<LazyPrimitive<onednn::PoolingForward>, kLayoutCount> prims_;
};

/// MaxPoolGrad (x, dy) -> dx: recomputes the forward pass for its workspace.
class MaxPoolGradKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    auto g = readGeometry(node(), operandType(0).shape, operandType(1).shape);
    if (!g)
      return g.takeError();
    geo_ = *g;
    for (Layout l : layoutsOf(operandType(0))) {
      auto &v = variants_[(int)l];
      v.fwd.pd = forwardPd(geo_, l, dnnl::prop_kind::forward_training, userScratchpad());
      v.bwd.pd = backwardPd(geo_, v.fwd.pd, userScratchpad());
    }
    allowActivationOperand(0);
    allowActivationOperand(1);
    allowActivationResult(0);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    const Variant &v = variants_[(int)ls.in[0]];
    return roundScratch(v.fwd.pd.dst_desc().get_size()) +
           roundScratch(v.fwd.pd.workspace_desc().get_size()) + v.fwd.scratchpad() +
           Staging::bytes(layoutDesc(operandType(1), ls.in[1]), v.bwd.pd.diff_dst_desc()) +
           Staging::bytes(layoutDesc(resultType(0), ls.out[0]), v.bwd.pd.diff_src_desc()) +
           v.bwd.scratchpad();
  }

  void prepareFor(const Layouts &ls) override {
    Variant &v = variants_[(int)ls.in[0]];
    v.fwd.get();
    v.bwd.get();
  }

  void execute(KernelContext &ctx, Staging &s) override {
    Variant &v = variants_[(int)ctx.inputs[0].layout];
    dnnl::memory workspace = s.temp(v.fwd.pd.workspace_desc());
    s.execute(v.fwd.get(), {{DNNL_ARG_SRC, s.read(ctx.inputs[0], v.fwd.pd.src_desc())},
                                     {DNNL_ARG_DST, s.temp(v.fwd.pd.dst_desc())},
                                     {DNNL_ARG_WORKSPACE, workspace},
                                     {DNNL_ARG_SCRATCHPAD, s.temp(v.fwd.pd.scratchpad_desc())}});
    s.execute(v.bwd.get(), {{DNNL_ARG_DIFF_DST, s.read(ctx.inputs[1], v.bwd.pd.diff_dst_desc())},
                         {DNNL_ARG_DIFF_SRC, s.write(ctx.outputs[0], v.bwd.pd.diff_src_desc())},
                         {DNNL_ARG_WORKSPACE, workspace},
                         {DNNL_ARG_SCRATCHPAD, s.temp(v.bwd.pd.scratchpad_desc())}});
  }

private:
  struct Variant {
    LazyPrimitive<onednn::PoolingForward> fwd;
    LazyPrimitive<onednn::PoolingBackward> bwd;
  };
  PoolGeometry geo_;
  std::array<Variant, kLayoutCount> variants_;
};

/// AveragePoolGrad (dy) -> dx; attribute input_shape.
class AveragePoolGradKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    auto g = readGeometry(node(), resultType(0).shape, operandType(0).shape);
    if (!g)
      return g.takeError();
    geo_ = *g;
    for (Layout l : layoutsOf(operandType(0))) {
      auto hint = forwardPd(geo_, l, dnnl::prop_kind::forward_training, dnnl::primitive_attr());
      prims_[(int)l].pd = backwardPd(geo_, hint, userScratchpad());
    }
    allowActivationOperand(0);
    allowActivationResult(0);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    const auto &p = prims_[(int)ls.in[0]];
    return Staging::bytes(layoutDesc(resultType(0), ls.out[0]), p.pd.diff_src_desc()) +
           p.scratchpad();
  }

  void prepareFor(const Layouts &ls) override { prims_[(int)ls.in[0]].get(); }

  void execute(KernelContext &ctx, Staging &s) override {
    Layout l = ctx.inputs[0].layout;
    auto &p = prims_[(int)l];
    dnnl::memory dx = s.write(ctx.outputs[0], p.pd.diff_src_desc());
    s.execute(p.get(), {{DNNL_ARG_DIFF_DST, s.read(ctx.inputs[0], p.pd.diff_dst_desc())},
                                 {DNNL_ARG_DIFF_SRC, dx},
                                 {DNNL_ARG_SCRATCHPAD, s.temp(p.pd.scratchpad_desc())}});
    if (geo_.overhangs()) {
      s.stream().wait();
      Overhang{geo_}.backward(ctx.inputs[0].as<float>(), static_cast<float *>(dx.get_data_handle()),
                              l);
    }
  }

private:
  PoolGeometry geo_;
  std::array<LazyPrimitive<onednn::PoolingBackward>, kLayoutCount> prims_;
};

} // namespace

void registerCpuPoolKernels(KernelRegistry &r) {
  auto types = {DType::F32, DType::BF16};
  r.add(Op::MaxPool, DeviceKind::CPU, types, dnnlFactory<PoolKernel>());
  r.add(Op::AveragePool, DeviceKind::CPU, types, dnnlFactory<PoolKernel>());
  r.add(Op::GlobalAveragePool, DeviceKind::CPU, types, dnnlFactory<PoolKernel>());
  r.add(Op::MaxPoolGrad, DeviceKind::CPU, types, dnnlFactory<MaxPoolGradKernel>());
  r.add(Op::AveragePoolGrad, DeviceKind::CPU, types, dnnlFactory<AveragePoolGradKernel>());
}

} // namespace graphc
