//===- ConvWinograd1d.cpp - Convolution kernels by the 1-D Winograd --------===//

#include "kernels/cpu/ConvWinograd1d.h"

#include "ir/Diagnostics.h"
#include "kernels/ConvGeometry.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/DnnlKernel.h"
#include "kernels/cpu/Winograd1d.h"

namespace graphc {
namespace {

using wino1d::Pass;

/// Multiply-adds per byte of transformed weights below which auto leaves a
/// square window to oneDNN's direct convolution: every call transforms the
/// weights (about 0.13 ms per MB on two Zen 4 cores), which small batches
/// do not repay. AVX2, batch 16: resnet18's 512-channel 3x3 on 7x7 (98 per
/// byte, 18 MB) 1.2x faster than direct, break-even near batch 8 (49);
/// inception_v3's 448 -> 384 on 8x8 (128 per byte) 1.3x.
constexpr double kAutoWorkPerWeightByte = 64;
/// The same where the weights never change while the graph runs (inference):
/// their transform is kept, and only reading it per call remains. AVX2,
/// resnet18 with kept weights, ours against direct per convolution: the
/// 512-channel 3x3 at batch 4 (24 per byte) 3.8 against 5.1 ms, at batch 8
/// (49) 6.1-7.0 against 9.8-11.4; the 256-channel one at batch 2 (49) 1.6-2.7
/// against 2.2-2.7; at batch 1 (6 and 24.5) about even or behind.
constexpr double kAutoWorkPerKeptWeightByte = 16;

/// Whether the weights (operand 1) stay the same while the module runs: a
/// constant, or a variable no node of any of its graphs writes. (Stricter
/// than KeptOperand::isStable, which leaves updates to the run's version.)
bool weightsNeverWritten(const Node &n) {
  const Node *w = n.operand(1)->producer();
  if (w->op() == Op::Constant)
    return true;
  if (w->op() != Op::Variable)
    return false;
  const std::string var = w->attrs().getString("var");
  for (const Graph *g : n.graph().module().graphs())
    for (const Node *u : g->nodes())
      if (isVariableUpdate(u->op()) &&
          (!u->attrs().has("var") || u->attrs().getString("var") == var))
        return false;
  return true;
}

/// The forward shape of a node's convolution, when the 1-D Winograd takes it.
std::optional<wino1d::Shape> shapeOfNode(const Node &n) {
  for (const Value *v : n.operands())
    if (v->type().dtype != DType::F32)
      return std::nullopt;
  // Inference convolutions' fused ReLU and residual add (passes/InferenceFusion.h)
  // happen in the output transform.
  if (n.result()->type().dtype != DType::F32 ||
      (n.attrs().has("activation") && n.attrs().getString("activation") != "relu"))
    return std::nullopt;
  auto g = convGeometry(n);
  if (!g) {
    llvm::consumeError(g.takeError());
    return std::nullopt;
  }
  int64_t pads[4] = {g->padBegin[0], g->padBegin[1], g->padEnd[0], g->padEnd[1]};
  return wino1d::shapeOf(g->x.data(), g->w.data(), g->strides, g->dilations, pads, g->group,
                         channelBlock());
}

Pass passOf(Op op) {
  switch (op) {
  case Op::ConvGradData:
    return Pass::Data;
  case Op::ConvGradFilter:
    return Pass::Filter;
  default:
    return Pass::Forward;
  }
}

class Winograd1dKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

protected:
  llvm::Error build() override {
    auto s = shapeOfNode(node());
    if (!s)
      return makeError("the 1-D Winograd convolution does not take this node");
    pass_ = passOf(node().op());
    plan_.emplace(*s, threads());
    // The blocked operands and result: x (or dy), and dy for the filter
    // gradient; y or dx. The weights, the bias and dw stay plain.
    unsigned blockedOperands = pass_ == Pass::Filter ? 2 : 1;
    for (unsigned i = 0; i < blockedOperands; ++i) {
      want_.push_back(dnnlDesc(operandType(i), Layout::Blocked));
      allowActivationOperand(i, want_.back());
    }
    if (pass_ != Pass::Filter) {
      result_ = dnnlDesc(resultType(0), Layout::Blocked);
      allowActivationResult(0, result_);
    }
    bias_ = pass_ == Pass::Forward && convHasBias(node());
    if (pass_ == Pass::Forward) {
      sum_ = node().attrs().getInt("sum", 0) != 0;
      post_ = (sum_ ? wino1d::kAddTo : 0) |
              (node().attrs().getString("activation") == "relu" ? wino1d::kRelu : 0);
      if (sum_)
        allowActivationOperand(addend(), result_);
      stableWeights_ = KeptOperand::isStable(node(), 1);
    }
    implementation_ = "graphc_wino1d_f4x" + std::to_string(s->taps) + ":" + plan_->kernels().name;
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &ls) const override {
    size_t bytes = roundScratch(plan_->scratchBytes(pass_));
    for (unsigned i = 0; i < want_.size(); ++i)
      bytes += Staging::bytes(layoutDesc(operandType(i), ls.in[i]), want_[i]);
    if (pass_ != Pass::Filter)
      bytes += Staging::bytes(layoutDesc(resultType(0), ls.out[0]), result_);
    return bytes;
  }

