//===- Cluster.h - The devices a placed graph runs on -----------*- C++ -*-===//
//
// A cluster is a host ("cpu:0") plus accelerators, each with a kind, memory
// and a relative speed, and the links between them with their bandwidths.
// It comes from `--gpus N` (defaultCluster: H100-like figures, documented in
// docs/placement.md; or N copies of a calibrated GPU: ofCalibrated) or from a
// JSON file (parseClusterJson). A cluster that
// exists has passed validation: names are "<kind>:<index>" and unique, the
// host "cpu:0" is present, links join two different known devices once, and
// every figure is positive. Device order is the order devices were listed,
// host first; every tie the placer and cost model break follows it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DeviceId.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphc {

struct ClusterDevice {
  std::string name; ///< "cpu:0", "gpu:3"
  DeviceKind kind = DeviceKind::CPU;
  int64_t memoryBytes = 0;
  double relativeSpeed = 1.0; ///< multiplies the kind's peak FLOP/s
  /// The name parsed, filled by Cluster::create (which refuses a name that
  /// does not parse or does not match `kind`).
  DeviceId id;
};

/// An undirected link; its bandwidth holds in each direction.
struct Link {
  std::string a, b;
  double bandwidth = 0; ///< bytes per second, each direction
};

/// Figures behind defaultCluster (docs/placement.md gives their sources).
struct ClusterDefaults {
  static constexpr int64_t kGpuMemory = 80LL << 30;    ///< H100 SXM: 80 GiB HBM3
  static constexpr int64_t kHostMemory = 2048LL << 30; ///< DGX H100 host: 2 TiB
  static constexpr double kGpuPeakFlops = 67e12;       ///< H100 SXM FP32 (non-tensor)
  static constexpr double kCpuPeakFlops = 7.2e12;      ///< 2 x 56-core AVX-512 FP32 FMA
  static constexpr double kGpuGpuBandwidth = 450e9;    ///< NVLink 4 via NVSwitch, per direction
  static constexpr double kHostGpuBandwidth = 64e9;    ///< PCIe 5.0 x16, per direction
};

/// What `graphrun calibrate` measured for one kind of device: the time one
/// kernel costs beyond its work, and the work per second of three op classes
/// (convolutions and their gradients, matrix products: FLOP/s; everything
/// else, memory-bound: bytes/s). Zero: not measured.
struct KindCalibration {
  double launchSeconds = 0;
  double convFlops = 0, gemmFlops = 0, memoryBytes = 0;
  std::string measured; ///< on what, for the reader ("AMD EPYC, 2 cores, ...")
  /// The model of device the figures are for ("NVIDIA H200"): what `--gpus
  /// N` looks a calibrated cluster up by (calibratedClusterFileName). Empty:
  /// not named (emulated devices unless named when calibrated).
  std::string model;
  /// Devices emulated on the host's CPU cores (`--emulate`): the rates are
  /// one device's with `threads` threads, and the CPU devices of a run share
  /// `cores` cores, a kernel holding its device's threads while it runs (as
  /// the executor's core budget does). 0: devices of their own.
  unsigned threads = 0, cores = 0;
  bool emulated() const { return threads > 0 && cores > 0; }
  bool present() const { return convFlops > 0 && gemmFlops > 0 && memoryBytes > 0; }
};

class Cluster {
public:
  /// The most devices a cluster may have, host included: far beyond one
  /// machine or rack, and a bound on the graph a placement builds (one tower
  /// per GPU) and on the default cluster's all-pairs links (about 520,000 at
  /// this size); `--gpus 100000` is an error, not an exhausted memory.
  static constexpr unsigned kMaxDevices = 1024;

  /// The host "cpu:0" and `gpus` GPUs "gpu:0".."gpu:N-1" with H100-like
  /// figures: every GPU linked to the host and to every other GPU. `gpus`
  /// is below kMaxDevices.
  static Cluster defaultCluster(int gpus);
  /// The host and `gpus` copies of a calibrated cluster's gpu:0 (memory,
  /// speed), with its calibration and peaks, every GPU linked to the host and
  /// to every other GPU at the file's bandwidths (host - gpu:0, gpu:0 -
  /// gpu:1; ClusterDefaults' where the file has no such link). An error names
  /// what the file lacks (a GPU, the GPU calibration).
  static llvm::Expected<Cluster> ofCalibrated(const Cluster &calibrated, int gpus);
  /// Builds a cluster and validates it; an error names what is wrong.
  static llvm::Expected<Cluster> create(std::vector<ClusterDevice> devices, std::vector<Link> links,
                                        double cpuPeakFlops = ClusterDefaults::kCpuPeakFlops,
                                        double gpuPeakFlops = ClusterDefaults::kGpuPeakFlops);

