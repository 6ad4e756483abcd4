//===- CudaTestUtil.cpp - Running one node on the GPU and on the CPU ------===//

#include "CudaTestUtil.h"

#include "ir/OpAttrs.h"
#include "ir/Random.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace graphc {

bool cudaDeviceAvailable() {
  static const bool available = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return available;
}

CudaBackend *strictBackend() {
  static std::unique_ptr<CudaBackend> backend;
  static std::string failure;
  if (!backend && failure.empty()) {
    CudaBackendOptions options;
    options.allowTF32 = false;
    auto b = CudaBackend::create(0, options);
    if (b)
      backend = std::move(*b);
    else
      failure = llvm::toString(b.takeError());
  }
  if (!backend)
    ADD_FAILURE() << "cannot create the CUDA backend: " << failure;
  return backend.get();
}

Node *OneNode::node(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs, llvm::StringRef name) {
  auto n = builder_.tryCreate(op, operands, std::move(attrs), name);
  if (!n) {
    ADD_FAILURE() << llvm::toString(n.takeError());
    return nullptr;
  }
  return *n;
}

namespace {

/// Device memory freed on scope exit.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes && cudaMalloc(&p_, bytes) != cudaSuccess)
      p_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (p_)
      cudaFree(p_);
  }
  void *get() const { return p_; }
  bool ok() const { return p_ || !bytes_; }

private:
  void *p_ = nullptr;
  size_t bytes_;
};

llvm::Error check(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s", what,
                                 cudaGetErrorString(e));
}

/// Host variables mirrored in device memory.
class DeviceVariables : public VariableAccess {
public:
  llvm::Error load(TensorVariables &host) {
    for (auto &entry : host.tensors) {
      const Tensor &t = entry.second;
      auto buffer = std::make_unique<DeviceBuffer>(t.bytes());
      if (!buffer->ok())
        return check(cudaErrorMemoryAllocation, "cudaMalloc");
      if (t.bytes())
        if (auto e = check(cudaMemcpy(buffer->get(), t.raw(), t.bytes(), cudaMemcpyHostToDevice),
                           "copy a variable in"))
          return e;
      buffers_[entry.first()] = std::move(buffer);
      host_ = &host;
    }
    return llvm::Error::success();
  }
  llvm::Error store() {
    if (!host_)
      return llvm::Error::success();
    for (auto &entry : host_->tensors) {
      Tensor &t = entry.second;
      if (t.bytes())
        if (auto e = check(cudaMemcpy(t.raw(), buffers_[entry.first()]->get(), t.bytes(),
                                      cudaMemcpyDeviceToHost),
                           "copy a variable out"))
          return e;
    }
    return llvm::Error::success();
  }
  llvm::Expected<TensorView> variable(llvm::StringRef name) override {
    auto it = buffers_.find(name);
    if (it == buffers_.end())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "no variable '%s'",
                                     name.str().c_str());
    TensorView v = viewOf(host_->tensors[name]);
    v.data = it->second->get();
    return v;
  }

private:
  TensorVariables *host_ = nullptr;
  llvm::StringMap<std::unique_ptr<DeviceBuffer>> buffers_;
};

} // namespace

