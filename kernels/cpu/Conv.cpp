//===- Conv.cpp - 2-d convolution and its two gradients (oneDNN) ------------===//
//
// Conv (x, w[, b]) -> y, ConvGradData (dy, w) -> dx and ConvGradFilter
// (x, dy) -> dw, with groups, dilations, strides and asymmetric pads. The
// bias gradient is a ReduceSum elsewhere.
//
// In bf16 (--precision bf16) the activations are bf16 and the weights, bias
// and filter gradient may stay f32: the weights' reorder into the
// primitive's format converts them, and the filter gradient, accumulated in
// f32 by oneDNN, is written as f32 without a rounding to bf16.
//
// Each kernel builds one oneDNN primitive, its weights' format left to oneDNN
// (format_tag::any) and its activations in the layout the executor keeps
// them in on this CPU (cpuActivationLayout: nChw16c on AVX-512, nChw8c on
// AVX2, channels-last for bf16 on AMX; the gradients' blocked formats are
// left to oneDNN too, which picks them), and tells the executor that layout
// as its preference.
// Activations are read and written in place when the executor's layout
// agrees with that choice and reordered through scratch when it does not; weights (plain
// OIHW, goihw with groups) are reordered every run, since they change every
// training step, except where no step changes them (inference: KeptOperand
// reorders them once). An inference Conv may carry a fused Relu (post-op).
//
// Algorithm (--conv-algorithm, kernels/Kernel.h): direct, or Winograd's
// F(4x4, 3x3) for f32 3x3 stride-1 convolutions, which oneDNN 2.6 has on
// AVX-512 and oneDNN 3.x nowhere (cpuHasWinograd(); fewer multiplies: 1.3-3.2x
// faster for inception_v3's and resnet18's, at the cost of a scratchpad of
// 7-310 MB each and rounding within the reference tests' 1e-4).
// convAlgorithms() says where Auto takes it; a kernel whose Winograd primitive
// oneDNN refuses (another CPU, a shape its implementation does not take)
// computes directly. Where oneDNN's Winograd would not take a node, our own
// F(4, K) (ConvWinograd1d.h: 1xK, Kx1 and square windows folded into it) may,
// and then none of this runs.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/ConvGeometry.h"
#include "kernels/cpu/ConvWinograd1d.h"
#include "kernels/cpu/DnnlCompat.h"
#include "kernels/cpu/DnnlKernel.h"

namespace graphc {
namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// A convolution's sizes and window in oneDNN's terms.
struct DnnlConvGeometry {
  Dims x, w, y; // [N,C,H,W], [O,C/g,kh,kw], [N,O,OH,OW]
  int64_t group = 1;
  dims strides, dilates, padL, padR; // dilates: oneDNN counts dilation - 1
  /// What the primitive computes in (the activations' type, f32 or bf16),
  /// the type the weights (or their gradient) are held in outside it, which
  /// may be f32 beside bf16 data (the weights' reorder converts), and the
  /// bias's.
  dt data = dt::f32, weights = dt::f32, bias = dt::f32;
  DType dataType = DType::F32;

