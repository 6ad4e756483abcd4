//===- MemoryPlan.h - Arena layout from liveness -----------------*- C++ -*-===//
//
// Each device gets one arena per step; every value a node produces there is a
// slice of it. Values that are never live at the same time share bytes.
//
// Stages:
//   1. Buffers. A value and its views (Reshape and friends) share one buffer;
//      a result may also take over an operand's buffer in place when the
//      kernel allows it and nothing reads the operand afterwards.
//   2. Liveness. A buffer lives from its first definition to its last read in
//      the device's issue order (Schedule.h). Buffers read by another device
//      live until the node they are released at (Schedule.h, rule 5) or, by
//      default, for the whole step, as graph outputs and graph inputs do.
//   3. Offsets. Greedy by size: the largest buffer first, each placed in the
//      lowest gap that no overlapping-in-time buffer occupies (TensorFlow
//      Lite's and TVM's static planners do the same); 64-byte aligned.
// Variables and constants are not in the arena (the executor owns them).
//
// arenaParts() splits an arena for messages that say why a device is full:
// at the position where the most bytes are live, the buffers received from
// another device (Transfer results: copies) and the rest (activations), plus
// the bytes the layout leaves between them (gaps, arenaBytes - peakLiveBytes).
// The three add up to arenaBytes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "placement/analysis/Schedule.h"

#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <optional>

namespace graphc {

struct BufferRequest {
  int64_t bytes = 0;
  unsigned first = 0, last = 0; ///< inclusive positions in issue order
};

struct OffsetPlan {
  std::vector<int64_t> offsets;
  int64_t arenaBytes = 0;    ///< the plan's size
  int64_t peakLiveBytes = 0; ///< the lower bound: most bytes live at one time
  unsigned peakPosition = 0; ///< the first position where peakLiveBytes are live
  int64_t naiveBytes = 0;    ///< one allocation per buffer
};

/// Places buffers in one arena so that no two live at the same time overlap.
OffsetPlan planOffsets(llvm::ArrayRef<BufferRequest> requests, int64_t alignment = 64);

struct DeviceMemoryPlan {
  /// Arena offset of each value this device holds in its arena.
  llvm::DenseMap<const Value *, int64_t> offset;
  /// Values that alias storage outside the arena (variables, constants, or
  /// views of them): the value they alias.
  llvm::DenseMap<const Value *, const Value *> external;
  OffsetPlan plan;
  /// The buffers planned (one per group of values sharing storage), and
  /// whether each holds a copy received from another device.
  std::vector<BufferRequest> buffers;
  std::vector<bool> copied;
};

/// An arena at its fullest moment; activations + copies + gaps = arenaBytes.
struct ArenaParts {
  int64_t activations = 0; ///< live results of this device's nodes (and feeds)
  int64_t copies = 0;      ///< live buffers received from other devices
  int64_t gaps = 0;        ///< what the layout leaves unused at that moment
};
ArenaParts arenaParts(const DeviceMemoryPlan &p, int64_t alignment = 64);

/// Plans the arena of device `device` of a schedule. `inPlaceOperand` says,
/// per node, which operand's buffer its result 0 may reuse (the kernel's
/// answer); pass nullptr for none.
DeviceMemoryPlan
planDeviceMemory(const Schedule &s, unsigned device,
                 const std::function<std::optional<unsigned>(const Node &)> &inPlaceOperand);

} // namespace graphc