llvm::Expected<std::vector<Tensor>> runOnCuda(const Node &n, llvm::ArrayRef<Tensor> inputs,
                                              const CudaRun &run) {
  CudaBackend *backend = run.backend ? run.backend : strictBackend();
  if (!backend)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no CUDA backend");
  if (auto e = check(cudaSetDevice(backend->ordinal()), "cudaSetDevice"))
    return e;
  KernelEnv env;
  env.kind = DeviceKind::GPU;
  env.seed = run.seed;
  env.backend = backend;
  env.gpuLayout = run.gpuLayout;
  auto kernel = KernelRegistry::global().create(n, env);
  if (!kernel)
    return kernel.takeError();
  std::vector<Layout> in = run.operandLayouts, out = run.resultLayouts;
  in.resize(n.numOperands(), Layout::Plain);
  out.resize(n.numResults(), Layout::Plain);
  if (auto e = (*kernel)->prepare(in, out))
    return e;
  auto last = [](Layout l) { return l == Layout::ChannelsLast; };
  std::optional<unsigned> alias = run.inPlace ? (*kernel)->inPlaceOperand() : std::nullopt;

  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<TensorView> inViews, outViews;
  for (unsigned i = 0; i < inputs.size(); ++i) {
    const Tensor stored = last(in[i]) ? toChannelsLast(inputs[i]) : inputs[i];
    buffers.push_back(std::make_unique<DeviceBuffer>(stored.bytes()));
    if (!buffers.back()->ok())
      return check(cudaErrorMemoryAllocation, "cudaMalloc");
    if (stored.bytes())
      if (auto e = check(cudaMemcpy(buffers.back()->get(), stored.raw(), stored.bytes(),
                                    cudaMemcpyHostToDevice),
                         "copy an input in"))
        return e;
    TensorView v = viewOf(inputs[i]);
    v.data = buffers.back()->get();
    v.layout = in[i];
    inViews.push_back(v);
  }
  std::vector<Tensor> results;
  for (unsigned r = 0; r < n.numResults(); ++r) {
    results.emplace_back(n.result(r)->type());
    TensorView v = viewOf(results.back());
    v.layout = out[r];
    if (r == 0 && alias) {
      v.data = inViews[*alias].data;
    } else {
      buffers.push_back(std::make_unique<DeviceBuffer>(results.back().bytes()));
      if (!buffers.back()->ok())
        return check(cudaErrorMemoryAllocation, "cudaMalloc");
      v.data = buffers.back()->get();
      // NaN bytes, so an element the kernel forgets to write shows.
      if (results.back().bytes())
        if (auto e = check(cudaMemset(v.data, 0xff, results.back().bytes()), "cudaMemset"))
          return e;
    }
    outViews.push_back(v);
  }
  // Scratch starts as garbage and 64 bytes past an allocation's start, the
  // alignment the executor promises.
  size_t scratchBytes = (*kernel)->scratchBytes();
  DeviceBuffer scratch(scratchBytes + 64);
  if (!scratch.ok())
    return check(cudaErrorMemoryAllocation, "cudaMalloc");
  if (auto e = check(cudaMemset(scratch.get(), 0xab, scratchBytes + 64), "cudaMemset"))
    return e;
  DeviceVariables variables;
  if (run.variables)
    if (auto e = variables.load(*run.variables))
      return e;
  // The step counter a kernel reads, where the case gives one.
  DeviceBuffer counter(run.deviceStep ? sizeof(DeviceStep) : 0);
  if (run.deviceStep && !counter.ok())
    return check(cudaErrorMemoryAllocation, "cudaMalloc");
  if (run.deviceStep)
    if (auto e = check(
            cudaMemcpy(counter.get(), &*run.deviceStep, sizeof(DeviceStep), cudaMemcpyHostToDevice),
            "copy the step counter in"))
      return e;

  cudaStream_t stream = nullptr;
  if (auto e = check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"))
    return e;
  KernelContext ctx;
  ctx.inputs = inViews;
  ctx.outputs = outViews;
  ctx.scratch = static_cast<char *>(scratch.get()) + 64;
  ctx.step = run.step;
  if (run.deviceStep)
    ctx.deviceStep = static_cast<const DeviceStep *>(counter.get());
  ctx.variables = &variables;
  ctx.stream = stream;
  llvm::Error runError = (*kernel)->run(ctx);
  cudaError_t synced = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (runError)
    return runError;
  if (auto e = check(synced, "cudaStreamSynchronize"))
    return e;
  if (auto e = check(cudaGetLastError(), "kernel"))
    return e;
  if (auto e = backend->takeDeviceError())
    return e;
  for (unsigned r = 0; r < results.size(); ++r)
    if (results[r].bytes())
      if (auto e = check(cudaMemcpy(results[r].raw(), outViews[r].data, results[r].bytes(),
                                    cudaMemcpyDeviceToHost),
                         "copy a result out"))
        return e;
  if (auto e = variables.store())
    return e;
  for (unsigned r = 0; r < results.size(); ++r)
    if (last(out[r]))
      results[r] = fromChannelsLast(results[r]);
  return results;
}

namespace {
/// Copies every element of a 4-D tensor between its NCHW position and its
/// NHWC one, byte for byte.
Tensor moveChannels(const Tensor &t, bool toLast) {
  llvm::ArrayRef<int64_t> d = t.shape();
  assert(d.size() == 4 && "a 4-D tensor");
  Tensor out(t.type());
  const size_t es = dtypeSize(t.dtype());
  const auto *from = static_cast<const char *>(t.raw());
  auto *to = static_cast<char *>(out.raw());
  int64_t plain = 0;
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t h = 0; h < d[2]; ++h)
        for (int64_t w = 0; w < d[3]; ++w, ++plain) {
          int64_t last = ((n * d[2] + h) * d[3] + w) * d[1] + c;
          std::memcpy(to + (toLast ? last : plain) * es, from + (toLast ? plain : last) * es, es);
        }
  return out;
}
} // namespace

