//===- DnnlTestUtil.cpp - Running one kernel in chosen layouts -------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "SumBound.h"
#include "ir/Builder.h"
#include "ir/Cost.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/Winograd1d.h"

#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

namespace graphc::test {

llvm::Expected<std::unique_ptr<OneNode>> makeNode(Op op, llvm::ArrayRef<TensorType> inputs,
                                                  Attrs attrs) {
  auto one = std::make_unique<OneNode>();
  Builder b(one->module.main());
  llvm::SmallVector<Value *, 5> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(b.input("in" + std::to_string(i), inputs[i]));
  auto n = b.tryCreate(op, operands, std::move(attrs), "node");
  if (!n)
    return n.takeError();
  one->node = *n;
  return one;
}

std::unique_ptr<OneNode> mustMakeNode(Op op, llvm::ArrayRef<TensorType> inputs, Attrs attrs) {
  auto n = makeNode(op, inputs, std::move(attrs));
  if (!n) {
    ADD_FAILURE() << llvm::toString(n.takeError());
    return nullptr;
  }
  return std::move(*n);
}

namespace {

/// Calls fn(plainIndex, blockedIndex) for every element of a 4-d tensor whose
/// channels are a multiple of the CPU's channel block B (nChw<B>c, written out
/// here rather than taken from the kernels' own index).
template <typename Fn> void forEachBlocked(llvm::ArrayRef<int64_t> s, Fn fn) {
  int64_t N = s[0], C = s[1], H = s[2], W = s[3], B = channelBlock();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          fn(((n * C + c) * H + h) * W + w, (((n * (C / B) + c / B) * H + h) * W + w) * B + c % B);
}

void fillNaN(void *data, size_t bytes) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float *f = static_cast<float *>(data);
  for (size_t i = 0; i < bytes / sizeof(float); ++i)
    f[i] = nan;
}

} // namespace

/// Calls fn(plainIndex, channelsLastIndex) for every element of a 4-d tensor
/// (NHWC, written out here rather than taken from the kernels' own index).
template <typename Fn> void forEachChannelsLast(llvm::ArrayRef<int64_t> s, Fn fn) {
  int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          fn(((n * C + c) * H + h) * W + w, ((n * H + h) * W + w) * C + c);
}

/// Copies element p of `from` to element q of `to` (or back) for every
/// (plain, `l`) index pair; elements of 2 or 4 bytes.
static Tensor relayout(const Tensor &from, Layout l, bool toLayout) {
  Tensor out(from.type());
  size_t es = dtypeSize(from.type().dtype);
  const char *src = static_cast<const char *>(from.raw());
  char *dst = static_cast<char *>(out.raw());
  auto copy = [&](int64_t p, int64_t q) {
    if (toLayout)
      std::memcpy(dst + q * es, src + p * es, es);
    else
      std::memcpy(dst + p * es, src + q * es, es);
  };
  if (l == Layout::Blocked)
    forEachBlocked(from.shape(), copy);
  else
    forEachChannelsLast(from.shape(), copy);
  return out;
}

Tensor toLayout(const Tensor &plain, Layout l) {
  return l == Layout::Plain ? plain : relayout(plain, l, true);
}

Tensor fromLayout(const Tensor &t, Layout l) {
  return l == Layout::Plain ? t : relayout(t, l, false);
}

llvm::Expected<std::unique_ptr<KernelHarness>>
KernelHarness::create(const Node &n,
                      std::optional<std::pair<std::vector<Layout>, std::vector<Layout>>> layouts,
                      ConvAlgorithm algorithm, CpuLayout cpuLayout) {
  auto h = std::make_unique<KernelHarness>();
  h->node_ = &n;
  KernelEnv env;
  env.threads = cpuThreads();
  env.backend = &CpuBackend::instance();
  env.convAlgorithm = algorithm;
  env.cpuLayout = cpuLayout;
  auto k = KernelRegistry::global().create(n, env);
  if (!k)
    return k.takeError();
  h->kernel_ = std::move(*k);
  h->in_.assign(n.numOperands(), Layout::Plain);
  h->out_.assign(n.numResults(), Layout::Plain);
  if (layouts) {
    h->in_ = layouts->first;
    h->out_ = layouts->second;
    if (auto e = h->kernel_->prepare(h->in_, h->out_))
      return e;
  }
  return h;
}