  void execute(KernelContext &ctx, Staging &s) override {
    const wino1d::Plan &plan = *plan_;
    auto in = [&](unsigned i) {
      return static_cast<const float *>(s.read(ctx.inputs[i], want_[i]).get_data_handle());
    };
    const float *a = in(0);
    const float *b = pass_ == Pass::Filter ? in(1) : static_cast<const float *>(ctx.inputs[1].data);
    size_t bytes = plan.scratchBytes(pass_);
    void *scratch =
        s.temp(dnnl::memory::desc({(dnnl::memory::dim)bytes}, dnnl::memory::data_type::u8,
                                  dnnl::memory::format_tag::a))
            .get_data_handle();
    if (pass_ == Pass::Filter) {
      plan.backwardFilter(a, b, static_cast<float *>(ctx.outputs[0].data), scratch);
    } else {
      dnnl::memory dst = s.write(ctx.outputs[0], result_);
      auto *out = static_cast<float *>(dst.get_data_handle());
      if (pass_ == Pass::Forward) {
        // The residual add adds to what the output holds: a copy of the addend.
        if (sum_)
          s.reorderInto(ctx.inputs[addend()].data, viewDesc(ctx.inputs[addend()]), dst);
        plan.forward(a, b, bias_ ? static_cast<const float *>(ctx.inputs[2].data) : nullptr, out,
                     scratch, post_, keptWeights(b, ctx.variablesVersion, scratch));
      } else {
        plan.backwardData(a, b, out, scratch);
      }
    }
    noteOwnPrimitive({"convolution", implementation_});
  }

private:
  unsigned addend() const { return node().numOperands() - 1; }

  /// The transformed weights kept between runs while no step changes them
  /// (version 0: they may change; transform them in the run's scratch).
  const float *keptWeights(const float *w, uint64_t version, void *scratch) {
    if (!stableWeights_ || version == 0)
      return nullptr;
    dnnl::memory::desc bytes({plan_->weightFloats()}, dnnl::memory::data_type::f32,
                             dnnl::memory::format_tag::a);
    auto U = kept_.keep(
        w, bytes, version,
        [&](dnnl::memory &to) {
          plan_->transformWeights(w, static_cast<float *>(to.get_data_handle()), scratch);
        },
        "transformed weights kept by a Winograd convolution");
    if (!U)
      throw std::runtime_error(llvm::toString(U.takeError()));
    return static_cast<const float *>(U->get_data_handle());
  }

  Pass pass_ = Pass::Forward;
  int post_ = 0;
  bool sum_ = false, stableWeights_ = false;
  KeptOperand kept_;
  std::optional<wino1d::Plan> plan_;
  llvm::SmallVector<dnnl::memory::desc, 2> want_;
  dnnl::memory::desc result_;
  bool bias_ = false;
  std::string implementation_; ///< what primitivesRun() names it
};

} // namespace

bool winograd1dAvailable() {
  return wino1d::kernelsFor(channelBlock()) != nullptr;
}

bool winograd1dTakes(const Node &n, ConvAlgorithm choice, bool libraryWinograd) {
  if (choice == ConvAlgorithm::Direct || libraryWinograd)
    return false;
  auto s = shapeOfNode(n);
  if (!s)
    return false;
  if (choice == ConvAlgorithm::Winograd)
    return true;
  if (s->fold == 1)
    return s->taps != 5;
  // A square window: where the work is worth a transform and repays the
  // weights'.
  double work =
      (double)s->batch * s->cout * s->outHeight * s->outWidth * s->cin * s->fold * s->taps;
  double weights = 4.0 * (s->taps + 3) * s->fold * s->cin * s->cout;
  if (s->fold != s->taps || s->taps > 5 || work < 1e8)
    return false;
  // The module is scanned for writers of the weights only where the lower
  // bar decides.
  return work >= kAutoWorkPerWeightByte * weights ||
         (work >= kAutoWorkPerKeptWeightByte * weights && n.op() == Op::Conv &&
          weightsNeverWritten(n));
}

llvm::Expected<std::unique_ptr<Kernel>> makeWinograd1dKernel(const Node &n, const KernelEnv &env) {
  return dnnlFactory<Winograd1dKernel>()(n, env);
}

} // namespace graphc