Tensor toChannelsLast(const Tensor &t) {
  return moveChannels(t, true);
}

Tensor fromChannelsLast(const Tensor &stored) {
  return moveChannels(stored, false);
}

llvm::Error runGroupOnCuda(llvm::ArrayRef<const Node *> nodes,
                           llvm::ArrayRef<std::vector<Tensor>> inputs, TensorVariables &variables,
                           uint64_t step) {
  CudaBackend *backend = strictBackend();
  if (!backend)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no CUDA backend");
  if (auto e = check(cudaSetDevice(backend->ordinal()), "cudaSetDevice"))
    return e;
  KernelEnv env;
  env.kind = DeviceKind::GPU;
  env.backend = backend;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<std::vector<TensorView>> views(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    auto kernel = KernelRegistry::global().create(*nodes[k], env);
    if (!kernel)
      return kernel.takeError();
    kernels.push_back(std::move(*kernel));
    for (const Tensor &t : inputs[k]) {
      buffers.push_back(std::make_unique<DeviceBuffer>(t.bytes()));
      if (!buffers.back()->ok())
        return check(cudaErrorMemoryAllocation, "cudaMalloc");
      if (t.bytes())
        if (auto e =
                check(cudaMemcpy(buffers.back()->get(), t.raw(), t.bytes(), cudaMemcpyHostToDevice),
                      "copy an input in"))
          return e;
      TensorView v = viewOf(t);
      v.data = buffers.back()->get();
      views[k].push_back(v);
    }
  }
  DeviceVariables device;
  if (auto e = device.load(variables))
    return e;
  cudaStream_t stream = nullptr;
  if (auto e = check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"))
    return e;
  std::vector<KernelContext> contexts(nodes.size());
  std::vector<Kernel *> group;
  std::vector<KernelContext *> contextPointers;
  for (size_t k = 0; k < nodes.size(); ++k) {
    contexts[k].inputs = views[k];
    contexts[k].step = step;
    contexts[k].variables = &device;
    contexts[k].stream = stream;
    group.push_back(kernels[k].get());
    contextPointers.push_back(&contexts[k]);
  }
  llvm::Error runError =
      group.empty() ? llvm::Error::success() : group[0]->runGroup(group, contextPointers);
  cudaError_t synced = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (runError)
    return runError;
  if (auto e = check(synced, "cudaStreamSynchronize"))
    return e;
  return device.store();
}

Tensor randomTensor(const TensorType &t, std::mt19937 &rng, double lo, double hi) {
  Tensor x(t);
  // One draw from the caller's generator seeds a fast stream for the values.
  RandomStream values(rng(), 0x5eed);
  if (t.dtype == DType::F32) {
    for (int64_t i = 0; i < x.numElements(); ++i)
      x.data<float>()[i] = (float)(lo + (hi - lo) * values.uniform());
    return x;
  }
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double v = lo + (hi - lo) * values.uniform();
    x.set(i, isFloat(t.dtype) ? v : std::floor(v));
  }
  return x;
}

double relativeError(const Tensor &got, const Tensor &want) {
  if (got.type() != want.type())
    return NAN;
  double top = 0, diff = 0;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    double g = got.at(i), w = want.at(i);
    if (std::isnan(g) != std::isnan(w))
      return NAN;
    if (std::isnan(w) || (std::isinf(w) && g == w))
      continue;
    top = std::max(top, std::fabs(w));
    diff = std::max(diff, std::fabs(g - w));
  }
  if (diff == 0)
    return 0;
  return top > 0 ? diff / top : INFINITY;
}

