#include "tools/driver/ScalingTable.h"

#include "llvm/Support/Format.h"

namespace graphc {

void printScalingTable(llvm::ArrayRef<ScalingRow> rows, const ScalingRequest &scaling,
                       llvm::raw_ostream &os) {
  os << "     GPUs  workers  step ms  all-reduce on path ms    images/s  speed-up  efficiency\n";
  for (const ScalingRow &r : rows)
    os << llvm::format("  %7u %8u %8.2f %22.2f %11.0f %9.1f %10.1f%%\n", r.gpus, r.workers,
                       r.stepSeconds * 1e3, r.allReduceOnPath * 1e3, r.imagesPerSecond, r.speedup,
                       r.efficiency * 100);
  os << llvm::format("  weak scaling, %lld images per GPU; workers of %u GPUs, network %.0f Gb/s "
                     "per worker, %.0f us latency; ",
                     (long long)scaling.batchPerGpu, scaling.workersOf,
                     scaling.sim.networkBandwidth * 8 / 1e9,
                     scaling.sim.networkLatencySeconds * 1e6)
     << (!scaling.clusterFile.empty()      ? "each worker " + scaling.clusterFile
         : !scaling.calibratedFile.empty() ? "workers of calibrated GPUs, " + scaling.calibratedFile
                                           : std::string("default (H100-like) worker"))
     << "\n";
  os << "published, Inception v3 on other hardware (for orientation):\n"
        "  TensorFlow benchmarks (May 2017), DGX-1 with 8 P100s, synthetic data: 7.99x at 8 "
        "GPUs (99%)\n"
        "  Horovod (Sergeev and Del Balso, arXiv:1802.05799): 88% efficiency at 128 Pascal GPUs "
        "over 25 GbE (standard distributed TensorFlow: about 50%)\n";
}

} // namespace graphc
