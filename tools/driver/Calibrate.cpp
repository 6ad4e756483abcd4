#include "tools/driver/Calibrate.h"

#include "ir/Archive.h"
#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "tools/driver/Trainer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace graphc {

namespace {

/// Below these a kernel does next to no work: its time is its launch.
constexpr int64_t kTinyFlops = 1 << 14, kTinyBytes = 1 << 14;

enum class OpClass { Conv, Gemm, Memory };

/// Transfers and collectives: the simulator times them from the links.
bool isCommunication(Op op) {
  return op == Op::Transfer || op == Op::AllReduce;
}

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

/// Bytes per second of a 64 MiB memcpy (the best of a few).
double copyBandwidth() {
  const size_t bytes = 64u << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, bytes / s);
    a[i] = b[bytes - 1 - i]; // keep the copies observable
  }
  return best;
}

/// A calibration run's kernel timings and the executor's own time per node
/// around them.
struct Measured {
  std::vector<KernelTiming> kernels;
  double outsideKernels = 0;
};

/// Trains the calibration workload on the host alone (`emulatedGpus` 0) or
/// data parallel on that many emulated GPUs (the host only feeding them),
/// with the request's threads in all. The time outside kernels is the run's
/// steady steps less every kernel's time, per node run: meaningful on the
/// host alone, where nothing waits on another device.
llvm::Expected<Measured> measure(const CalibrateRequest &req, unsigned emulatedGpus) {
  TrainOptions t;
  t.model.name = req.model;
  t.model.options.imageSize = req.imageSize;
  t.compile.options.batch = req.perDevice * std::max(1u, emulatedGpus);
  t.compile.options.optimizer = "momentum";
  if (emulatedGpus > 0) {
    t.placement.gpus = (int)emulatedGpus;
    t.compile.options.params = ParamPlacement{ParamPlacement::Mirrored};
    t.emulate = true;
  }
  t.steps = req.steps;
  t.evaluate = false;
  t.progress = false;
  t.executor.threads = req.threads;
  t.kernelTimes = true;
  std::string discard;
  llvm::raw_string_ostream out(discard);
  auto r = runTraining(t, out);
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
    if (emulatedGpus == 0 || (id && !id->isHost()))
      m.kernels.push_back(std::move(k));
  }
  if (m.kernels.empty() || runs == 0)
    return makeError("the calibration run timed no kernel");
  m.outsideKernels = std::max(0.0, (r->steadySeconds - kernelSeconds) / (double)runs);
  return m;
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
  if (gpus > 0 && !req.emulate)
    return makeError("calibrating physical GPUs is not implemented; --emulate measures the CPU "
                     "devices that stand for the cluster's " +
                     llvm::Twine(gpus) + " GPUs");
  std::string where = req.model + " " + std::to_string(req.imageSize) + "x" +
                      std::to_string(req.imageSize) + ", " + std::to_string(req.perDevice) +
                      " per device, on " + cpuModel() + ", " +
                      std::to_string(std::thread::hardware_concurrency()) + " logical CPUs";

  // Each kind is measured with the threads the executor gives one of its
  // devices: the host alone has every core; each of N emulated GPUs 1/N of
  // them, measured while as many emulated GPUs as the cores hold run at
  // once (sharing the memory's bandwidth as in a step). The simulator adds
  // the rest of the sharing: kernels take turns at the cores as the
  // executor's core budget makes them.
  const unsigned cores = req.threads > 0 ? (unsigned)req.threads
                                         : std::max(1u, std::thread::hardware_concurrency());
  double outsideKernels = 0; // the host's, per node: the emulated devices' too
  auto calibrateKind = [&](DeviceType kind, unsigned threads,
                           llvm::StringRef note) -> llvm::Error {
    CalibrateRequest run = req;
    run.threads = (int)cores;
    auto timed = measure(run, kind == DeviceType::GPU ? cores / threads : 0);
    if (!timed)
      return timed.takeError();
    if (kind == DeviceType::CPU)
      outsideKernels = timed->outsideKernels;
    std::string measured =
        (kind == DeviceType::CPU ? "the host alone"
                                 : std::to_string(cores / threads) + " emulated GPUs at once") +
        std::string(", ") + std::to_string(threads) + " of " + std::to_string(cores) +
        " threads each: " + where;
    KindCalibration k = fitCalibration(timed->kernels, measured, outsideKernels);
    k.cores = cores;
    k.threads = threads;
    if (!k.present())
      return makeError("the calibration run for the " + deviceTypeName(kind) +
                       " devices left an op class without a measured rate");
    cluster->setCalibration(kind, k);
    log << llvm::format("%-4s launch %.1f us, convolutions %.1f GFLOP/s, matrix products %.1f "
                        "GFLOP/s, the rest %.2f GB/s; one device of %u threads",
                        deviceTypeName(kind).str().c_str(), k.launchSeconds * 1e6,
                        k.convFlops / 1e9, k.gemmFlops / 1e9, k.memoryBytes / 1e9, k.threads)
        << note << "\n";
    return llvm::Error::success();
  };
  if (auto e = calibrateKind(DeviceType::CPU, cores, " (the host)"))
    return e;
  if (gpus > 0) {
    if (auto e = calibrateKind(DeviceType::GPU, std::max(1u, cores / gpus),
                               " (each of " + std::to_string(gpus) + " emulated GPUs, sharing " +
                                   std::to_string(cores) + " cores)"))
      return e;
    double copy = copyBandwidth();
    for (size_t i = 0; i < cluster->links().size(); ++i)
      cluster->setLinkBandwidth(i, copy);
    log << llvm::format("links %.2f GB/s (a copy in this machine's memory)\n", copy / 1e9);
  }
  std::string out = req.output.empty() ? req.clusterFile : req.output;
  if (auto e = writeFileAtomically(out, clusterToJson(*cluster) + "\n"))
    return e;
  log << "wrote " << out << "\n";
  return cluster;
}

} // namespace graphc