::testing::AssertionResult closeTo(const Tensor &got, const Tensor &want, double tol) {
  double err = relativeError(got, want);
  if (err <= tol)
    return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << "relative error " << err << " > " << tol << " for " << toString(want.type());
  if (got.type() == want.type()) {
    int64_t worst = 0;
    double most = -1;
    for (int64_t i = 0; i < want.numElements(); ++i) {
      double d = std::fabs(got.at(i) - want.at(i));
      if (std::isnan(d) || d > most) {
        most = std::isnan(d) ? INFINITY : d;
        worst = i;
      }
      if (std::isnan(d))
        break;
    }
    if (want.numElements())
      os << "; at element " << worst << " got " << got.at(worst) << ", want " << want.at(worst);
  }
  return ::testing::AssertionFailure() << os.str();
}

Tensor smallInts(const TensorType &t, std::mt19937 &rng) {
  Tensor x(t);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    if (t.dtype == DType::Bool)
      x.data<uint8_t>()[i] = rng() % 2;
    else
      x.set(i, (double)(rng() % 3) - 1);
  }
  return x;
}

::testing::AssertionResult sameBits(const Tensor &got, const Tensor &want) {
  if (got.type() != want.type())
    return ::testing::AssertionFailure() << toString(got.type()) << " vs " << toString(want.type());
  size_t es = dtypeSize(want.dtype());
  const auto *g = static_cast<const unsigned char *>(got.raw());
  const auto *w = static_cast<const unsigned char *>(want.raw());
  for (int64_t i = 0; i < want.numElements(); ++i)
    if (std::memcmp(g + i * es, w + i * es, es) != 0)
      return ::testing::AssertionFailure() << "element " << i << " of " << toString(want.type())
                                           << ": got " << got.at(i) << ", want " << want.at(i);
  return ::testing::AssertionSuccess();
}

OneNode &TwinCases::graph() {
  graphs_.push_back(std::make_unique<OneNode>());
  return *graphs_.back();
}

const std::vector<Tensor> *TwinCases::add(const Node *n, std::vector<Tensor> inputs, double tol,
                                          std::string what, CudaRun run) {
  auto cpu = runNode(*n, inputs);
  if (!cpu) {
    ADD_FAILURE() << n->name() << ": " << llvm::toString(cpu.takeError());
    return nullptr;
  }
  expect(n, std::move(inputs), std::move(*cpu), tol, std::move(what), std::move(run));
  return &cases_.back().cpu;
}

void TwinCases::expect(const Node *n, std::vector<Tensor> inputs, std::vector<Tensor> want,
                       double tol, std::string what, CudaRun run) {
  cases_.push_back({n, std::move(inputs), std::move(want), tol, std::move(what), std::move(run)});
}

void TwinCases::compareOnGpu() const {
  SKIP_WITHOUT_CUDA();
  for (const Case &c : cases_) {
    auto gpu = runOnCuda(*c.node, c.inputs, c.run);
    ASSERT_TRUE((bool)gpu) << c.node->name() << " " << c.what << ": "
                           << llvm::toString(gpu.takeError());
    ASSERT_EQ(gpu->size(), c.cpu.size());
    for (size_t r = 0; r < c.cpu.size(); ++r) {
      const std::string what =
          opName(c.node->op()).str() + " result " + std::to_string(r) + " " + c.what;
      if (c.tol < 0) {
        EXPECT_TRUE(sameBits((*gpu)[r], c.cpu[r])) << what;
        continue;
      }
      EXPECT_TRUE(closeTo((*gpu)[r], c.cpu[r], c.tol)) << what;
      sumbound::report(what, relativeError((*gpu)[r], c.cpu[r]), c.tol);
    }
  }
}

