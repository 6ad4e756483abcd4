//===- ExecutorImpl.h - The executor's state, shared by its two halves -*- C++ -*-===//
//
// Internal to executor/: Executor.cpp binds a module (devices, kernels,
// layouts, memory plans, variables, collectives) and answers the public
// queries; ExecutorRun.cpp runs steps (the per-device workers, waits, feeds,
// prefetching). Both see the state declared here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Collectives.h"
#include "executor/CoreBudget.h"
#include "executor/Device.h"
#include "executor/ExecutorOptions.h"
#include "executor/StepCapture.h"
#include "executor/StepTimes.h"
#include "executor/Trace.h"
#include "ir/Diagnostics.h"
#include "placement/analysis/MemoryPlan.h"
#include "placement/analysis/Schedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace graphc {
namespace exec {

/// How a node is carried out.
enum class Action : unsigned char {
  Kernel,     ///< launch its kernel on its device
  Feed,       ///< an Input: the step copies the feed in
  Alias,      ///< a Variable, Constant or view whose bytes already sit where its result is
  Transfer,   ///< a copy from another device (Device::receive)
  Collective, ///< an AllReduce: through the group's CollectiveEngine
};

struct NodeExec {
  const Node *node = nullptr;
  unsigned device = 0;  ///< index into ExecutorImpl::devices
  unsigned program = 0; ///< index into ExecutorImpl::programs
  Action action = Action::Kernel;
  std::unique_ptr<Kernel> kernel;
  std::vector<TensorView> inputs, outputs;
  /// Nodes on other devices that must be issued (and waited for) first.
  llvm::SmallVector<unsigned, 4> remotePreds;
  /// Devices to wake when this node is issued.
  llvm::SmallVector<unsigned, 2> remoteWaiters;
  std::atomic<uint64_t> issuedEpoch{0};
  std::shared_ptr<DeviceEvent> event; ///< marks this node's work, for remote waiters
  CollectiveEngine *collectives = nullptr;
  EventKind kind = EventKind::Compute;
  double seconds = 0;
  int64_t runs = 0;
  /// A fused group (Kernel::fusionKey, groupFusableKernels()): on its last
  /// member, every member in issue order; the others are `deferred` and run
  /// with it.
  std::vector<unsigned> fusedGroup;
  bool deferred = false;
};

/// A variable's storage on one device.
struct Storage {
  void *data = nullptr;
  TensorType type;
};

class DeviceVariables : public VariableAccess {
public:
  llvm::StringMap<Storage> storage;
  /// Sharded variables (Variable::sharded): the piece of the whole that
  /// this device's storage holds.
  llvm::StringMap<ShardRange> pieces;
  llvm::Expected<TensorView> variable(llvm::StringRef name) override {
    auto it = storage.find(name);
    if (it == storage.end())
      return makeError("variable '" + name + "' is not held on this device");
    TensorView v;
    v.data = it->second.data;
    v.dtype = it->second.type.dtype;
    v.shape = it->second.type.shape;
    return v;
  }
};

struct DeviceState {
  std::unique_ptr<Device> device;
  /// Its name in traces and the step breakdown: the plan's device where
  /// ExecutorOptions::deviceMap runs it on another ("gpu:0@cpu:1").
  std::string traceName;
  /// Per program, NodeExec indices in issue order (empty where the program
  /// has no node on this device).
  std::vector<std::vector<unsigned>> orders;
  /// One arena for every program (they never run at once): the largest plan.
  void *arena = nullptr;
  /// The largest scratch any of its kernels asks for (not CPU devices, whose
  /// scratch comes with their cores: ExecutorImpl::cpuScratch).
  void *scratch = nullptr;
  /// Every program's offsets and aliases (values are distinct); `plan.plan`
  /// is the largest program's.
  DeviceMemoryPlan plan;
  DeviceVariables variables;
  llvm::DenseMap<const Node *, void *> constants; ///< device copies of Constant values
  unsigned computeTrack = 0, copyTrack = 0;
  std::vector<unsigned> tracks; ///< by Device::traceStreams()
  /// Work the host did for this device outside its launches (a CPU device's
  /// collectives), for the timeline when profiling.
  std::vector<LaunchTiming> hostTimings;
  /// Profiling: this run's intervals for the step breakdown, and when its
  /// worker started, saw the device's work done (synchronize returned) and
  /// finished (ExecutorProfile.cpp).
  std::vector<Activity> activities;
  double workerStartUs = 0, syncedUs = 0, workerEndUs = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::thread worker;
  uint64_t startEpoch = 0; ///< the worker runs a step when this advances
  llvm::Error error = llvm::Error::success();
};

} // namespace exec

struct ExecutorImpl {
  using Action = exec::Action;
  using NodeExec = exec::NodeExec;
  using DeviceState = exec::DeviceState;

  /// One bound graph: main first, then ExecutorOptions::graphs. They share
  /// the devices, variables, constants, collectives and arenas.
  struct Program {
    const Graph *graph = nullptr;
    Schedule schedule;           ///< device indices are the schedule's own
    std::vector<unsigned> feeds; ///< NodeExec indices of its Inputs
    std::vector<const Value *> outputs;
  };

