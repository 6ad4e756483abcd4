#include "placement/analysis/StepTimeModel.h"

#include <algorithm>

namespace graphc {

double StepTimeModel::kernelSeconds(Op op, const NodeCost &cost, const ClusterDevice &d) const {
  if (cost.flops == 0 && cost.bytesRead + cost.bytesWritten == 0)
    return 0;
  if (const KindCalibration &k = c_.calibration(d.kind); k.present()) {
    double work;
    switch (op) {
    case Op::Conv:
    case Op::ConvGradData:
    case Op::ConvGradFilter:
      work = cost.flops / k.convFlops;
      break;
    case Op::MatMul:
    case Op::Gemm:
      work = cost.flops / k.gemmFlops;
      break;
    default:
      work = (cost.bytesRead + cost.bytesWritten) / k.memoryBytes;
    }
    return k.launchSeconds + work / d.relativeSpeed;
  }
  bool gpu = d.kind == DeviceKind::GPU;
  double bandwidth = (gpu ? t_.gpuMemoryBandwidth : t_.cpuMemoryBandwidth) * d.relativeSpeed;
  return std::max(computeSeconds(cost.flops, d),
                  (double)(cost.bytesRead + cost.bytesWritten) / bandwidth) +
         (gpu ? t_.gpuLaunchSeconds : t_.cpuLaunchSeconds);
}

RingLinks StepTimeModel::ringLinks(llvm::ArrayRef<std::string> devicesByRank) const {
  RingLinks out;
  for (size_t i = 0; i < devicesByRank.size(); ++i) {
    const std::string &a = devicesByRank[i], &b = devicesByRank[(i + 1) % devicesByRank.size()];
    if (a == b)
      continue; // two ranks on one device share memory
    if (auto bw = c_.bandwidth(a, b))
      out.slowest = out.slowest == 0 ? *bw : std::min(out.slowest, *bw);
    else if (!out.missing)
      out.missing = {a, b};
  }
  return out;
}

} // namespace graphc
