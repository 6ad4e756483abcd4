//===- Executor.h - Running a (placed) module step by step -------*- C++ -*-===//
//
// The executor binds a module once and then runs its main graph step after
// step:
//   bind: schedule (placement/analysis/Schedule.h) → kernels from the
//         registry, one per node, on the node's device → per-device arena
//         plans (placement/analysis/MemoryPlan.h) → arenas,
//         variable storage (one copy per device that uses a variable) and
//         tensor views, all fixed for the life of the executor.
//   step: copy feeds into input buffers → every device issues its nodes in
//         order on its own worker, waiting only on nodes of other devices →
//         collectives rendezvous (Collectives.h) → outputs copied out.
//
// CPU devices share one budget of cores: a kernel takes the device's share of
// threads while it runs, so N emulated devices on 2 cores never oversubscribe.
// The module must outlive the executor (kernels keep pointers to its nodes).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/ExecutorOptions.h"
#include "executor/StepTimes.h"
#include "executor/Trace.h"
#include "ir/DeviceId.h"
#include "kernels/Kernel.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>

namespace graphc {

class ExecutorImpl;

struct DeviceMemory {
  std::string device;
  int64_t arenaBytes = 0;    ///< planned arena
  int64_t peakLiveBytes = 0; ///< lower bound of any plan for this order
  int64_t naiveBytes = 0;    ///< one allocation per value
  int64_t variableBytes = 0; ///< variables and optimizer state held there
};

struct NodeProfile {
  const Node *node;
  std::string device;
  double seconds = 0; ///< summed over profiled steps
  int64_t runs = 0;
  /// Layout copies its kernel ran inside it, since the executor was made.
  ReorderCount reorders;
};

/// The library primitives a node's kernel has run (PrimitiveInfo).
/// Nodes run as one launch (Kernel::runGroup), in issue order, and the
/// device that runs them.
struct FusedGroup {
  std::string device;
  std::vector<const Node *> nodes;
};

struct NodePrimitives {
  const Node *node;
  std::string device;
  std::vector<PrimitiveInfo> primitives;
};

class Executor {
public:
  static llvm::Expected<std::unique_ptr<Executor>> create(const Module &m, ExecutorOptions opts);
  ~Executor();

  /// Runs the main graph once; feeds by Input name; returns the graph outputs.
  /// With no feeds, runs on the oldest prefetched ones (prefetch()).
  llvm::Expected<std::vector<Tensor>> run(const llvm::StringMap<Tensor> &feeds);
  /// Runs graph `graph` (main, or one of ExecutorOptions::graphs) once. Only
  /// runs of main advance the step counter; kernels see the runs of other
  /// graphs since main last ran as KernelContext::microStep (gradient
  /// accumulation: the micro-batch of the update, for random streams).
  llvm::Expected<std::vector<Tensor>> run(llvm::StringRef graph,
                                          const llvm::StringMap<Tensor> &feeds);

  /// Starts copying the inputs of a later step of main to their GPUs (a helper
  /// thread, through page-locked memory on a copy stream of their own) so
  /// that the copy overlaps the steps before it; run({}) consumes prefetched
  /// inputs in order. Inputs placed on host devices are only kept (run()
  /// copies them as usual). At most two steps may wait: the loop is
  ///   prefetch(b0); for each step i { prefetch(b[i+1]); run({}); }
  llvm::Error prefetch(llvm::StringMap<Tensor> feeds);

  /// ExecutorOptions::cudaGraphs: whether the step is replayed as a CUDA
  /// graph, or why not; "" when not asked for, and under Auto when no GPU
  /// takes part in the step.
  const std::string &cudaGraphNote() const;
  /// Why the convolutions compute otherwise than ExecutorOptions::convAlgorithm
  /// asked ("" when they do not): under a memory limit (ir/MemoryLimit.h), auto
  /// gives up Winograd where its scratch is what does not fit.
  const std::string &algorithmNote() const;

  /// The step counter (advanced by run); optimizers and dropout read it.
  uint64_t step() const { return step_; }
  void setStep(uint64_t s) { step_ = s; }

  /// A variable's value (its first replica).
  llvm::Expected<Tensor> readVariable(llvm::StringRef name) const;
  /// Sets every replica of a variable.
  llvm::Error writeVariable(llvm::StringRef name, const Tensor &value);
  /// The variables it holds that outlive a step (Variable::persistent():
  /// gradient accumulators aside), in module order.
  std::vector<std::string> variableNames() const;

  const std::vector<std::string> &devices() const;
  /// "cpu:0 (cpu, 2 threads)", one per device, for run plans.
  std::vector<std::string> deviceDescriptions() const;
  std::vector<DeviceMemory> memory() const;
  std::vector<NodeProfile> profile() const;
  /// Per node, the library primitives its kernel has run so far and the
  /// implementations the library chose for them on this CPU.
  std::vector<NodePrimitives> primitives() const;
  /// How many values the executor keeps in layout `l` (LayoutAssignment.h),
  /// and whether a GPU device takes part (where ExecutorOptions::gpuLayout
  /// applies).
  int64_t valuesInLayout(Layout l) const;
  Layout layoutOf(const Value *v) const;
  bool hasGpu() const;
  /// The fused update groups (ExecutorOptions::fuseUpdates).
  std::vector<FusedGroup> fusedGroups() const;
  const TraceRecorder &trace() const;
  /// Where the last run()'s wall time went (StepTimes.h).
  const StepTimes &lastStepTimes() const;

private:
  explicit Executor(std::unique_ptr<ExecutorImpl> impl);
  std::unique_ptr<ExecutorImpl> impl_;
  uint64_t step_ = 0;
};

} // namespace graphc
