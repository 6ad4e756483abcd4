//===- conv_bench.cpp - GFLOP/s of the CPU convolution kernels -------------===//
//
// Times Conv, ConvGradData and ConvGradFilter through the kernel registry (so
// what is measured is what the executor runs, staging included) on a few
// inception_v3 convolution shapes, with activations in the plain and in the
// blocked (nChw16c) layout, and prints GFLOP/s from the best of several runs.
//
//   conv_bench [--batch N] [--threads T] [--min-seconds S] [--clock wall|cpu]
//              [--algorithm auto|direct|winograd] [--only SUBSTRING]
//
// FLOPs count 2 * N * O * OH * OW * (C / group) * kh * kw per direction.
// --clock cpu divides the process's CPU time by the thread count instead of
// using wall time: an estimate of the uncontended speed on a machine shared
// with other work (run it with OMP_WAIT_POLICY=passive, so threads waiting at
// a barrier sleep rather than spin and add CPU time).
//
//===----------------------------------------------------------------------===//

#include "bench/ConvBenchCommon.h"
#include "ir/Builder.h"
#include "kernels/cpu/CpuBackend.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

using namespace graphc;
using namespace graphc::bench;

namespace {

struct Options : CommonOptions {
  static constexpr const char *usage =
      "conv_bench [--batch N] [--threads T] [--min-seconds S] [--clock wall|cpu] "
      "[--algorithm auto|direct|winograd] [--only SUBSTRING]";
  bool cpuClock = false;
  ConvAlgorithm algorithm = ConvAlgorithm::Auto;

  /// This program's own options.
  bool take(const char *flag, const char *value) {
    if (!std::strcmp(flag, "--clock") && !std::strcmp(value, "cpu"))
      cpuClock = true;
    else if (!std::strcmp(flag, "--clock") && !std::strcmp(value, "wall"))
      cpuClock = false;
    else if (!std::strcmp(flag, "--algorithm")) {
      auto a = parseConvAlgorithm(value);
      if (!a) {
        llvm::consumeError(a.takeError());
        return false;
      }
      algorithm = *a;
    } else
      return false;
    return true;
  }
};

/// Seconds on the chosen clock: wall, or process CPU time per thread.
double now(const Options &opt) {
  if (!opt.cpuClock)
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (t.tv_sec + 1e-9 * t.tv_nsec) / cpuThreads();
}

TensorView viewOf(Tensor &t, Layout l) {
  TensorView v;
  v.data = t.raw();
  v.dtype = t.dtype();
  v.shape.assign(t.shape().begin(), t.shape().end());
  v.layout = l;
  return v;
}

Layout layoutFor(const TensorType &t, bool blocked) {
  return blocked && blockable(t) ? Layout::Blocked : Layout::Plain;
}

/// Best seconds per run of the node's kernel, or a negative value on error.
double timeNode(const Node &n, bool blocked, const Options &opt) {
  KernelEnv env;
  env.threads = cpuThreads();
  env.backend = &CpuBackend::instance();
  env.convAlgorithm = opt.algorithm;
  auto k = KernelRegistry::global().create(n, env);
  if (!k) {
    std::fprintf(stderr, "%s\n", llvm::toString(k.takeError()).c_str());
    return -1;
  }
  std::vector<Tensor> storage;
  std::vector<TensorView> in, out;
  std::vector<Layout> inLayouts, outLayouts;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (const Value *v : n.operands()) {
    Tensor t(v->type());
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<float>()[i] = uniform(rng);
    storage.push_back(t);
    // Weights stay plain; activations blocked where the kernel takes it.
    Layout l = layoutFor(v->type(), blocked);
    if (!(*k)->acceptsLayout(in.size(), l))
      l = Layout::Plain;
    inLayouts.push_back(l);
    in.push_back(viewOf(storage.back(), l));
  }
  for (const auto &r : n.results()) {
    storage.emplace_back(r->type());
    Layout l = layoutFor(r->type(), blocked);
    if (!(*k)->producesLayout(out.size(), l))
      l = Layout::Plain;
    outLayouts.push_back(l);
    out.push_back(viewOf(storage.back(), l));
  }
  if (auto e = (*k)->prepare(inLayouts, outLayouts)) {
    std::fprintf(stderr, "%s\n", llvm::toString(std::move(e)).c_str());
    return -1;
  }
  Tensor scratch(TensorType(DType::F32, {(int64_t)((*k)->scratchBytes() / 4 + 1)}));
  dnnl::stream stream(CpuBackend::instance().engine());
  KernelContext ctx;
  ctx.inputs = in;
  ctx.outputs = out;
  ctx.scratch = scratch.raw();
  ctx.stream = &stream;
  return bestSeconds(
      [&] {
        if (auto e = (*k)->run(ctx)) {
          std::fprintf(stderr, "%s\n", llvm::toString(std::move(e)).c_str());
          return false;
        }
        return true;
      },
      [&] { return now(opt); }, opt.minSeconds);
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  if (!parseOptions(argc, argv, opt))
    return 2;
  std::printf("batch %lld, %d threads, %s clock, --conv-algorithm %s; GFLOP/s (best run; "
              "Winograd's are effective rates), plain | blocked activations\n",
              (long long)opt.batch, cpuThreads(), opt.cpuClock ? "cpu-time" : "wall",
              convAlgorithmName(opt.algorithm).str().c_str());
  std::printf("%-26s %-22s %8s  %15s  %15s  %15s\n", "layer", "x -> y", "GFLOP", "forward",
              "backward-data", "backward-filter");
  bool ok = true;
  for (const Shape &s : kShapes) {
    if (!std::strstr(s.name, opt.only))
      continue;
    Module m;
    Builder b(m.main());
    TensorType xt(DType::F32, {s.batch ? s.batch : opt.batch, s.c, s.hw, s.hw});
    TensorType wt(DType::F32, {s.o, s.c, s.kh, s.kw});
    Attrs a;
    a.set("strides", Ints{s.stride, s.stride});
    a.set("pads", Ints{s.padH, s.padW, s.padH, s.padW});
    Value *x = b.input("x", xt), *w = b.input("w", wt);
    Node *conv = b.createNode(Op::Conv, {x, w}, a, "conv");
    TensorType yt = conv->result()->type();
    Value *dy = b.input("dy", yt);
    Attrs da = a, fa = a;
    da.set("input_shape", Ints(xt.shape.begin(), xt.shape.end()));
    fa.set("filter_shape", Ints(wt.shape.begin(), wt.shape.end()));
    Node *data = b.createNode(Op::ConvGradData, {dy, w}, da, "grad_data");
    Node *filter = b.createNode(Op::ConvGradFilter, {x, dy}, fa, "grad_filter");
    double flops = 2.0 * yt.numElements() * s.c * s.kh * s.kw;
    char shapes[64];
    std::snprintf(shapes, sizeof shapes, "%lldx%lld^2->%lldx%lld^2", (long long)s.c,
                  (long long)s.hw, (long long)s.o, (long long)yt.shape[2]);
    std::printf("%-26s %-22s %8.2f ", s.name, shapes, flops * 1e-9);
    for (const Node *n : {conv, data, filter}) {
      double plain = timeNode(*n, false, opt), blocked = timeNode(*n, true, opt);
      ok &= plain > 0 && blocked > 0;
      std::printf("  %6.0f | %6.0f", flops / plain * 1e-9, flops / blocked * 1e-9);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