llvm::Expected<std::vector<Tensor>> KernelHarness::run(llvm::ArrayRef<Tensor> inputs) {
  std::vector<Tensor> in, out;
  std::vector<TensorView> inViews, outViews;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(toLayout(inputs[i], in_[i]));
    TensorView v;
    v.data = in.back().raw();
    v.dtype = in.back().dtype();
    v.shape.assign(in.back().shape().begin(), in.back().shape().end());
    v.layout = in_[i];
    inViews.push_back(v);
  }
  for (size_t i = 0; i < node_->numResults(); ++i) {
    out.emplace_back(node_->result(i)->type());
    fillNaN(out.back().raw(), out.back().bytes());
    TensorView v;
    v.data = out.back().raw();
    v.dtype = out.back().dtype();
    v.shape.assign(out.back().shape().begin(), out.back().shape().end());
    v.layout = out_[i];
    outViews.push_back(v);
  }
  size_t scratchBytes = kernel_->scratchBytes();
  std::vector<float> scratch(scratchBytes / sizeof(float) + 16);
  void *aligned = scratch.data() + (64 - (uintptr_t)scratch.data() % 64) % 64 / sizeof(float);
  fillNaN(aligned, scratchBytes);
  dnnl::stream stream(CpuBackend::instance().engine());
  KernelContext ctx;
  ctx.inputs = inViews;
  ctx.outputs = outViews;
  ctx.scratch = aligned;
  ctx.stream = &stream;
  if (auto e = kernel_->run(ctx))
    return e;
  stream.wait();
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = fromLayout(out[i], out_[i]);
  return out;
}

Attrs convAttrs(Ints strides, Ints pads, Ints dilations, int64_t group) {
  return attrs({{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"group", group}});
}

std::vector<Tensor> runOnce(const Node &n, llvm::ArrayRef<Tensor> inputs, ConvAlgorithm algorithm,
                            std::vector<PrimitiveInfo> &ran) {
  auto h = KernelHarness::create(n, std::nullopt, algorithm);
  if (!h) {
    ADD_FAILURE() << llvm::toString(h.takeError());
    return {};
  }
  auto out = (*h)->run(inputs);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  ran = (*h)->kernel().primitivesRun();
  return std::move(*out);
}

std::vector<Tensor> runOnce(const Node &n, llvm::ArrayRef<Tensor> inputs, ConvAlgorithm algorithm) {
  std::vector<PrimitiveInfo> ran;
  return runOnce(n, inputs, algorithm, ran);
}

testing::AssertionResult near(const Tensor &got, const Tensor &want, double rtol, double *worst) {
  if (got.type() != want.type())
    return testing::AssertionFailure()
           << "type " << toString(got.type()) << ", expected " << toString(want.type());
  int64_t n = want.numElements();
  double sumSq = 0;
  for (int64_t i = 0; i < n; ++i)
    sumSq += want.at(i) * want.at(i);
  double rms = n ? std::sqrt(sumSq / n) : 0;
  int64_t bad = 0, worstAt = -1;
  double worstErr = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = got.at(i), w = want.at(i);
    double err = std::abs(g - w) / (std::abs(w) + rms + 1e-30);
    if (std::isnan(g))
      err = std::numeric_limits<double>::infinity();
    if (err > rtol)
      ++bad;
    if (worstAt < 0 || err > worstErr) {
      worstErr = err;
      worstAt = i;
    }
  }
  if (worst)
    *worst = worstErr;
  if (!bad)
    return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << bad << " of " << n << " elements off by more than " << rtol << " x (|expected| + rms "
         << rms << "); worst at flat index " << worstAt << ": got " << got.at(worstAt)
         << ", expected " << want.at(worstAt) << " (normalized error " << worstErr << ")";
}

namespace {

/// The infinity norm (largest row sum) and 1-norm (largest column sum) of an
/// n x m row-major matrix.
std::pair<double, double> norms(const float *a, int n, int m) {
  double rows = 0, cols = 0;
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int j = 0; j < m; ++j)
      sum += std::abs(a[i * m + j]);
    rows = std::max(rows, sum);
  }
  for (int j = 0; j < m; ++j) {
    double sum = 0;
    for (int i = 0; i < n; ++i)
      sum += std::abs(a[i * m + j]);
    cols = std::max(cols, sum);
  }
  return {rows, cols};
}

} // namespace

double winogradGrowth(int taps, bool twoD) {
  const wino1d::Tables *t = wino1d::tablesFor(taps);
  if (!t)
    return 0;
  double growth = 1;
  for (auto [a, n, m] : {std::tuple{t->AT, t->m, t->alpha}, std::tuple{t->G, t->alpha, t->r},
                         std::tuple{t->BT, t->alpha, t->alpha}}) {
    auto [inf, one] = norms(a, n, m);
    growth *= twoD ? inf * one : std::max(inf, one);
  }
  return growth;
}

