//===- gpu_train_bench.cpp - Training steps of a model on GPU towers ------===//
//
// Compiles a built-in model for training the way a user's run does (the
// default pipeline, N towers on gpu:0..N-1, the placer over a cluster of the
// host and N GPUs with the kernel registry deciding what runs where,
// insert-transfers), folds the N logical GPUs onto the physical ones
// (--physical-gpus; 1 puts every tower on GPU 0, as --emulate does), and
// times training steps on one synthetic batch whose copy to the GPU is
// prefetched so it overlaps the step before (Executor::prefetch). The batch
// is split on the GPU (executor/BatchStaging.h; --batch-on-host splits it on
// the host as the plan says), --cuda-graphs on replays the step as one
// CUDA graph from the second step on (captured, then launched), and
// --gpu-layout chooses which activations are channels-last (graphrun's flag).
//
// Prints one JSON line: images/s (median step), step times, device memory in
// use (the driver's view, from before the executor was created) and planned
// bytes, the loss, the devices and where the ops ran. bench/gpu_bench.py runs
// it next to PyTorch.
//
//   gpu_train_bench --model inception_v3 --batch 128 --towers 4 --steps 20
//
//===----------------------------------------------------------------------===//

#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "kernels/Kernel.h"
#include "passes/Pass.h"
#include "placement/Placer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace graphc;

namespace {

struct Args {
  std::string model = "inception_v3";
  int64_t batch = 128, imageSize = 299, classes = 1000;
  int towers = 1, physicalGpus = 0, steps = 20, warmup = 5;
  std::string params;             ///< default: gpu:0 for one tower, mirrored for several
  std::string precision = "fp32"; ///< fp16: f16 compute with dynamic loss scaling from 65536; bf16:
                                  ///< bf16 compute, unscaled
  std::string cudaGraphs = "off"; ///< off | auto | on (ExecutorOptions::cudaGraphs)
  std::string gpuLayout = "auto"; ///< nchw | nhwc | auto (ExecutorOptions::gpuLayout)
  bool prefetch = true;
  bool batchOnHost = false; ///< split the batch on the host, as the plan says (no staging)
  bool compileOnly = false; ///< compile and place, print where ops went; no GPU needed
};

int usage(const char *why) {
  llvm::errs() << "gpu_train_bench: " << why
               << "\nusage: gpu_train_bench [--model NAME] [--batch N] [--image-size N] "
                  "[--classes N] [--towers N] [--physical-gpus N] [--params MODE] "
                  "[--precision fp32|fp16|bf16] [--steps N] [--warmup N] "
                  "[--cuda-graphs off|auto|on] [--gpu-layout nchw|nhwc|auto] [--no-prefetch] "
                  "[--batch-on-host] "
                  "[--compile-only]\n";
  return 2;
}

bool parse(int argc, char **argv, Args &a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    auto num = [&](auto &slot) {
      const char *v = next();
      if (!v)
        return false;
      slot = std::atoll(v);
      return true;
    };
    bool ok = true;
    if (k == "--model") {
      const char *v = next();
      ok = v;
      if (v)
        a.model = v;
    } else if (k == "--params") {
      const char *v = next();
      ok = v;
      if (v)
        a.params = v;
    } else if (k == "--precision") {
      const char *v = next();
      ok = v;
      if (v)
        a.precision = v;
    } else if (k == "--batch") {
      ok = num(a.batch);
    } else if (k == "--image-size") {
      ok = num(a.imageSize);
    } else if (k == "--classes") {
      ok = num(a.classes);
    } else if (k == "--towers") {
      ok = num(a.towers);
    } else if (k == "--physical-gpus") {
      ok = num(a.physicalGpus);
    } else if (k == "--steps") {
      ok = num(a.steps);
    } else if (k == "--warmup") {
      ok = num(a.warmup);
    } else if (k == "--cuda-graphs") {
      const char *v = next();
      ok = v;
      if (v) {
        auto mode = parseCudaGraphs(v);
        ok = bool(mode);
        if (!mode)
          llvm::consumeError(mode.takeError());
        a.cudaGraphs = v;
      }
    } else if (k == "--gpu-layout") {
      const char *v = next();
      ok = v;
      if (v) {
        auto layout = parseGpuLayout(v);
        ok = bool(layout);
        if (!layout)
          llvm::consumeError(layout.takeError());
        a.gpuLayout = v;
      }
    } else if (k == "--no-prefetch") {
      a.prefetch = false;
    } else if (k == "--batch-on-host") {
      a.batchOnHost = true;
    } else if (k == "--compile-only") {
      a.compileOnly = true;
    } else {
      ok = false;
    }
    if (!ok)
      return false;
  }
  return a.batch > 0 && a.towers > 0 && a.steps > 0 && a.warmup >= 0;
}

