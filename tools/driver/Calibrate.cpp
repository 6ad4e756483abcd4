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

/// The kernel timings of the nodes on the devices a run's `pick` accepts,
/// and the executor's own time per node around them.
struct Measured {
  std::vector<KernelTiming> kernels;
  double outsideKernels = 0;
};

/// Trains the calibration workload. The time outside kernels is the run's
/// steady steps less every kernel's time, per node run: meaningful for a run
/// on one device, where nothing waits on another.
llvm::Expected<Measured> measure(const CalibrateRequest &req, const std::string &clusterFile,
                                 int gpus, const std::function<bool(const KernelTiming &)> &pick) {
  TrainOptions t;
  t.model.name = req.model;
  t.model.options.imageSize = req.imageSize;
  t.compile.options.batch = req.perDevice * std::max(1, gpus);
  t.compile.options.optimizer = "momentum";
  if (gpus > 0) {
    t.placement.clusterFile = clusterFile;
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
    if (pick(k))
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
    if (t.runs > 0 && t.flops < kTinyFlops && t.bytes < kTinyBytes)
      tiny.push_back(t.seconds / t.runs);
  if (!tiny.empty()) {
    std::nth_element(tiny.begin(), tiny.begin() + tiny.size() / 2, tiny.end());
    k.launchSeconds = tiny[tiny.size() / 2];
  }
  double work[3] = {0, 0, 0}, seconds[3] = {0, 0, 0};
  for (const KernelTiming &t : kernels) {
    if (t.runs == 0)
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
                      std::to_string(std::thread::hardware_concurrency()) + " logical CPUs, " +
                      (req.threads ? std::to_string(req.threads) + " threads" : "every core");

  // Fits a kind's figures, sets them and says what they are.
  double outsideKernels = 0; // the host run's: the emulated run's steps also wait
  auto calibrateKind = [&](llvm::Expected<Measured> timed, DeviceType kind,
                           const std::string &measured, llvm::StringRef note) -> llvm::Error {
    if (!timed)
      return timed.takeError();
    if (kind == DeviceType::CPU)
      outsideKernels = timed->outsideKernels;
    KindCalibration k = fitCalibration(timed->kernels, measured, outsideKernels);
    if (!k.present())
      return makeError("the calibration run on the " + deviceTypeName(kind) +
                       " devices left an op class without a measured rate");
    cluster->setCalibration(kind, k);
    log << llvm::format("%-4s launch %.1f us, convolutions %.1f GFLOP/s, matrix products %.1f "
                        "GFLOP/s, the rest %.2f GB/s",
                        deviceTypeName(kind).str().c_str(), k.launchSeconds * 1e6,
                        k.convFlops / 1e9, k.gemmFlops / 1e9, k.memoryBytes / 1e9)
        << note << "\n";
    return llvm::Error::success();
  };
  if (auto e =
          calibrateKind(measure(req, req.clusterFile, 0, [](const KernelTiming &) { return true; }),
                        DeviceType::CPU, "host alone: " + where, ""))
    return e;
  if (gpus > 0) {
    // Emulated GPUs run as cpu:1.. (the host stays cpu:0).
    auto onEmulatedGpu = [](const KernelTiming &k) {
      auto id = DeviceId::parse(k.device);
      return id && !id->isHost();
    };
    if (auto e =
            calibrateKind(measure(req, req.clusterFile, (int)gpus, onEmulatedGpu), DeviceType::GPU,
                          std::to_string(gpus) + " emulated GPUs busy at once on " + where,
                          " (each of " + std::to_string(gpus) + " emulated GPUs, all busy)"))
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