double kernelBound(const Node &n, llvm::ArrayRef<PrimitiveInfo> ran, int sides) {
  // The elementwise work around a sum rounds too: a batch norm's subtract,
  // scale and shift after its statistics, a bias, a mean's division.
  constexpr double kElementwiseRoundings = 4;
  double growth = 0;
  for (const PrimitiveInfo &p : ran) {
    llvm::StringRef impl = p.implementation;
    if (impl.consume_front("graphc_wino1d_f4x"))
      growth = std::max(growth, winogradGrowth(impl.front() - '0', false));
    else if (impl.contains("wino"))
      growth = std::max(growth, winogradGrowth(3, true));
  }
  return (sides * ((double)sumLength(n) + kElementwiseRoundings) + growth) * sumbound::kF32;
}

Tensor randomTensor(const TensorType &t, std::mt19937 &rng) {
  Tensor out(t);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float *d = out.data<float>();
  for (int64_t i = 0; i < out.numElements(); ++i)
    d[i] = normal(rng);
  return out;
}

double dot(const Tensor &a, const Tensor &b) {
  double s = 0;
  for (int64_t i = 0; i < a.numElements(); ++i)
    s += a.at(i) * b.at(i);
  return s;
}

Attrs attrs(std::initializer_list<std::pair<const char *, Attribute>> list) {
  Attrs a;
  for (auto &[k, v] : list)
    a.set(k, v);
  return a;
}

std::vector<Case> blockedCases() {
  Ints pad1{1, 1, 1, 1};
  Attrs conv = attrs({{"pads", pad1}});
  Attrs dataAttrs = conv, filterAttrs = conv;
  dataAttrs.set("input_shape", Ints{2, 32, 7, 7});
  filterAttrs.set("filter_shape", Ints{16, 32, 3, 3});
  Attrs maxPool = attrs({{"kernel_shape", Ints{3, 3}},
                         {"strides", Ints{2, 2}},
                         {"pads", pad1},
                         {"ceil_mode", (int64_t)1}});
  Attrs avgPool = maxPool;
  avgPool.set("count_include_pad", (int64_t)1); // windows overhang at the end
  Attrs avgGrad = avgPool;
  avgGrad.set("input_shape", Ints{1, 16, 10, 10});
  Attrs eps = attrs({{"epsilon", 1e-3}});
  TensorType c16 = f32({16}), c32 = f32({32});
  return {
      {"conv", Op::Conv, {f32({2, 32, 7, 7}), f32({16, 32, 3, 3}), c16}, conv},
      {"conv_rgb",
       Op::Conv,
       {f32({2, 3, 9, 9}), f32({16, 3, 3, 3})},
       attrs({{"strides", Ints{2, 2}}})},
      {"conv_grad_data", Op::ConvGradData, {f32({2, 16, 7, 7}), f32({16, 32, 3, 3})}, dataAttrs},
      {"conv_grad_filter",
       Op::ConvGradFilter,
       {f32({2, 32, 7, 7}), f32({2, 16, 7, 7})},
       filterAttrs},
      {"max_pool", Op::MaxPool, {f32({2, 16, 9, 9})}, maxPool},
      {"max_pool_grad", Op::MaxPoolGrad, {f32({2, 16, 9, 9}), f32({2, 16, 5, 5})}, maxPool},
      {"avg_pool", Op::AveragePool, {f32({1, 16, 10, 10})}, avgPool},
      {"avg_pool_grad", Op::AveragePoolGrad, {f32({1, 16, 6, 6})}, avgGrad},
      {"global_avg_pool", Op::GlobalAveragePool, {f32({2, 32, 5, 5})}, {}},
      {"batch_norm", Op::BatchNorm, {f32({2, 16, 4, 4}), c16, c16, c16, c16}, eps},
      {"batch_norm_train", Op::BatchNormTrain, {f32({2, 32, 3, 3}), c32, c32}, eps},
      {"batch_norm_train_grad",
       Op::BatchNormTrainGrad,
       {f32({2, 32, 3, 3}), c32, c32, c32, f32({2, 32, 3, 3})},
       eps},
  };
}

/// Every combination of layouts the kernel accepts, all-plain first.
std::vector<LayoutPair> layoutCombinations(const Kernel &k, const Node &n) {
  std::vector<LayoutPair> all{{{}, {}}};
  auto expand = [&](auto takes, bool operand) {
    size_t count = all.size();
    for (size_t i = 0; i < count; ++i) {
      auto &list = operand ? all[i].first : all[i].second;
      list.push_back(Layout::Plain);
      for (Layout l : {Layout::Blocked, Layout::ChannelsLast}) {
        if (!takes(l))
          continue;
        LayoutPair b = all[i];
        (operand ? b.first : b.second).back() = l;
        all.push_back(std::move(b));
      }
    }
  };
  for (unsigned i = 0; i < n.numOperands(); ++i)
    expand([&](Layout l) { return k.acceptsLayout(i, l); }, true);
  for (unsigned i = 0; i < n.numResults(); ++i)
    expand([&](Layout l) { return k.producesLayout(i, l); }, false);
  return all;
}

} // namespace graphc::test
