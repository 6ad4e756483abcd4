//===- ModelParallel.h - One replica over several devices: list schedules -*- C++ -*-===//
//
// placeModelParallel() spreads one replica's training graph over a cluster's
// devices to shorten the predicted step under each device's memory, with one
// of three list schedules (ScheduleOrder):
//
//   EarliestStart  the memory-constrained Earliest Task First list scheduler
//              (m-ETF) of Baechi (Jeon et al., SoCC 2020), built on ETF
//              (Hwang, Chow, Anger and Lee, SIAM J. Computing 1989): among
//              all ready nodes, the (node, device) pair that starts first;
//   MemoryOrder    a memory-priority list schedule: the ready node that adds
//              the fewest bytes to what is live (its results, less those of
//              the operands it reads last), ties in graph order, on the
//              device that needs the fewest bytes copied in, then the device
//              of the node before (a chain, and a variable read, stay with
//              their consumer), then the earliest start. A branch's
//              intermediates are freed before another branch begins, and
//              all devices together hold about what one device would plus
//              the copies that cross devices; the step is longer where
//              m-ETF overlapped more.
//   SegmentedMemoryOrder  the memory order, with each forward node (and
//              each variable, with its first reader) placed first on the
//              GPU of its segment: the forward pass in graph order cut into
//              one contiguous segment per GPU (cluster order), so that each
//              GPU's estimated peak (what its segment saves for the
//              backward, two results of a node's size at its gradient, the
//              values that cross its ends) is as small a share of its
//              memory as the cuts can make it. The memory order fills one
//              device before moving on, so the first takes the largest
//              activations and has no room left for their gradients; their
//              backward then spills to other devices with copies of them.
//              Backward nodes go as in the memory order (where their
//              operands are).
//
// All share the rest:
//
//   units      colocation groups (ColocationGroups.h): a variable's reads,
//              updates and optimizer slots stay together; an Input stays on
//              the host, which feeds inputs;
//   devices    the cluster's GPUs (the host only for what no GPU kind can
//              run);
//   loop       among the nodes whose producers are all scheduled (m-ETF),
//              or the one the memory order takes, and the
//              devices their group may use, take the pair that can start
//              earliest: the device is free and every operand has arrived
//              (its producer's end, plus bytes / link bandwidth and a latency
//              from another device). Ties: the earlier end, then graph order,
//              then cluster order. A node's time is the step-time model's
//              kernelSeconds, an operand's arrival its copySeconds
//              (placement/analysis/StepTimeModel.h, shared with the cost
//              model and the simulator).
//   memory     a device holds the variable replicas (and slots) of the
//              groups placed on it for the whole step, and each node's
//              results from its start until its last consumer is scheduled;
//              a pair that would exceed the device's memory is not taken.
//
// ETF's guarantee holds without the memory constraint: the step it schedules
// is at most (2 - 1/p)·ω + C, where ω is the optimal step on p devices with
// free communication and C the largest communication along any chain of the
// graph. With memory constraints m-ETF is a heuristic (Baechi reports steps
// within 6.2% of expert placements). The result sets every node's requested
// device (and, in the module's other graphs, that of the node of the same
// name: gradient accumulation's micro-steps run where main runs); the placer
// (Placer.h) then assigns them and insert-transfers adds the copies. The memory estimate is the
// scheduler's; the compile checks the result against the memory plan
// (placement/analysis/MemoryNeeds.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Module.h"
#include "placement/Placer.h"
#include "placement/analysis/StepTimeModel.h"

#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace graphc {

/// Which ready node a list schedule takes next (see the file comment).
enum class ScheduleOrder { EarliestStart, MemoryOrder, SegmentedMemoryOrder };

/// "m-ETF", "memory order" or "segmented memory order": the names --explain
/// and the plan's summary use.
llvm::StringRef scheduleOrderName(ScheduleOrder order);

struct ModelParallelOptions {
  ScheduleOrder order = ScheduleOrder::EarliestStart;
  KernelTimes times;
  int64_t batch = 0; ///< 0: the module's bound batch (else 1)
  /// The share of its memory_bytes each device may fill, by name (1 when
  /// absent): the scheduler's estimate is not the executor's plan, and the
  /// tools lower a device's share when the plan does not fit on it.
  std::map<std::string, double> memoryShares;
  double shareOf(const std::string &device) const {
    auto it = memoryShares.find(device);
    return it == memoryShares.end() ? 1.0 : it->second;
  }
};

struct ModelParallelDevice {
  std::string device;
  int64_t nodes = 0;
  int64_t persistentBytes = 0; ///< variable replicas and slots
  int64_t peakBytes = 0;       ///< persistent plus the largest live results
  double busySeconds = 0;
};

struct ModelParallelPlan {
  std::vector<ModelParallelDevice> devices; ///< cluster order
  double stepSeconds = 0;                   ///< the schedule's makespan
  ScheduleOrder order = ScheduleOrder::EarliestStart;
};

/// Sets the requested device of every node of the module's main graph.
/// Errors name the node: one whose results, operand copies or group's
/// variables no device can hold (with what it needs on each device), or
/// whose operands cannot reach any device; one no device kind can run.
llvm::Expected<ModelParallelPlan> placeModelParallel(Module &m, const Cluster &c,
                                                     const KernelAvailability &kernels,
                                                     const ModelParallelOptions &opts = {});

} // namespace graphc