void expectTwins(const Node &n, llvm::ArrayRef<Tensor> inputs, std::optional<double> given,
                 uint64_t step, uint64_t seed) {
  const double tol = given ? *given : 2 * sumbound::bound(sumLength(n) + 4);
  auto cpu = runNode(n, inputs, nullptr, step, seed);
  ASSERT_TRUE((bool)cpu) << llvm::toString(cpu.takeError());
  for (bool inPlace : {false, true}) {
    CudaRun run;
    run.step = step;
    run.seed = seed;
    run.inPlace = inPlace;
    auto gpu = runOnCuda(n, inputs, run);
    ASSERT_TRUE((bool)gpu) << n.name() << ": " << llvm::toString(gpu.takeError());
    ASSERT_EQ(gpu->size(), cpu->size());
    for (size_t r = 0; r < cpu->size(); ++r) {
      if (tol < 0)
        EXPECT_TRUE(sameBits((*gpu)[r], (*cpu)[r]))
            << opName(n.op()).str() << " result " << r << (inPlace ? " (in place)" : "");
      else
        EXPECT_TRUE(closeTo((*gpu)[r], (*cpu)[r], tol))
            << opName(n.op()).str() << " result " << r << (inPlace ? " (in place)" : "");
    }
  }
}

Attrs takenBy(Op op, Attrs a) {
  std::vector<std::string> others;
  for (const auto &[name, value] : a.entries())
    if (!findAttrSpec(op, name))
      others.push_back(name);
  for (const std::string &name : others)
    a.erase(name);
  return a;
}

Attrs ConvCase::attrs() const {
  Attrs a;
  a.set("pads", pads);
  a.set("strides", strides);
  a.set("dilations", dilations);
  a.set("group", group);
  a.set("ceil_mode", int64_t(ceil));
  return a;
}

