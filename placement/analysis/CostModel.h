//===- CostModel.h - Per-device load and predicted step time ----*- C++ -*-===//
//
// estimatePlacementCost() reads a placed module (every node assigned) and a
// cluster and predicts one training step, per device:
//
//   compute    = FLOPs of its nodes (ir/Cost.h) at the device's peak (kind
//                peak · relative speed)
//   traffic    = every value read on another device than it was made on, once
//                per destination (what insert-transfers turns into Transfers,
//                counted the same before or after that pass), plus ring
//                all-reduce: each rank sends and receives 2·(n−1)/n of its
//                operands' bytes, to and from the next and previous rank
//   comm time  = for each direction, the sum over its transfers of
//                bytes / link bandwidth (the link between the two devices, or
//                the best two-hop path); a device's comm time is the larger
//                direction (links are full duplex, transfers through one
//                device's side are serial); an all-reduce runs at the slowest
//                link of its ring
//   step       = with overlap (the default): max(compute, comm), since copies
//                and collectives run on their own streams; without overlap:
//                compute + comm
//
// and the whole step as the slowest device. With gradient accumulation
// (meta `accumulate` = K) a step is an update: graph main once and every
// other graph (the micro-steps) K − 1 times. It is a lower bound: FLOPs at
// peak, no kernel launch, memory-bound time or link latency, no dependency
// stalls. Its times are the step-time model's (StepTimeModel.h) lower-bound
// answers: computeSeconds, bandwidthSeconds and ringBytes; m-ETF and the
// simulator ask the same model for kernels and latencies.
// Variable bytes count every variable whose storage is on the device
// (parameters, optimizer slots, state such as BN statistics).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

struct CostOptions {
  bool overlapCommunication = true;
  int64_t batch = 0; ///< sizes at this batch; 0: the module's bound batch (else 1)
};

struct DeviceCost {
  std::string device;
  int64_t nodes = 0;
  int64_t flops = 0;
  int64_t variableBytes = 0;
  int64_t bytesIn = 0, bytesOut = 0; ///< per step: transfers and all-reduce
  int64_t allReduceBytes = 0;        ///< of bytesOut (and of bytesIn): ring all-reduce
  double computeSeconds = 0, commSeconds = 0, stepSeconds = 0;
};

struct DeviceTraffic {
  std::string from, to;
  int64_t bytes = 0;
  double seconds = 0; ///< bytes / bandwidth between the two
};

struct PlacementCost {
  std::vector<DeviceCost> devices;    ///< every cluster device, cluster order
  std::vector<DeviceTraffic> traffic; ///< pairs that exchange bytes, cluster order
  bool overlap = true;
  double stepSeconds = 0;
  std::string slowestDevice;
  int64_t totalTrafficBytes() const;
  const DeviceCost *find(llvm::StringRef device) const;
};

/// Errors: a node without an assigned device or with one outside the
/// cluster; two devices that exchange bytes with no link between them.
llvm::Expected<PlacementCost> estimatePlacementCost(const Module &m, const Cluster &c,
                                                    CostOptions opts = {});

} // namespace graphc
