//===- MemoryNeeds.h - What each device of a placed plan holds at its peak -*- C++ -*-===//
//
// A device needs its variables (parameters and running state, optimizer
// slots, gradient accumulators stored there: the cost model's variable
// bytes, Variable::bytesOn, so only its piece of sharded optimizer slots)
// plus its planned arena: the memory plan (MemoryPlan.h) for the very order
// the executor issues (Schedule.h), unassigned nodes on the host. The arena
// is told in the parts arenaParts() gives at its fullest moment: activations,
// copies received from other devices, and the gaps the layout leaves; every
// part is a figure of that plan, and the parts add up to the need. Kernel
// scratch outside the arena is not counted.
//
// Placement decisions check a plan against its cluster's memory_bytes with
// these figures: --params auto skips a mode that does not fit,
// --strategy model-parallel schedules again with less of an overflowing
// device, and graphc place and graphrun train refuse a plan that does not
// fit with a MemoryMisfit, an error that keeps the figures so that the fit
// advisor (passes/strategy/FitAdvisor.h) can add what would fit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Module.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace graphc {

/// What one device of a placed plan holds at its peak, against its memory.
struct MemoryNeed {
  std::string device;
  int64_t variables = 0;             ///< parameters and running state (VarKind Param, State)
  int64_t slots = 0;                 ///< optimizer slots (VarKind Slot)
  int64_t accumulators = 0;          ///< gradient accumulators (--accumulate)
  int64_t activations = 0;           ///< the arena's live results at its fullest moment
  int64_t copies = 0;                ///< the arena's live copies from other devices then
  int64_t gaps = 0;                  ///< the rest of the arena: what its layout leaves unused
  int64_t capacity = 0;              ///< the cluster's memory_bytes
  DeviceKind kind = DeviceKind::CPU; ///< the cluster's kind of the device
  int64_t arena() const { return activations + copies + gaps; }
  int64_t stored() const { return variables + slots + accumulators; }
  int64_t total() const { return stored() + arena(); }
  bool fits() const { return total() <= capacity; }
  /// "gpu:1 needs 1.50 GiB of 1.00 GiB".
  std::string brief() const;
  /// "gpu:1 needs 1.50 GiB = variables 600.00 MiB + optimizer slots
  /// 600.00 MiB + peak activations 300.00 MiB + copies 36.00 MiB, and has
  /// 1.00 GiB (512.00 MiB short)" (accumulators and layout gaps named when
  /// there are any; what it lacks when it does not fit).
  std::string text() const;
};

/// Each device's planned arena bytes for graph main, in the executor's issue
/// order (no in-place reuse: the kernels' answers are the executor's).
llvm::Expected<llvm::StringMap<int64_t>> plannedArenaBytes(const Module &placed);

/// The device that lacks the most (the first on a tie); null when all fit.
const MemoryNeed *mostShort(llvm::ArrayRef<MemoryNeed> needs);
/// What that device lacks; 0 when all fit.
int64_t shortfall(llvm::ArrayRef<MemoryNeed> needs);

/// Every device of `runnable` (placed, without its kept forward graph) that
/// the cluster describes, in cluster order.
llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable, const Cluster &cluster);
/// memoryNeeds() on the cluster `runnable`'s plan records (meta `cluster`);
/// none without a cluster.
llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable);

/// A plan (or every plan a strategy tried) does not fit its devices'
/// memory. It keeps the figures of the plan it tells: each device's need.
class MemoryMisfit : public llvm::ErrorInfo<MemoryMisfit> {
public:
  static char ID;
  /// `headline` ("the plan does not fit its cluster's memory"), the needs of
  /// every device, and what follows them (other plans tried), if anything.
  MemoryMisfit(std::string headline, std::vector<MemoryNeed> needs, std::string detail = "");
  const std::vector<MemoryNeed> &needs() const { return needs_; }
  const std::string &headline() const { return headline_; }
  /// The need of the device that lacks the most (mostShort).
  const MemoryNeed *worst() const { return mostShort(needs_); }
  /// The figures are a scheduler's estimate, not the executor's memory plan
  /// (--strategy model-parallel when its list schedule stops).
  bool estimated() const { return estimated_; }
  void setEstimated() { estimated_ = true; }
  /// What would fit (the fit advisor's), said after the figures.
  void setAdvice(std::string advice) { advice_ = std::move(advice); }
  const std::string &advice() const { return advice_; }
  /// "<headline>: <each device over, with its parts>; <the devices that fit,
  /// in one phrase>[; <detail>][; <advice>]".
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string headline_, detail_, advice_;
  std::vector<MemoryNeed> needs_;
  bool estimated_ = false;
};

/// "the plan does not fit its cluster's memory: ..." (a MemoryMisfit), or
/// success when every device fits.
llvm::Error checkFits(llvm::ArrayRef<MemoryNeed> needs);
/// The devices that do not fit, each with its parts ("; " between them),
/// then those that do in one phrase; "" when all fit.
std::string misfitText(llvm::ArrayRef<MemoryNeed> needs);

} // namespace graphc