  const Module *module = nullptr;
  ExecutorOptions opts;
  std::vector<Program> programs;
  std::vector<std::string> deviceNames; ///< every program's devices, sorted
  std::vector<DeviceId> deviceIds;      ///< deviceNames[i] typed
  /// The plan's device that deviceMap ran on deviceNames[i], where it differs.
  std::map<std::string, DeviceId> plannedDevice;
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::vector<std::unique_ptr<NodeExec>> nodes;
  llvm::DenseMap<const Node *, unsigned> index;
  std::unique_ptr<CoreBudget> cores;
  int cpuThreads = 1; ///< each CPU device's share of the cores
  /// The CPU devices' kernels' scratch, shared through `cores`
  /// (CoreBudget.h), allocated by the first CPU device.
  struct {
    int64_t bytes = 0; ///< the largest any CPU kernel asks for
    int devices = 0;
    Device *owner = nullptr;
    std::vector<void *> buffers;
  } cpuScratch;
  std::unique_ptr<CpuCollectives> cpuCollectives;
  std::vector<std::unique_ptr<CollectiveEngine>> otherCollectives;
  TraceRecorder trace;
  StepClock stepClock;
  StepTimes lastStepTimes;

  // Step state.
  uint64_t epoch = 0;
  uint64_t step = 0;
  unsigned running = 0; ///< the program being run
  /// Runs of other programs since main last ran (KernelContext::microStep).
  uint64_t microStep = 0;
  std::atomic<bool> aborted{false};
  std::mutex doneMutex;
  std::condition_variable doneCv;
  unsigned devicesDone = 0;
  std::atomic<bool> shuttingDown{false};
  uint64_t stepsRun = 0;

  // ExecutorOptions::cudaGraphs.
  std::unique_ptr<StepCapture> capture;
  std::string graphNote;
  std::string algorithmNote; ///< Executor::algorithmNote()

  // prefetch(): per Input node on a GPU, two device buffers the helper
  // thread fills while steps run; run({}) moves one into the input's step
  // buffer. Inputs on host devices are kept and copied in by run() as usual
  // (staging them would only add a copy).
  struct Prefetched {
    unsigned slot = 0;
    std::shared_ptr<const llvm::StringMap<Tensor>> tensors;
    std::vector<unsigned> staged; ///< Input NodeExec indices, in events' order
    std::vector<unsigned> host;   ///< Input NodeExec indices copied in by run()
    std::shared_ptr<std::vector<std::shared_ptr<DeviceEvent>>> events;
    std::future<std::string> done; ///< "" or the helper's error
  };
  std::deque<Prefetched> prefetched;
  unsigned prefetchCount = 0;
  llvm::DenseMap<unsigned, std::array<void *, 2>> staging;
  /// KernelContext::variablesVersion: 0 when a node writes variables;
  /// otherwise advanced by every writeVariable.
  uint64_t variablesVersion = 0;

  llvm::Error bind();
  llvm::Error createDevices();
  llvm::Error createKernels();
  void assignLayouts();
  llvm::DenseMap<const Value *, Layout> layouts; ///< values not listed are plain
  llvm::Error planMemory();
  /// After planMemory: the CPU devices' scratch buffers, one per lease of
  /// cores that can be held at once.
  llvm::Error shareCpuScratch();
  llvm::Error bindVariables();
  llvm::Error bindCollectives();
  void groupFusableKernels();
  TensorView viewOf(const Value *v);
  /// The device that runs `n` (an index into devices).
  unsigned deviceOf(const Node *n) const { return nodes[index.lookup(n)]->device; }
  llvm::Error runDevice(DeviceState &d);
  llvm::Error runNode(NodeExec &e, DeviceState &d);
  KernelContext contextFor(NodeExec &e, DeviceState &d) const;
  llvm::Error runFusedGroup(NodeExec &last, DeviceState &d);
  llvm::Error checkNumerics(NodeExec &e, DeviceState &d);
  llvm::Error checkFeeds(const Program &p, const llvm::StringMap<Tensor> &feeds) const;
  llvm::Error consumePrefetched(uint64_t stepNumber);
  llvm::Error runDevices();
  // Profiling (ExecutorProfile.cpp).
  /// The device's timings of the run just synchronised: the nodes' profile,
  /// trace events and the breakdown's intervals.
  void collectTimings(DeviceState &d, int micro);
  /// A wait of the device's worker for another device, from `startUs` to now.
  void noteWait(DeviceState &d, const NodeExec &pred, double startUs, int micro);
  /// A blocking copy the step's driver made (a feed in, an output back).
  void noteHostCopy(unsigned device, const std::string &name, llvm::StringRef op, CopyRoute route,
                    double startUs, int micro);
  /// Forgets the last run's intervals before a run.
  void startRunTimeline();
  /// The run's timeline, with the host's intervals around every device's.
  void recordRunTimeline(int micro, double startUs, double devicesDoneUs);
  llvm::Error bindCapture();
  /// The first host device of the step and a node it computes, for the
  /// capture's refusal ("" when every device is a GPU).
  std::string hostWorkInStep() const;
  void abortAll();
  void workerLoop(DeviceState &d);
  ~ExecutorImpl();
};

} // namespace graphc
