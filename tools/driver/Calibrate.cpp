#include "tools/driver/Calibrate.h"

#include "executor/DeviceRegistry.h"
#include "executor/dist/WorldOfOne.h"
#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "ir/OutputFile.h"
#include "tools/driver/Trainer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

namespace graphc {

namespace {

/// Below these a kernel does next to no work: its time is its launch.
constexpr int64_t kTinyFlops = 1 << 14, kTinyBytes = 1 << 14;

enum class OpClass { Conv, Gemm, Memory };

OpClass classOf(Op op) {
  switch (op) {
  case Op::Conv:
  case Op::ConvGradData:
  case Op::ConvGradFilter:
    return OpClass::Conv;
  case Op::MatMul:
  case Op::Gemm:
    return OpClass::Gemm;
  default:
    return OpClass::Memory;
  }
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (llvm::StringRef(line).startswith("model name"))
      return llvm::StringRef(line).split(':').second.trim().str();
  return "unknown CPU";
}

/// A calibration run's kernel timings and the executor's own time per node
/// around them.
struct Measured {
  std::vector<KernelTiming> kernels;
  double outsideKernels = 0;
};

/// Trains the calibration workload on the host alone (`gpus` 0) or data
/// parallel on that many GPUs (emulated with --emulate; the host only feeding
/// them), with the request's threads in all. The time outside kernels is the run's
/// steady steps less every kernel's time, per node run: meaningful on the
/// host alone, where nothing waits on another device.
llvm::Expected<Measured> measure(const CalibrateRequest &req, unsigned gpus) {
  TrainOptions t;
  t.model.name = req.model;
  t.model.options.imageSize = req.imageSize;
  t.compile.options.batch = req.perDevice * std::max(1u, gpus);
  t.compile.options.optimizer = "momentum";
  if (gpus > 0) {
    t.placement.gpus = (int)gpus;
    t.compile.options.params = ParamPlacement{ParamPlacement::Mirrored};
    t.emulate = req.emulate;
  }
  t.steps = req.steps;
  t.evaluate = false;
  t.progress = false;
  t.executor.threads = req.threads;
  t.kernelTimes = true;
  std::string discard;
  llvm::raw_string_ostream out(discard);
  // Calibration runs in this process alone.
  WorldOfOne alone;
  auto r = runTraining(t, out, alone);
  if (!r)
    return withContext(r.takeError(), "calibration run");
  Measured m;
  double kernelSeconds = 0;
  int64_t runs = 0;
  for (KernelTiming &k : r->kernels) {
    kernelSeconds += k.seconds;
    runs += k.runs;
    // Emulated GPUs run as cpu:1.. (the host stays cpu:0).
    auto id = DeviceId::parse(k.device);
    if (gpus == 0 || (id && !id->isHost()))
      m.kernels.push_back(std::move(k));
  }
  if (m.kernels.empty() || runs == 0)
    return makeError("the calibration run timed no kernel");
  m.outsideKernels = std::max(0.0, (r->steadySeconds - kernelSeconds) / (double)runs);
  return m;
}

/// Each GPU's memory as the physical GPU K that stands for gpu:K has it,
/// and the GPUs' model when they are all one.
llvm::Error recordPhysicalGpus(Cluster &cluster, llvm::raw_ostream &log) {
  std::set<std::string> models;
  for (size_t i = 0; i < cluster.devices().size(); ++i) {
    const ClusterDevice &d = cluster.devices()[i];
    if (d.kind != DeviceKind::GPU)
      continue;
    std::optional<DeviceModel> gpu = deviceModel(d.id);
    if (!gpu)
      return makeError(d.name + ": this machine's GPU " + llvm::Twine(d.id.index) +
                       " cannot be asked its model");
    models.insert(gpu->name);
    if (gpu->memoryBytes > 0)
      cluster.setMemory(i, gpu->memoryBytes);
    log << d.name << ": " << gpu->name << llvm::format(", %.1f GiB\n", gpu->memoryBytes / 1073741824.0);
  }
  KindCalibration k = cluster.calibration(DeviceKind::GPU);
  k.model = models.size() == 1 ? *models.begin() : "";
  if (models.size() > 1)
    log << "the GPUs are of " << models.size() << " models: no model recorded (--gpu-model names one)\n";
  cluster.setCalibration(DeviceKind::GPU, std::move(k));
  return llvm::Error::success();
}

/// Every link's bandwidth: with emulated devices a copy in this machine's
/// memory; between physical devices each link timed both ways (the slower
/// counts), physical GPU K standing for gpu:K.
llvm::Error measureLinks(Cluster &cluster, bool emulated, llvm::raw_ostream &log) {
  if (emulated) {
    auto copy = copyBandwidth(DeviceId::host(), DeviceId::host());
    if (!copy)
      return copy.takeError();
    for (size_t i = 0; i < cluster.links().size(); ++i)
      cluster.setLinkBandwidth(i, *copy);
    log << llvm::format("links %.2f GB/s (a copy in this machine's memory)\n", *copy / 1e9);
    return llvm::Error::success();
  }
  for (size_t i = 0; i < cluster.links().size(); ++i) {
    const Link &l = cluster.links()[i];
    const ClusterDevice *a = cluster.find(l.a), *b = cluster.find(l.b);
    if (!a || !b)
      return makeError("link " + l.a + " - " + l.b + ": not devices of the cluster");
    auto there = copyBandwidth(a->id, b->id), back = copyBandwidth(b->id, a->id);
    if (!there)
      return withContext(there.takeError(), "link " + l.a + " - " + l.b);
    if (!back)
      return withContext(back.takeError(), "link " + l.b + " - " + l.a);
    cluster.setLinkBandwidth(i, std::min(*there, *back));
    log << llvm::format("link %s - %s %.2f GB/s\n", l.a.c_str(), l.b.c_str(),
                        std::min(*there, *back) / 1e9);
  }
  return llvm::Error::success();
}

} // namespace

KindCalibration fitCalibration(llvm::ArrayRef<KernelTiming> kernels, llvm::StringRef measured,
                               double outsideKernels) {
  KindCalibration k;
  k.measured = measured.str();
  std::vector<double> tiny;
  for (const KernelTiming &t : kernels)
    if (t.runs > 0 && !isCommunication(t.op) && t.flops < kTinyFlops && t.bytes < kTinyBytes)
      tiny.push_back(t.seconds / t.runs);
  if (!tiny.empty()) {
    std::nth_element(tiny.begin(), tiny.begin() + tiny.size() / 2, tiny.end());
    k.launchSeconds = tiny[tiny.size() / 2];
  }
  double work[3] = {0, 0, 0}, seconds[3] = {0, 0, 0};
  for (const KernelTiming &t : kernels) {
    if (t.runs == 0 || isCommunication(t.op))
      continue;
    int c = (int)classOf(t.op);
    work[c] += (double)(c == (int)OpClass::Memory ? t.bytes : t.flops) * t.runs;
    seconds[c] += std::max(0.0, t.seconds - k.launchSeconds * t.runs);
  }
  double *rates[3] = {&k.convFlops, &k.gemmFlops, &k.memoryBytes};
  for (int c = 0; c < 3; ++c)
    *rates[c] = seconds[c] > 0 && work[c] > 0 ? work[c] / seconds[c] : 0;
  k.launchSeconds += std::max(0.0, outsideKernels);
  return k;
}

llvm::Expected<Cluster> calibrateCluster(const CalibrateRequest &req, llvm::raw_ostream &log) {
  auto cluster = loadClusterFile(req.clusterFile);
  if (!cluster)
    return cluster.takeError();
  unsigned gpus = cluster->numGpus();
  if (gpus > 0 && !req.emulate && (unsigned)visibleDeviceCount(DeviceKind::GPU) < gpus)
    return makeError("the cluster has " + llvm::Twine(gpus) + " GPUs and this machine " +
                     llvm::Twine(visibleDeviceCount(DeviceKind::GPU)) + " (" +
                     llvm::join(visibleDevices(), ", ") +
                     "); --emulate measures the CPU devices that stand for them");
  std::string where = req.model + " " + std::to_string(req.imageSize) + "x" +
                      std::to_string(req.imageSize) + ", " + std::to_string(req.perDevice) +
                      " per device, on " + cpuModel() + ", " +
                      std::to_string(std::thread::hardware_concurrency()) + " logical CPUs";

  // Each kind is measured as the executor runs its devices. The host alone
  // has every core. Each of N emulated GPUs has 1/N of them, measured while
  // as many emulated GPUs as the cores hold run at once (sharing the memory's
  // bandwidth as in a step); the simulator adds the rest of the sharing:
  // kernels take turns at the cores as the executor's core budget makes
  // them. Physical GPUs run data parallel, every GPU of the cluster at once.
  const unsigned cores =
      req.threads > 0 ? (unsigned)req.threads : std::max(1u, std::thread::hardware_concurrency());
  double outsideKernels = 0; // the host's, per node: the emulated devices' too
  auto calibrateKind = [&](DeviceKind kind, unsigned running, unsigned threads,
                           const std::string &measured, llvm::StringRef note) -> llvm::Error {
    CalibrateRequest run = req;
    run.threads = (int)cores;
    auto timed = measure(run, running);
    if (!timed)
      return timed.takeError();
    if (kind == DeviceKind::CPU)
      outsideKernels = timed->outsideKernels;
    KindCalibration k = fitCalibration(timed->kernels, measured + ": " + where, outsideKernels);
    if (kind == DeviceKind::CPU || req.emulate) {
      k.cores = cores;
      k.threads = threads;
    }
    if (!k.present())
      return makeError("the calibration run for the " + deviceKindName(kind) +
                       " devices left an op class without a measured rate");
    cluster->setCalibration(kind, k);
    log << llvm::format("%-4s launch %.1f us, convolutions %.1f GFLOP/s, matrix products %.1f "
                        "GFLOP/s, the rest %.2f GB/s",
                        deviceKindName(kind).str().c_str(), k.launchSeconds * 1e6,
                        k.convFlops / 1e9, k.gemmFlops / 1e9, k.memoryBytes / 1e9)
        << note << "\n";
    return llvm::Error::success();
  };
  if (auto e = calibrateKind(DeviceKind::CPU, 0, cores,
                             "the host alone, " + std::to_string(cores) + " threads",
                             "; the host, " + std::to_string(cores) + " threads"))
    return e;
  if (gpus > 0 && req.emulate) {
    const unsigned each = std::max(1u, cores / gpus), atOnce = cores / each;
    if (auto e = calibrateKind(
            DeviceKind::GPU, atOnce, each,
            std::to_string(atOnce) + " emulated GPUs at once, " + std::to_string(each) + " of " +
                std::to_string(cores) + " threads each",
            "; each of " + std::to_string(gpus) + " emulated GPUs, " + std::to_string(each) +
                " of " + std::to_string(cores) + " threads"))
      return e;
    if (auto e = measureLinks(*cluster, /*emulated=*/true, log))
      return e;
  } else if (gpus > 0) {
    if (auto e =
            calibrateKind(DeviceKind::GPU, gpus, 0, std::to_string(gpus) + " GPUs data parallel",
                          "; " + std::to_string(gpus) + " GPUs at once"))
      return e;
    if (auto e = recordPhysicalGpus(*cluster, log))
      return e;
    if (auto e = measureLinks(*cluster, /*emulated=*/false, log))
      return e;
  }
  if (gpus > 0 && !req.gpuModel.empty()) {
    KindCalibration k = cluster->calibration(DeviceKind::GPU);
    k.model = req.gpuModel;
    cluster->setCalibration(DeviceKind::GPU, std::move(k));
  }
  std::string out = req.output.empty() ? req.clusterFile : req.output;
  if (auto e = writeOutputFile(out, clusterToJson(*cluster) + "\n"))
    return e;
  log << "wrote " << out << "\n";
  return cluster;
}

} // namespace graphc