  dnnl::memory::desc any(const Dims &d) const {
    return dnnl::memory::desc(dims(d.begin(), d.end()), data, tag::any);
  }
  /// The weights' shape as oneDNN sees them: [g, O/g, C/g, kh, kw] with groups.
  dims weightDims() const {
    if (group == 1)
      return dims(w.begin(), w.end());
    return {group, w[0] / group, w[1], w[2], w[3]};
  }
  dnnl::memory::desc weightsAny() const { return dnnl::memory::desc(weightDims(), data, tag::any); }
  dnnl::memory::desc weightsPlain() const {
    return dnnl::memory::desc(weightDims(), weights, group == 1 ? tag::oihw : tag::goihw);
  }
};

/// The node's geometry (kernels/ConvGeometry.h) in oneDNN's terms; `weights`
/// is the type of the weights (Conv, ConvGradData) or of their gradient
/// (ConvGradFilter).
llvm::Expected<DnnlConvGeometry> readGeometry(const Node &n, DType weights) {
  auto c = convGeometry(n);
  if (!c)
    return c.takeError();
  DnnlConvGeometry g;
  g.x = c->x;
  g.w = c->w;
  g.y = c->y;
  g.group = c->group;
  g.dataType = n.operand(0)->type().dtype;
  g.data = dnnlType(g.dataType);
  g.weights = dnnlType(weights);
  if (n.op() == Op::Conv && convHasBias(n))
    g.bias = dnnlType(n.operand(2)->type().dtype);
  for (int i = 0; i < 2; ++i) {
    g.strides.push_back(c->strides[i]);
    g.dilates.push_back(c->dilations[i] - 1);
    g.padL.push_back(c->padBegin[i]);
    g.padR.push_back(c->padEnd[i]);
  }
  return g;
}

/// The three computations of a convolution, for the choice of algorithm.
enum class Direction { Forward, Data, Filter };

/// Whether Winograd's F(4x4, 3x3) may compute this convolution: f32, one
/// group, a 3x3 window at stride 1 without dilation (what oneDNN 2.6 has, on
/// AVX-512), and at least 16 channels in and out (fewer are padded to 16:
/// small_cnn's one-channel first layer took 8x longer for its filter gradient).
bool winogradShape(const DnnlConvGeometry &g) {
  return g.data == dt::f32 && g.group == 1 && g.w[2] == 3 && g.w[3] == 3 &&
         llvm::all_of(g.strides, [](int64_t s) { return s == 1; }) &&
         llvm::all_of(g.dilates, [](int64_t d) { return d == 0; }) && g.x[1] >= 16 &&
         g.w[0] >= 16;
}

/// Multiply-adds of the direct computation (the same in every direction).
double convWork(const DnnlConvGeometry &g) {
  return (double)g.y[0] * g.y[1] * g.y[2] * g.y[3] * g.w[1] * g.w[2] * g.w[3];
}

/// oneDNN's algorithms to try for `d`, best first. Auto takes Winograd where
/// it was measured faster: every direction of every such convolution of
/// inception_v3 and resnet18 (1.3-3.2x at batch 16, AMD Zen 4, 2 threads),
/// except the filter gradient below 8x8 outputs, whose tile transforms
/// outweigh the saving (resnet18's 7x7 with 512 channels: 0.87x), and
/// convolutions under 10^8 multiply-adds (small_cnn's), which gain a fraction
/// of a millisecond for a scratchpad of 7-10 MB, larger than their tensors.
llvm::SmallVector<dnnl::algorithm, 2> convAlgorithms(ConvAlgorithm choice,
                                                     const DnnlConvGeometry &g, Direction d) {
  bool winograd = choice != ConvAlgorithm::Direct && winogradShape(g);
  if (choice == ConvAlgorithm::Auto &&
      ((d == Direction::Filter && g.y[2] * g.y[3] < 64) || convWork(g) < 1e8))
    winograd = false;
  if (winograd)
    return {dnnl::algorithm::convolution_winograd, dnnl::algorithm::convolution_direct};
  return {dnnl::algorithm::convolution_direct};
}

/// The primitive descriptor `make` builds with the first of `algorithms` that
/// the library implements here (Winograd is AVX-512 only).
template <typename Make>
auto firstBuilt(llvm::ArrayRef<dnnl::algorithm> algorithms, Make make) {
  for (dnnl::algorithm a : algorithms.drop_back()) {
    try {
      return make(a);
    } catch (const dnnl::error &) {
      // oneDNN refused this algorithm here (this CPU or shape): try the next.
    }
  }
  return make(algorithms.back());
}

/// The forward primitive with the activations in `x` and `y` (format_tag::any:
/// oneDNN's choice).
dnnl::convolution_forward::primitive_desc forwardPd(const DnnlConvGeometry &g, bool bias,
                                                    const dnnl::primitive_attr &attr, bool inference,
                                                    dnnl::algorithm alg,
                                                    const dnnl::memory::desc &x,
                                                    const dnnl::memory::desc &y) {
  auto b = bias ? dnnl::memory::desc({g.w[0]}, g.bias, tag::a) : dnnl::memory::desc();
  auto kind = inference ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
  return onednn::convForwardPd(kind, alg, x, g.weightsAny(), b, y, g.strides, g.dilates, g.padL,
                               g.padR, attr);
}

/// Whether oneDNN gave `pd` to its reference implementation (naive loops,
/// many times slower than its JIT kernels).
template <typename Pd> bool isReference(const Pd &pd) {
  return llvm::StringRef(pd.impl_info_str()).startswith("ref");
}

/// Activation formats a convolution is asked to compute in (a pair: input and
/// output of the forward, or the two activations of a gradient).
using Formats = std::pair<dnnl::memory::desc, dnnl::memory::desc>;

/// `make(formats)` with `wanted` where an implementation other than the
/// reference takes it, else with `fallback` (format_tag::any: oneDNN's
/// choice).
template <typename Make>
auto inFormats(const Make &make, const std::optional<Formats> &wanted, const Formats &fallback) {
  if (wanted) {
    try {
      auto pd = make(*wanted);
      if (!isReference(pd))
        return pd;
    } catch (const dnnl::error &) {
      // No implementation for these formats and this shape: oneDNN chooses.
    }
  }
  return make(fallback);
}

/// The layouts a convolution's activations are kept in besides plain
/// (cpuActivationLayout), its input's and its output's.
struct ActivationLayouts {
  std::optional<Layout> x, y;
};

/// The forward primitive, its activations in the layouts the executor keeps
/// them in (the input in the output's, or plain: an image with too few
/// channels to block stays plain). Left to itself oneDNN 2.6 may pick
/// channels-last for blocked values (its brgemm convolutions at inference),
/// which costs a reorder of the input and of the output around every
/// convolution (inception_v3 at batch 16: 380 reorders, 1.5 GB, 12% of an
/// inference); for bf16 on AMX the channels-last layout is what its tile
/// convolutions take. Where no implementation but the reference takes them,
/// oneDNN's choice.
dnnl::convolution_forward::primitive_desc forwardPd(const DnnlConvGeometry &g, bool bias,
                                                    const dnnl::primitive_attr &attr,
                                                    ConvAlgorithm choice, ActivationLayouts ls,
                                                    bool inference = false) {
  return firstBuilt(convAlgorithms(choice, g, Direction::Forward), [&](dnnl::algorithm alg) {
    std::optional<Formats> wanted;
    if (ls.y) {
      Layout in = ls.x == ls.y ? *ls.y : Layout::Plain;
      wanted = Formats(dnnlDesc(TensorType(g.dataType, g.x), in),
                       dnnlDesc(TensorType(g.dataType, g.y), *ls.y));
    }
    return inFormats(
        [&](const Formats &f) {
          return forwardPd(g, bias, attr, inference, alg, f.first, f.second);
        },
        wanted, Formats(g.any(g.x), g.any(g.y)));
  });
}

/// The formats a gradient is asked for: the activations' kept layout where it
/// is channels-last (AMX's), else none, and oneDNN chooses, hinted by the
/// forward (on AMX its own formats beat the blocked one: docs/performance.md).
std::optional<Formats> gradientFormats(const DnnlConvGeometry &g, ActivationLayouts ls) {
  if (ls.x != Layout::ChannelsLast || ls.y != Layout::ChannelsLast)
    return std::nullopt;
  return Formats(dnnlDesc(TensorType(g.dataType, g.x), Layout::ChannelsLast),
                 dnnlDesc(TensorType(g.dataType, g.y), Layout::ChannelsLast));
}

/// What the three convolution kernels share: the geometry and the choice of
/// algorithm.
class DnnlConvKernel : public DnnlKernel {
public:
  DnnlConvKernel(const Node &n, const KernelEnv &env)
      : DnnlKernel(n, env), algorithm_(env.convAlgorithm) {}

protected:
  /// Reads the geometry; `weights` as readGeometry's.
  llvm::Error readGeometry(DType weights) {
    auto g = graphc::readGeometry(node(), weights);
    if (!g)
      return g.takeError();
    geo_ = *g;
    // Winograd (oneDNN's and ours) computes in the blocked layout only.
    if (activationLayouts().y == Layout::ChannelsLast)
      algorithm_ = ConvAlgorithm::Direct;
    return llvm::Error::success();
  }
  /// The layouts the activations may be kept in besides plain.
  ActivationLayouts activationLayouts() const {
    return {activationLayout(TensorType(geo_.dataType, geo_.x)),
            activationLayout(TensorType(geo_.dataType, geo_.y))};
  }
  /// The forward primitive the gradients are of (their formats' hint).
  dnnl::convolution_forward::primitive_desc hint() const {
    return forwardPd(geo_, false, dnnl::primitive_attr(), algorithm_, activationLayouts());
  }
  llvm::SmallVector<dnnl::algorithm, 2> algorithms(Direction d) const {
    return convAlgorithms(algorithm_, geo_, d);
  }