  llvm::ArrayRef<ClusterDevice> devices() const { return devices_; }
  llvm::ArrayRef<Link> links() const { return links_; }
  const ClusterDevice *find(llvm::StringRef name) const;
  const ClusterDevice *find(DeviceId id) const;
  /// Position in devices(); the order ties are broken in.
  std::optional<unsigned> indexOf(llvm::StringRef name) const;
  std::optional<unsigned> indexOf(DeviceId id) const;
  const ClusterDevice &host() const { return devices_.front(); }
  unsigned numGpus() const;

  /// Peak FLOP/s of a device: its kind's peak times its relative speed.
  double peakFlops(const ClusterDevice &d) const;
  double kindPeakFlops(DeviceKind t) const { return t == DeviceKind::GPU ? gpuPeak_ : cpuPeak_; }
  /// --split auto: the peak FLOP/s of the device each tower runs on (tower
  /// t on gpu:t, as the tower passes request), so that shares of the batch
  /// in proportion to them finish together. An error names a tower whose GPU
  /// the cluster does not have.
  llvm::Expected<std::vector<double>> towerSpeeds(unsigned towers) const;
  /// Bandwidth between two devices: their direct link, else the best path
  /// through one intermediate device (its slower hop); none if unconnected.
  std::optional<double> bandwidth(llvm::StringRef a, llvm::StringRef b) const;

  /// "visible devices: cpu:0, gpu:0, gpu:1".
  std::string visibleDevices() const;
  /// Success if `name` is a device of this cluster; otherwise an error
  /// "<what> 'gpu:5' is not a device of this cluster; visible devices: ...".
  llvm::Error checkDevice(llvm::StringRef name, llvm::StringRef what = "device") const;
  llvm::Error checkDevice(DeviceId id, llvm::StringRef what = "device") const {
    return checkDevice(id.str(), what);
  }

  /// Measured figures of a kind (not present: the peak and defaults apply).
  const KindCalibration &calibration(DeviceKind t) const {
    return t == DeviceKind::GPU ? gpuCal_ : cpuCal_;
  }
  void setCalibration(DeviceKind t, KindCalibration c) {
    (t == DeviceKind::GPU ? gpuCal_ : cpuCal_) = std::move(c);
  }
  void setLinkBandwidth(size_t link, double bandwidth) { links_[link].bandwidth = bandwidth; }
  /// A measured memory (positive) for devices()[device].
  void setMemory(size_t device, int64_t bytes) { devices_[device].memoryBytes = bytes; }

private:
  /// The host and `gpus` copies of `gpu`, all pairs linked.
  static Cluster uniform(ClusterDevice host, ClusterDevice gpu, int gpus, double hostGpu,
                         double gpuGpu, double cpuPeakFlops, double gpuPeakFlops);

  KindCalibration cpuCal_, gpuCal_;
  std::vector<ClusterDevice> devices_;
  std::vector<Link> links_;
  double cpuPeak_ = ClusterDefaults::kCpuPeakFlops;
  double gpuPeak_ = ClusterDefaults::kGpuPeakFlops;
};

/// Parses a cluster description:
///   { "devices": [ {"name": "cpu:0", "kind": "cpu", "memory_bytes": 1e12,
///                   "relative_speed": 1}, ... ],
///     "links": [ {"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 64e9}, ... ],
///     "peak_flops": {"cpu": 7.2e12, "gpu": 67e12},          (optional)
///     "calibration": {"gpu": {"launch_seconds": 2e-5, "conv_flops": 1e11,
///                             "gemm_flops": 9e10, "memory_bytes": 5e9,
///                             "measured": "..."}} }           (optional)
/// Errors name the entry ("devices[2] ('gpu:1'): missing field 'kind'").
/// Nesting deeper than the format needs is refused before the JSON is
/// parsed (the parser recurses once per level).
llvm::Expected<Cluster> parseClusterJson(llvm::StringRef text);
/// Reads and parses a cluster file; errors start with the path.
llvm::Expected<Cluster> loadClusterFile(llvm::StringRef path);
/// The JSON form parseClusterJson reads back.
std::string clusterToJson(const Cluster &c);
/// The file a calibrated cluster of a GPU model is kept in: the model in
/// lower case, each run of other characters than letters and digits one '-'
/// ("NVIDIA H200" -> "nvidia-h200.json"); empty for a model without either.
std::string calibratedClusterFileName(llvm::StringRef gpuModel);

} // namespace graphc