size_t gpuBytesInUse() {
  size_t freeBytes = 0, total = 0;
  if (cudaMemGetInfo(&freeBytes, &total) != cudaSuccess)
    return 0;
  return total - freeBytes;
}

/// A batch of uniform [-1, 1) pixels and labels, from a fixed seed.
llvm::StringMap<Tensor> syntheticBatch(const TensorType &input, int64_t classes) {
  llvm::StringMap<Tensor> f;
  Tensor x(input);
  float *p = x.data<float>();
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0, n = x.numElements(); i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (float)((s >> 40) * (1.0 / (1ull << 24))) * 2 - 1;
  }
  Tensor labels(TensorType(DType::I64, {input.shape[0]}));
  for (int64_t i = 0; i < input.shape[0]; ++i)
    labels.set(i, (double)((i * 7919) % classes));
  f["input"] = std::move(x);
  f["labels"] = std::move(labels);
  f["lr"] = Tensor::scalar(0.01f);
  return f;
}

int fail(llvm::Error e) {
  llvm::errs() << "gpu_train_bench: " << llvm::toString(std::move(e)) << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  if (!parse(argc, argv, a))
    return usage("bad arguments");
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess)
    visible = 0;
  if (visible == 0 && !a.compileOnly)
    return usage("no CUDA device");
  int physical = std::max(1, a.physicalGpus > 0 ? std::min(a.physicalGpus, visible) : visible);
  if (a.params.empty())
    a.params = a.towers == 1 ? "gpu:0" : "mirrored";

  models::ModelOptions mo;
  mo.numClasses = a.classes;
  mo.imageSize = a.imageSize;
  auto model = models::buildModel(a.model, mo);
  if (!model)
    return fail(model.takeError());

  CompileOptions o;
  o.batch = a.batch;
  o.towers = a.towers;
  auto params = parseParamPlacement(a.params);
  if (!params)
    return fail(params.takeError());
  o.params = *params;
  auto precision = parsePrecision(a.precision);
  if (!precision)
    return fail(precision.takeError());
  o.precision = *precision;
  if (o.precision == Precision::FP16)
    o.lossScale = 65536; // graphrun's default with fp16 (PyTorch GradScaler's)
  o.optimizer = "momentum";
  o.momentum = 0.9;
  o.learningRate = 0.01;
  o.fuseBatchNormReluGradients = true; // a GPU plan, as the strategies make it
  o.placer = makePlacerFunction(Cluster::defaultCluster(a.towers), [](const Node &n, DeviceKind t) {
    return KernelRegistry::global().supports(n, t);
  });
  auto compileStart = std::chrono::steady_clock::now();
  {
    PassManager pm(o);
    for (const char *pipeline : {kDefaultTrainingPipeline, kPlacementPipeline})
      if (auto e = pm.addPipeline(pipeline))
        return fail(std::move(e));
    if (auto e = pm.run(**model))
      return fail(std::move(e));
  }
  double compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - compileStart).count();
  std::map<std::string, int64_t> opsByDevice;
  for (const Node *n : (*model)->main().nodes())
    ++opsByDevice[deviceText(n->assignedDevice())];
  llvm::json::Object devices;
  for (auto &[d, n] : opsByDevice)
    devices[d.empty() ? "unplaced" : d] = n;
  if (a.compileOnly) {
    std::map<std::string, int64_t> hostOps;
    for (const Node *n : (*model)->main().nodes())
      if (n->assignedDevice() && n->assignedDevice()->kind == DeviceKind::CPU &&
          n->op() != Op::Input)
        ++hostOps[opName(n->op()).str()];
    llvm::json::Object host;
    for (auto &[op, count] : hostOps)
      host[op] = count;
    llvm::outs() << llvm::json::Value(llvm::json::Object{{"model", a.model},
                                                         {"towers", a.towers},
                                                         {"params", a.params},
                                                         {"precision", a.precision},
                                                         {"compile_s", compileSeconds},
                                                         {"nodes_by_device", std::move(devices)},
                                                         {"host_ops", std::move(host)}})
                 << "\n";
    return 0;
  }

  cudaFree(nullptr); // the context, so that its memory is in the baseline
  size_t baseline = gpuBytesInUse();
  ExecutorOptions eo;
  eo.seed = 1;
  eo.cudaGraphs = cantFail(parseCudaGraphs(a.cudaGraphs));
  eo.gpuLayout = cantFail(parseGpuLayout(a.gpuLayout));
  eo.batchOnDevice = !a.batchOnHost;
  eo.waitTimeout = std::chrono::minutes(10);
  eo.physicalGpu = [physical](DeviceId gpu) { return (int)gpu.index % physical; };
  auto ex = Executor::create(**model, eo);
  if (!ex)
    return fail(ex.takeError());
  const Node *input = (*model)->main().findInput("input");
  if (!input)
    return fail(llvm::make_error<llvm::StringError>("the model has no input 'input'",
                                                    llvm::inconvertibleErrorCode()));
  llvm::StringMap<Tensor> batch = syntheticBatch(input->result()->type(), a.classes);

  std::vector<double> times;
  double loss = 0;
  if (a.prefetch)
    if (auto e = (*ex)->prefetch(batch))
      return fail(std::move(e));
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    if (a.prefetch && s + 1 < a.warmup + a.steps)
      if (auto e = (*ex)->prefetch(batch))
        return fail(std::move(e));
    auto out = (*ex)->run(a.prefetch ? llvm::StringMap<Tensor>() : batch);
    if (!out)
      return fail(out.takeError());
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= a.warmup)
      times.push_back(dt);
    if (!out->empty() && (*out)[0].numElements() >= 1)
      loss = (*out)[0].at(0);
  }
  size_t inUse = gpuBytesInUse();
  int64_t planned = 0;
  for (const DeviceMemory &m : (*ex)->memory())
    if (llvm::StringRef(m.device).startswith("gpu"))
      planned += m.arenaBytes + m.variableBytes;

  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  double mean = 0;
  for (double t : times)
    mean += t / times.size();

  llvm::json::Array stepTimes;
  for (double t : times)
    stepTimes.push_back(t);
  llvm::json::Object result{
      {"runner", "graphc"},
      {"model", a.model},
      {"batch", a.batch},
      {"image_size", a.imageSize},
      {"towers", a.towers},
      {"physical_gpus", physical},
      {"params", a.params},
      {"precision", a.precision},
      {"cuda_graphs", a.cudaGraphs},
      {"gpu_layout", a.gpuLayout},
      {"channels_last_values", (*ex)->valuesInLayout(Layout::ChannelsLast)},
      {"batch_on_host", a.batchOnHost},
      {"devices", llvm::join((*ex)->devices(), ",")},
      {"cuda_graph_note", (*ex)->cudaGraphNote()},
      {"prefetch", a.prefetch},
      {"images_per_s", a.batch / median},
      {"step_median_s", median},
      {"step_mean_s", mean},
      {"step_times_s", std::move(stepTimes)},
      {"gpu_bytes_in_use", (int64_t)(inUse - std::min(inUse, baseline))},
      {"gpu_bytes_planned", planned},
      {"loss", loss},
      {"compile_s", compileSeconds},
      {"nodes_by_device", std::move(devices)},
  };
  if (o.lossScale > 0) { // the scale after the run, and the steps it skipped
    for (auto [key, var] :
         {std::pair{"loss_scale", kLossScaleVar}, {"skipped_steps", kSkippedStepsVar}}) {
      auto v = (*ex)->readVariable(var);
      if (!v)
        return fail(v.takeError());
      result[key] = v->at(0);
    }
  }
  llvm::outs() << llvm::json::Value(std::move(result)) << "\n";
  return 0;
}