  DnnlConvGeometry geo_;
  ConvAlgorithm algorithm_;
};

class ConvKernel : public DnnlConvKernel {
public:
  using DnnlConvKernel::DnnlConvKernel;

  llvm::Error build() override {
    if (auto e = readGeometry(operandType(1).dtype))
      return e;
    bias_ = convHasBias(node());
    sum_ = node().attrs().getInt("sum", 0) != 0;
    // A fused residual add and Relu (passes/InferenceFusion.h) are post-ops,
    // in that order; only inference graphs carry them.
    dnnl::primitive_attr attr = userScratchpad();
    bool relu = node().attrs().getString("activation") == "relu";
    dnnl::post_ops ops;
    if (sum_)
      ops.append_sum(1.0f);
    if (relu)
      onednn::appendEltwise(ops, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    pd_ = forwardPd(geo_, bias_, attr, algorithm_, activationLayouts(), relu || sum_);
    stableWeights_ = KeptOperand::isStable(node(), 1);
    prim_ = dnnl::convolution_forward(pd_);
    allowActivationOperand(0, pd_.src_desc());
    allowActivationResult(0, pd_.dst_desc());
    if (sum_)
      allowActivationOperand(addend(), pd_.dst_desc());
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    return Staging::bytes(layoutDesc(operandType(0), ls.in[0]), pd_.src_desc()) +
           Staging::bytes(geo_.weightsPlain(), pd_.weights_desc()) +
           Staging::bytes(layoutDesc(resultType(0), ls.out[0]), pd_.dst_desc()) +
           roundScratch(pd_.scratchpad_desc().get_size());
  }

  void execute(KernelContext &ctx, Staging &s) override {
    std::unordered_map<int, dnnl::memory> args;
    args[DNNL_ARG_SRC] = s.read(ctx.inputs[0], pd_.src_desc());
    if (stableWeights_) {
      auto w = weights_.get(s, ctx.inputs[1].data, geo_.weightsPlain(), pd_.weights_desc(),
                            ctx.variablesVersion);
      if (!w)
        throw std::runtime_error(llvm::toString(w.takeError()));
      args[DNNL_ARG_WEIGHTS] = *w;
    } else {
      args[DNNL_ARG_WEIGHTS] = s.read(ctx.inputs[1].data, geo_.weightsPlain(), pd_.weights_desc());
    }
    if (bias_)
      args[DNNL_ARG_BIAS] = s.read(ctx.inputs[2], pd_.bias_desc());
    dnnl::memory dst = s.write(ctx.outputs[0], pd_.dst_desc());
    // The sum post-op adds to what the output holds: a copy of the addend
    // (never its own buffer, which may be in another layout).
    if (sum_)
      s.reorderInto(ctx.inputs[addend()].data, viewDesc(ctx.inputs[addend()]), dst);
    args[DNNL_ARG_DST] = dst;
    args[DNNL_ARG_SCRATCHPAD] = s.temp(pd_.scratchpad_desc());
    s.execute(prim_, args);
  }

private:
  unsigned addend() const { return node().numOperands() - 1; }

  bool bias_ = false, sum_ = false, stableWeights_ = false;
  KeptOperand weights_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward prim_;
};

/// ConvGradData (dy, w) -> dx; attribute input_shape.
class ConvGradDataKernel : public DnnlConvKernel {
public:
  using DnnlConvKernel::DnnlConvKernel;