std::vector<ConvCase> convCases() {
  return {{{2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, false},
          {{1, 4, 17, 13}, {6, 2, 3, 5}, {2, 0, 1, 3}, {2, 3}, {1, 1}, 2, false},
          {{3, 8, 11, 11}, {8, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {2, 2}, 8, false},
          {{2, 5, 10, 10}, {7, 5, 1, 1}, {0, 0, 0, 0}, {2, 2}, {1, 1}, 1, true},
          {{4, 16, 35, 35}, {32, 16, 3, 3}, {0, 0, 0, 0}, {2, 2}, {1, 1}, 1, false},
          {{1, 3, 6, 6}, {2, 3, 3, 3}, {0, 0, 0, 0}, {2, 2}, {1, 1}, 1, true},
          {{0, 3, 8, 8}, {4, 3, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, false}};
}

std::vector<ConvCase> sixteenBitConvCases() {
  std::vector<ConvCase> cases = convCases();
  cases.push_back({{4, 32, 17, 17}, {48, 32, 1, 7}, {0, 3, 0, 3}, {1, 1}, {1, 1}, 1, false});
  cases.push_back({{4, 32, 17, 17}, {48, 32, 7, 1}, {3, 0, 3, 0}, {1, 1}, {1, 1}, 1, false});
  return cases;
}

ConvNodes convNodes(OneNode &c, const ConvCase &k, DType dtype, bool bias,
                    std::optional<DType> weights) {
  const DType w = weights.value_or(dtype);
  ConvNodes n;
  n.in = {c.input("x", TensorType(dtype, k.x)), c.input("w", TensorType(w, k.w))};
  if (bias)
    n.in.push_back(c.input("b", TensorType(w, {k.w[0]})));
  n.conv = c.node(Op::Conv, n.in, k.attrs(), "conv");
  if (!n.conv || bias)
    return n;
  Attrs gd = k.attrs(), gf = k.attrs();
  gd.set("input_shape", Ints(k.x.begin(), k.x.end()));
  gf.set("filter_shape", Ints(k.w.begin(), k.w.end()));
  if (w != dtype)
    gf.set("to", w);
  Value *dy = c.input("dy", n.conv->result()->type());
  n.data = c.node(Op::ConvGradData, {dy, n.in[1]}, gd, "grad_data");
  n.filter = c.node(Op::ConvGradFilter, {n.in[0], dy}, gf, "grad_filter");
  return n;
}

LayerNormNodes layerNormNodes(OneNode &c, const LayerNormCase &k, double epsilon) {
  Attrs a;
  a.set("axis", k.axis);
  a.set("epsilon", epsilon);
  const size_t axis = k.axis < 0 ? k.axis + k.shape.size() : k.axis;
  LayerNormNodes n;
  n.x = TensorType(DType::F32, k.shape);
  n.scale = TensorType(DType::F32, Dims(k.shape.begin() + axis, k.shape.end()));
  std::vector<Value *> in{c.input("x", n.x), c.input("scale", n.scale)};
  if (k.bias)
    in.push_back(c.input("bias", n.scale));
  n.forward = c.node(Op::LayerNorm, in, a);
  n.grad = c.node(Op::LayerNormGrad,
                  {c.input("x2", n.x), c.input("s2", n.scale), c.input("dy", n.x)}, a);
  return n;
}

BatchNormCase batchNormCase(OneNode &c, const Dims &shape, DType dtype, std::mt19937 &rng) {
  TensorType xt(dtype, shape), ct(DType::F32, {shape[1]});
  Value *x = c.input("x", xt), *scale = c.input("scale", ct), *bias = c.input("bias", ct);
  Value *mean = c.input("mean", ct), *var = c.input("var", ct), *dy = c.input("dy", xt);
  Attrs a;
  a.set("epsilon", 1e-3);
  BatchNormCase k;
  k.infer = c.node(Op::BatchNorm, {x, scale, bias, mean, var}, a, "bn");
  k.train = c.node(Op::BatchNormTrain, {x, scale, bias}, a, "bn_train");
  Attrs relu = a;
  relu.set("activation", std::string("relu"));
  k.trainRelu = c.node(Op::BatchNormTrain, {x, scale, bias}, relu, "bn_train_relu");
  k.grad = c.node(Op::BatchNormTrainGrad, {x, scale, mean, var, dy}, a, "bn_grad");
  k.x = randomTensor(xt, rng, -2, 3);
  k.scale = randomTensor(ct, rng, 0.5, 2);
  k.bias = randomTensor(ct, rng);
  k.mean = randomTensor(ct, rng);
  k.var = randomTensor(ct, rng, 0.1, 2);
  return k;
}

std::vector<PoolCase> poolCases() {
  struct Window {
    Ints kernel, strides, pads, dilations;
    bool ceil;
  };
  const Window windows[] = {{{3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
                            {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},
                            {{3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 1}, true},
                            {{2, 2}, {2, 2}, {0, 1, 1, 0}, {1, 1}, true},
                            {{3, 3}, {2, 1}, {1, 1, 0, 2}, {2, 1}, false}};
  std::vector<PoolCase> out;
  for (const Window &k : windows)
    for (Op op : {Op::MaxPool, Op::AveragePool})
      for (bool includePad : {false, true}) {
        if ((op == Op::MaxPool && includePad) ||
            (op == Op::AveragePool && k.dilations != Ints{1, 1}))
          continue;
        Attrs a;
        a.set("kernel_shape", k.kernel);
        a.set("strides", k.strides);
        a.set("pads", k.pads);
        if (op == Op::MaxPool)
          a.set("dilations", k.dilations);
        a.set("ceil_mode", int64_t(k.ceil));
        if (op == Op::AveragePool)
          a.set("count_include_pad", int64_t(includePad));
        std::string what = opName(op).str() + " kernel " + shapeToString(k.kernel) + " pads " +
                           shapeToString(k.pads) + (k.ceil ? " ceil" : "") +
                           (includePad ? " include_pad" : "");
        out.push_back({op, includePad, std::move(a), std::move(what)});
      }
  return out;
}

std::vector<UpdateCase> updateCases() {
  Attrs sgd, momentum, nesterov, rms, adam;
  sgd.set("weight_decay", 0.01);
  momentum.set("momentum", 0.8);
  nesterov.set("nesterov", int64_t(1));
  nesterov.set("weight_decay", 1e-4);
  rms.set("decay", 0.95);
  rms.set("momentum", 0.5);
  rms.set("epsilon", 1e-6);
  adam.set("beta2", 0.99);
  adam.set("weight_decay", 0.1);
  return {{Op::ApplySGD, 0, sgd},
          {Op::ApplyMomentum, 1, momentum},
          {Op::ApplyMomentum, 1, nesterov},
          {Op::ApplyRMSProp, 2, rms},
          {Op::ApplyAdam, 2, adam}};
}

} // namespace graphc