  llvm::Error build() override {
    if (auto e = readGeometry(operandType(1).dtype))
      return e;
    auto fwd = hint();
    pd_ = firstBuilt(algorithms(Direction::Data), [&](dnnl::algorithm alg) {
      return inFormats(
          [&](const Formats &f) {
            return onednn::convBackwardPd<dnnl::convolution_backward_data>(
                alg, f.first, geo_.weightsAny(), f.second, geo_.strides, geo_.dilates, geo_.padL,
                geo_.padR, fwd, userScratchpad());
          },
          gradientFormats(geo_, activationLayouts()), Formats(geo_.any(geo_.x), geo_.any(geo_.y)));
    });
    prim_ = dnnl::convolution_backward_data(pd_);
    allowActivationOperand(0, pd_.diff_dst_desc());
    allowActivationResult(0, pd_.diff_src_desc());
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    return Staging::bytes(layoutDesc(operandType(0), ls.in[0]), pd_.diff_dst_desc()) +
           Staging::bytes(geo_.weightsPlain(), pd_.weights_desc()) +
           Staging::bytes(layoutDesc(resultType(0), ls.out[0]), pd_.diff_src_desc()) +
           roundScratch(pd_.scratchpad_desc().get_size());
  }

  void execute(KernelContext &ctx, Staging &s) override {
    s.execute(prim_, {{DNNL_ARG_DIFF_DST, s.read(ctx.inputs[0], pd_.diff_dst_desc())},
                      {DNNL_ARG_WEIGHTS,
                       s.read(ctx.inputs[1].data, geo_.weightsPlain(), pd_.weights_desc())},
                      {DNNL_ARG_DIFF_SRC, s.write(ctx.outputs[0], pd_.diff_src_desc())},
                      {DNNL_ARG_SCRATCHPAD, s.temp(pd_.scratchpad_desc())}});
  }

private:
  dnnl::convolution_backward_data::primitive_desc pd_;
  dnnl::convolution_backward_data prim_;
};

/// ConvGradFilter (x, dy) -> dw; attribute filter_shape.
class ConvGradFilterKernel : public DnnlConvKernel {
public:
  using DnnlConvKernel::DnnlConvKernel;

  llvm::Error build() override {
    if (auto e = readGeometry(resultType(0).dtype))
      return e;
    auto fwd = hint();
    // The weights' gradient is computed in the type it is wanted in (oneDNN
    // accumulates in f32 whatever the activations' type).
    auto dw = dnnl::memory::desc(geo_.weightDims(), geo_.weights, tag::any);
    pd_ = firstBuilt(algorithms(Direction::Filter), [&](dnnl::algorithm alg) {
      return inFormats(
          [&](const Formats &f) {
            return onednn::convBackwardPd<dnnl::convolution_backward_weights>(
                alg, f.first, dw, f.second, geo_.strides, geo_.dilates, geo_.padL, geo_.padR, fwd,
                userScratchpad());
          },
          gradientFormats(geo_, activationLayouts()), Formats(geo_.any(geo_.x), geo_.any(geo_.y)));
    });
    prim_ = dnnl::convolution_backward_weights(pd_);
    allowActivationOperand(0, pd_.src_desc());
    allowActivationOperand(1, pd_.diff_dst_desc());
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    return Staging::bytes(layoutDesc(operandType(0), ls.in[0]), pd_.src_desc()) +
           Staging::bytes(layoutDesc(operandType(1), ls.in[1]), pd_.diff_dst_desc()) +
           Staging::bytes(geo_.weightsPlain(), pd_.diff_weights_desc()) +
           roundScratch(pd_.scratchpad_desc().get_size());
  }

  void execute(KernelContext &ctx, Staging &s) override {
    s.execute(prim_, {{DNNL_ARG_SRC, s.read(ctx.inputs[0], pd_.src_desc())},
                      {DNNL_ARG_DIFF_DST, s.read(ctx.inputs[1], pd_.diff_dst_desc())},
                      {DNNL_ARG_DIFF_WEIGHTS,
                       s.write(ctx.outputs[0].data, geo_.weightsPlain(), pd_.diff_weights_desc())},
                      {DNNL_ARG_SCRATCHPAD, s.temp(pd_.scratchpad_desc())}});
  }

private:
  dnnl::convolution_backward_weights::primitive_desc pd_;
  dnnl::convolution_backward_weights prim_;
};

/// Whether oneDNN's Winograd would compute node `n` under `choice`.
bool libraryWinogradTakes(const Node &n, ConvAlgorithm choice) {
  if (choice == ConvAlgorithm::Direct || !cpuHasWinograd())
    return false;
  auto g = readGeometry(n, DType::F32);
  if (!g) {
    llvm::consumeError(g.takeError());
    return false;
  }
  Direction d = n.op() == Op::ConvGradData     ? Direction::Data
                : n.op() == Op::ConvGradFilter ? Direction::Filter
                                               : Direction::Forward;
  return convAlgorithms(choice, *g, d).front() == dnnl::algorithm::convolution_winograd;
}

/// The 1-D Winograd's kernel where it takes the node, else oneDNN's.
template <typename KernelT> KernelFactory convFactory() {
  return [](const Node &n, const KernelEnv &env) -> llvm::Expected<std::unique_ptr<Kernel>> {
    // Winograd computes in the blocked layout only (the channels-last
    // kernels above run Direct).
    bool channelsLast =
        cpuActivationLayout(n.operand(0)->type(), env.cpuLayout) == Layout::ChannelsLast;
    if (!channelsLast &&
        winograd1dTakes(n, env.convAlgorithm, libraryWinogradTakes(n, env.convAlgorithm)))
      return makeWinograd1dKernel(n, env);
    return dnnlFactory<KernelT>()(n, env);
  };
}

} // namespace

void registerCpuConvKernels(KernelRegistry &r) {
  auto types = {DType::F32, DType::BF16};
  r.add(Op::Conv, DeviceKind::CPU, types, convFactory<ConvKernel>());
  r.add(Op::ConvGradData, DeviceKind::CPU, types, convFactory<ConvGradDataKernel>());
  r.add(Op::ConvGradFilter, DeviceKind::CPU, types, convFactory<ConvGradFilterKernel>());
}

} // namespace graphc
