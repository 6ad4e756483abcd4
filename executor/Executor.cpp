#include "executor/Executor.h"

#include "executor/Collectives.h"
#include "executor/CoreBudget.h"
#include "executor/Device.h"
#include "executor/MemoryPlan.h"
#include "executor/Schedule.h"
#include "executor/cuda/StepCapture.h"
#include "ir/Cost.h"
#include "ir/Diagnostics.h"
#include "ir/Initializers.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

namespace graphc {

namespace {

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
  unsigned device = 0;
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
};

/// A variable's storage on one device.
struct Storage {
  void *data = nullptr;
  TensorType type;
};

class DeviceVariables : public VariableAccess {
public:
  llvm::StringMap<Storage> storage;
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
  std::vector<unsigned> order; ///< NodeExec indices in issue order
  void *arena = nullptr;
  void *scratch = nullptr; ///< the largest scratch any of its kernels asks for
  DeviceMemoryPlan plan;
  DeviceVariables variables;
  llvm::DenseMap<const Node *, void *> constants; ///< device copies of Constant values
  unsigned computeTrack = 0, copyTrack = 0;
  std::vector<unsigned> tracks; ///< by Device::traceStreams()
  /// Work the host did for this device outside its launches (a CPU device's
  /// collectives), for the timeline when profiling.
  std::vector<LaunchTiming> hostTimings;
  std::mutex mutex;
  std::condition_variable cv;
  std::thread worker;
  uint64_t startEpoch = 0; ///< the worker runs a step when this advances
  llvm::Error error = llvm::Error::success();
};

bool allFinite(const Tensor &t) {
  if (t.dtype() != DType::F32)
    return true;
  const float *p = t.data<float>();
  for (int64_t i = 0, n = t.numElements(); i < n; ++i)
    if (!std::isfinite(p[i]))
      return false;
  return true;
}

} // namespace

struct Executor::Impl {
  const Module *module = nullptr;
  const Graph *graph = nullptr;
  ExecutorOptions opts;
  Schedule schedule;
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::vector<std::unique_ptr<NodeExec>> nodes;
  llvm::DenseMap<const Node *, unsigned> index;
  std::unique_ptr<CoreBudget> cores;
  std::unique_ptr<CpuCollectives> cpuCollectives;
  std::vector<std::unique_ptr<CollectiveEngine>> otherCollectives;
  TraceRecorder trace;
  std::vector<const Value *> outputs;

  // Step state.
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::atomic<bool> aborted{false};
  std::mutex doneMutex;
  std::condition_variable doneCv;
  unsigned devicesDone = 0;
  bool shuttingDown = false;
  uint64_t stepsRun = 0;

  // ExecutorOptions::cudaGraphs.
  std::unique_ptr<StepCapture> capture;
  std::string graphNote;

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

  llvm::Error bind();
  llvm::Error createDevices();
  llvm::Error createKernels();
  void assignLayouts();
  bool blockable(const Value *v) const;
  llvm::DenseMap<const Value *, Layout> layouts; ///< values not listed are plain
  llvm::Error planMemory();
  llvm::Error bindVariables();
  llvm::Error bindCollectives();
  TensorView viewOf(const Value *v);
  llvm::Error runDevice(DeviceState &d);
  llvm::Error runNode(NodeExec &e, DeviceState &d);
  llvm::Error checkNumerics(NodeExec &e, DeviceState &d);
  llvm::Error checkFeeds(const llvm::StringMap<Tensor> &feeds) const;
  llvm::Error consumePrefetched(uint64_t stepNumber);
  llvm::Error runDevices();
  void bindCapture();
  void abortAll();
  void workerLoop(DeviceState &d);
  ~Impl();
};

llvm::Error Executor::Impl::bind() {
  graph = module->findGraph("main");
  if (!graph)
    return makeError("module '" + module->name() + "' has no main graph");
  auto map = [&](const Node &n) {
    std::string d = n.assignedDevice().empty() ? "cpu:0" : n.assignedDevice();
    return opts.deviceMap ? opts.deviceMap(d) : d;
  };
  auto s = buildSchedule(*graph, map);
  if (!s)
    return s.takeError();
  schedule = std::move(*s);
  if (auto e = createDevices())
    return e;

  // Node records in global issue order.
  std::vector<const Node *> issue(graph->numNodes());
  for (auto &[n, pos] : schedule.position)
    issue[pos] = n;
  for (const Node *n : issue) {
    auto e = std::make_unique<NodeExec>();
    e->node = n;
    e->device = schedule.deviceOf.lookup(n);
    index[n] = nodes.size();
    devices[e->device]->order.push_back(nodes.size());
    nodes.push_back(std::move(e));
  }
  if (auto e = createKernels())
    return e;
  if (auto e = planMemory())
    return e;
  if (auto e = bindVariables())
    return e;

  // Views, aliases and cross-device dependencies.
  for (auto &e : nodes) {
    const Node *n = e->node;
    for (const Value *v : n->operands())
      e->inputs.push_back(viewOf(v));
    for (auto &r : n->results())
      e->outputs.push_back(viewOf(r.get()));
    if (isViewOp(n->op()) && e->outputs[0].data == e->inputs[0].data)
      e->action = Action::Alias;
    for (const Node *p : schedule.predecessors(n)) {
      unsigned pi = index.lookup(p);
      if (nodes[pi]->device != e->device && !llvm::is_contained(e->remotePreds, pi)) {
        e->remotePreds.push_back(pi);
        if (!llvm::is_contained(nodes[pi]->remoteWaiters, e->device))
          nodes[pi]->remoteWaiters.push_back(e->device);
      }
    }
  }
  if (auto e = bindCollectives())
    return e;
  for (const Value *v : graph->outputs())
    outputs.push_back(v);
  for (auto &d : devices)
    d->device->setProfiling(opts.profile, &trace);
  if (opts.cudaGraphs)
    bindCapture();

  // Workers for several devices; one device runs on the calling thread.
  if (devices.size() > 1)
    for (auto &d : devices)
      d->worker = std::thread([this, dev = d.get()] { workerLoop(*dev); });
  return llvm::Error::success();
}

llvm::Error Executor::Impl::createDevices() {
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  int total = opts.threads > 0 ? opts.threads : (int)hardware;
  // The cores are shared among the CPU devices that compute: a host that only
  // feeds and aggregates for towers must not halve one tower's threads. Every
  // CPU device gets that share; the budget's leases keep the sum within it.
  std::vector<int64_t> flops(schedule.devices.size(), 0);
  int64_t most = 0;
  for (size_t d = 0; d < schedule.devices.size(); ++d) {
    if (!llvm::StringRef(schedule.devices[d]).startswith("cpu"))
      continue;
    for (const Node *n : schedule.order[d])
      flops[d] += nodeCost(*n).flops;
    most = std::max(most, flops[d]);
  }
  unsigned computing = 0;
  for (size_t d = 0; d < schedule.devices.size(); ++d)
    computing += llvm::StringRef(schedule.devices[d]).startswith("cpu") && 10 * flops[d] >= most;
  cores = std::make_unique<CoreBudget>(total);
  cpuCollectives = std::make_unique<CpuCollectives>(opts.waitTimeout);
  for (const std::string &name : schedule.devices) {
    auto d = std::make_unique<DeviceState>();
    DeviceRequest req;
    req.name = name;
    req.threads = std::max(1, total / (int)std::max(1u, computing));
    req.cores = cores.get();
    req.waitTimeout = opts.waitTimeout;
    if (opts.physicalGpu && llvm::StringRef(name).startswith("gpu:"))
      req.physicalOrdinal = opts.physicalGpu(name);
    auto dev = createDevice(req);
    if (!dev)
      return dev.takeError();
    d->device = std::move(*dev);
    for (const std::string &stream : d->device->traceStreams())
      d->tracks.push_back(trace.addTrack(name, stream));
    d->computeTrack = d->tracks[0];
    d->copyTrack = d->tracks.size() > 1 ? d->tracks[1] : d->tracks[0];
    devices.push_back(std::move(d));
  }
  return llvm::Error::success();
}

llvm::Error Executor::Impl::createKernels() {
  for (auto &e : nodes) {
    const Node *n = e->node;
    DeviceState &d = *devices[e->device];
    switch (n->op()) {
    case Op::Input:
      e->action = Action::Feed;
      e->kind = EventKind::Input;
      continue;
    case Op::Variable:
    case Op::Constant:
      e->action = Action::Alias;
      continue;
    case Op::AllReduce:
      e->action = Action::Collective;
      e->kind = EventKind::Collective;
      continue;
    case Op::Transfer:
      e->action = Action::Transfer;
      e->kind = EventKind::Copy;
      continue;
    default:
      break;
    }
    KernelEnv env = d.device->kernelEnv();
    env.seed = opts.seed;
    auto k = KernelRegistry::global().create(*n, env);
    if (!k)
      return withContext(k.takeError(), "on device " + d.device->name());
    e->kernel = std::move(*k);
  }
  assignLayouts();
  auto layoutOf = [&](const Value *v) { return layouts.lookup(v); };
  for (auto &e : nodes) {
    if (!e->kernel)
      continue;
    llvm::SmallVector<Layout, 4> in, out;
    for (const Value *v : e->node->operands())
      in.push_back(layoutOf(v));
    for (auto &r : e->node->results())
      out.push_back(layoutOf(r.get()));
    if (auto err = e->kernel->prepare(in, out))
      return err;
  }
  return llvm::Error::success();
}

/// Whether `v` may be kept blocked as far as it alone is concerned: a 4-d f32
/// tensor with whole channel blocks, made and read only by kernels on one
/// device that take it blocked, and not a graph output.
bool Executor::Impl::blockable(const Value *v) const {
  const TensorType &t = v->type();
  if (t.dtype != DType::F32 || t.rank() != 4 || t.shape[1] % 16 != 0 || t.numElements() == 0)
    return false;
  const NodeExec &p = *nodes[index.lookup(v->producer())];
  if (!p.kernel || p.action != Action::Kernel ||
      !p.kernel->producesLayout(v->resultIndex(), Layout::Blocked16))
    return false;
  if (llvm::is_contained(graph->outputs(), v))
    return false;
  for (const Node *u : v->users()) {
    const NodeExec &c = *nodes[index.lookup(u)];
    if (!c.kernel || c.action != Action::Kernel || c.device != p.device)
      return false;
    for (unsigned i = 0; i < u->numOperands(); ++i)
      if (u->operand(i) == v && !c.kernel->acceptsLayout(i, Layout::Blocked16))
        return false;
  }
  return true;
}

void Executor::Impl::assignLayouts() {
  if (!opts.blockedLayouts)
    return;
  // Layout-following kernels tie their operands and results into one group;
  // a group is blocked only if every member can be.
  llvm::DenseMap<const Value *, const Value *> parent;
  std::function<const Value *(const Value *)> find = [&](const Value *v) -> const Value * {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v)
      return v;
    return parent[v] = find(it->second);
  };
  for (auto &e : nodes) {
    if (!e->kernel || !e->kernel->layoutFollowsOperands())
      continue;
    llvm::SmallVector<const Value *, 6> members(e->node->operands().begin(),
                                                e->node->operands().end());
    for (auto &r : e->node->results())
      members.push_back(r.get());
    for (const Value *m : members)
      parent[find(m)] = find(members[0]);
  }
  llvm::DenseMap<const Value *, bool> groupOk;
  std::vector<const Value *> all;
  for (auto &e : nodes)
    for (auto &r : e->node->results()) {
      all.push_back(r.get());
      const Value *root = find(r.get());
      auto [it, fresh] = groupOk.try_emplace(root, true);
      it->second = it->second && blockable(r.get());
    }
  // Operands tied in by a follower but made elsewhere (inputs, variables) are
  // results too, so every member was seen above.
  for (const Value *v : all)
    if (groupOk.lookup(find(v)))
      layouts[v] = Layout::Blocked16;
}

llvm::Error Executor::Impl::planMemory() {
  for (unsigned i = 0; i < devices.size(); ++i) {
    DeviceState &d = *devices[i];
    d.plan = planDeviceMemory(schedule, i, [&](const Node &n) -> std::optional<unsigned> {
      const NodeExec &e = *nodes[index.lookup(&n)];
      return e.kernel ? e.kernel->inPlaceOperand() : std::nullopt;
    });
    auto arena = d.device->allocate(d.plan.plan.arenaBytes);
    if (!arena)
      return withContext(arena.takeError(), "the arena of " + d.device->name());
    d.arena = *arena;
    int64_t scratch = 0;
    for (unsigned n : d.order)
      if (nodes[n]->kernel)
        scratch = std::max<int64_t>(scratch, nodes[n]->kernel->scratchBytes());
    auto s = d.device->allocate(scratch);
    if (!s)
      return s.takeError();
    d.scratch = *s;
  }
  return llvm::Error::success();
}

llvm::Error Executor::Impl::bindVariables() {
  // Storage on every device that reads or writes the variable.
  for (auto &e : nodes) {
    const Node *n = e->node;
    DeviceState &d = *devices[e->device];
    if (n->op() == Op::Constant) {
      const Tensor &value = *n->attrs().getTensor("value");
      auto p = d.device->allocate(value.bytes());
      if (!p)
        return p.takeError();
      if (auto err = d.device->copyIn(*p, value.raw(), value.bytes()))
        return err;
      d.constants[n] = *p;
      continue;
    }
    if (n->op() != Op::Variable && !isVariableUpdate(n->op()))
      continue;
    std::vector<std::string> names{n->attrs().getString("var")};
    for (const std::string &slot : n->attrs().getStrings("slots"))
      names.push_back(slot);
    for (const std::string &name : names) {
      if (d.variables.storage.count(name))
        continue;
      const Variable *v = module->findVariable(name);
      if (!v)
        return nodeError(*n, "uses unknown variable '" + name + "'");
      auto value = initialValue(*v, opts.seed);
      if (!value)
        return value.takeError();
      auto p = d.device->allocate(value->bytes());
      if (!p)
        return withContext(p.takeError(), "variable '" + name + "'");
      if (auto err = d.device->copyIn(*p, value->raw(), value->bytes()))
        return err;
      d.variables.storage[name] = {*p, v->type};
    }
  }
  return llvm::Error::success();
}

llvm::Error Executor::Impl::bindCollectives() {
  // All members of a group must be on host devices (the project's own
  // reduction) or all on GPUs (the CUDA backend's engine).
  std::map<std::string, std::vector<unsigned>> groups;
  std::map<std::string, std::vector<Device *>> gpuGroups; // devices by rank
  for (unsigned i = 0; i < nodes.size(); ++i)
    if (nodes[i]->action == Action::Collective)
      groups[nodes[i]->node->attrs().getString("group")].push_back(i);
  for (auto &[name, members] : groups) {
    bool anyGpu = false, anyCpu = false;
    for (unsigned m : members)
      (devices[nodes[m]->device]->device->kind() == DeviceKind::CPU ? anyCpu : anyGpu) = true;
    if (anyGpu && anyCpu)
      return nodeError(*nodes[members[0]]->node,
                       "collective '" + name + "' spans host and GPU devices; insert transfers "
                       "so that all members are on one kind");
    if (anyGpu) {
      std::vector<Device *> &byRank = gpuGroups[name];
      for (unsigned m : members) {
        const Node &n = *nodes[m]->node;
        int64_t rank = n.attrs().getInt("rank"), nranks = n.attrs().getInt("nranks");
        Device *dev = devices[nodes[m]->device]->device.get();
        if (byRank.empty())
          byRank.assign(nranks, nullptr);
        if (rank < 0 || rank >= (int64_t)byRank.size() || (byRank[rank] && byRank[rank] != dev))
          return nodeError(n, "collective '" + name + "': rank " + llvm::Twine(rank) + " of " +
                                  llvm::Twine(nranks) + " is on " + dev->name() +
                                  (rank >= 0 && rank < (int64_t)byRank.size() && byRank[rank]
                                       ? " and on " + byRank[rank]->name()
                                       : std::string()));
        byRank[rank] = dev;
      }
      for (size_t r = 0; r < byRank.size(); ++r)
        if (!byRank[r])
          return nodeError(*nodes[members[0]]->node, "collective '" + name + "' has no node for rank " +
                                                         llvm::Twine(r));
      continue;
    }
    for (unsigned m : members)
      nodes[m]->collectives = cpuCollectives.get();
  }
  if (gpuGroups.empty())
    return llvm::Error::success();
#if GRAPHC_HAVE_CUDA
  auto engine = createCudaCollectives(opts.waitTimeout, gpuGroups);
  if (!engine)
    return engine.takeError();
  for (auto &[name, members] : groups)
    if (gpuGroups.count(name))
      for (unsigned m : members)
        nodes[m]->collectives = engine->get();
  otherCollectives.push_back(std::move(*engine));
  return llvm::Error::success();
#else
  return makeError("collective '" + gpuGroups.begin()->first +
                   "' runs on GPUs, which need the CUDA backend (not built)");
#endif
}

void Executor::Impl::bindCapture() {
  std::vector<DeviceKind> kinds;
  std::vector<Device *> devs;
  for (auto &d : devices) {
    kinds.push_back(d->device->kind());
    devs.push_back(d->device.get());
  }
  std::string why = stepCaptureRefusal(*graph, kinds, opts.profile, opts.checkNumerics);
#if GRAPHC_HAVE_CUDA
  if (why.empty()) {
    capture = createCudaStepCapture(devs, opts.waitTimeout);
    if (!capture)
      why = "the devices are not CUDA devices of this process";
  }
#endif
  graphNote = why.empty() ? "the second step is captured as a CUDA graph and replayed after"
                          : "CUDA graphs not used: " + why;
}

TensorView Executor::Impl::viewOf(const Value *v) {
  TensorView view;
  view.dtype = v->type().dtype;
  view.shape = v->type().shape;
  view.layout = layouts.lookup(v);
  // A value is read where it lives; transfers copy between devices.
  DeviceState &owner = *devices[schedule.deviceOf.lookup(v->producer())];
  auto off = owner.plan.offset.find(v);
  if (off != owner.plan.offset.end()) {
    view.data = static_cast<unsigned char *>(owner.arena) + off->second;
    return view;
  }
  const Value *root = owner.plan.external.lookup(v);
  assert(root && "every value is either in an arena or aliases external storage");
  const Node *src = root->producer();
  if (src->op() == Op::Constant) {
    view.data = owner.constants.lookup(src);
  } else {
    view.data = owner.variables.storage[src->attrs().getString("var")].data;
  }
  return view;
}

llvm::Error Executor::Impl::runNode(NodeExec &e, DeviceState &d) {
  Device &dev = *d.device;
  switch (e.action) {
  case Action::Feed:
  case Action::Alias:
    return llvm::Error::success();
  case Action::Transfer: {
    const Node *src = e.node->operand(0)->producer();
    Device &from = *devices[schedule.deviceOf.lookup(src)]->device;
    dev.noteNode(index.lookup(e.node), EventKind::Copy);
    return dev.receive(e.outputs[0].data, from, e.inputs[0].data, e.outputs[0].bytes());
  }
  case Action::Collective: {
    const Attrs &a = e.node->attrs();
    unsigned node = index.lookup(e.node);
    dev.noteNode(node, EventKind::Collective);
    // A CPU collective runs on this thread, not through a launch: time it here.
    bool timed = opts.profile && dev.kind() == DeviceKind::CPU;
    double start = timed ? trace.nowUs() : 0;
    llvm::Error err = e.collectives->allReduce(
        a.getString("group"), (unsigned)a.getInt("rank"), (unsigned)a.getInt("nranks"), e.inputs,
        e.outputs, "node '" + e.node->name() + "' on " + dev.name(), dev);
    if (timed && !err)
      d.hostTimings.push_back({node, EventKind::Collective, start, trace.nowUs() - start});
    return err;
  }
  case Action::Kernel:
    break;
  }
  KernelContext ctx;
  ctx.inputs = e.inputs;
  ctx.outputs = e.outputs;
  ctx.scratch = d.scratch;
  ctx.step = step;
  ctx.variables = &d.variables;
  dev.noteNode(index.lookup(e.node), e.kind);
  return dev.launch(*e.kernel, ctx);
}

llvm::Error Executor::Impl::checkNumerics(NodeExec &e, DeviceState &d) {
  if (auto err = d.device->synchronize())
    return err;
  for (unsigned r = 0; r < e.outputs.size(); ++r) {
    Tensor host(e.node->result(r)->type());
    if (auto err = d.device->copyOut(host.raw(), e.outputs[r].data, host.bytes()))
      return err;
    if (!allFinite(host))
      return nodeError(*e.node, "produced a non-finite value (NaN or infinity) in result '" +
                                    e.node->result(r)->name() + "' at step " + llvm::Twine(step) +
                                    " (the first such node on " + d.device->name() +
                                    "; --check-numerics)");
  }
  return llvm::Error::success();
}

llvm::Error Executor::Impl::runDevice(DeviceState &d) {
  for (unsigned i : d.order) {
    NodeExec &e = *nodes[i];
    for (unsigned p : e.remotePreds) {
      NodeExec &pred = *nodes[p];
      if (pred.issuedEpoch.load(std::memory_order_acquire) != epoch) {
        std::unique_lock<std::mutex> lock(d.mutex);
        bool ok = d.cv.wait_for(lock, opts.waitTimeout, [&] {
          return aborted.load() || pred.issuedEpoch.load(std::memory_order_acquire) == epoch;
        });
        if (aborted.load())
          return makeError("stopped because another device failed");
        if (!ok)
          return nodeError(*e.node, "on " + d.device->name() + " waited " +
                                        llvm::Twine((int64_t)opts.waitTimeout.count()) +
                                        " ms for node '" + pred.node->name() + "' on " +
                                        devices[pred.device]->device->name() + " at step " +
                                        llvm::Twine(step));
      }
      double waitStart = opts.profile ? trace.nowUs() : 0;
      if (auto err = d.device->wait(*pred.event))
        return err;
      if (opts.profile) {
        double waited = trace.nowUs() - waitStart;
        if (waited > 1)
          trace.record(d.computeTrack,
                       {pred.node->name(), "wait", EventKind::Wait, step, waitStart, waited});
      }
    }
    if (aborted.load())
      return makeError("stopped because another device failed");
    if (auto err = runNode(e, d))
      return err;
    if (opts.checkNumerics && e.action == Action::Kernel)
      if (auto err = checkNumerics(e, d))
        return err;
    if (!e.remoteWaiters.empty())
      e.event = d.device->record();
    e.issuedEpoch.store(epoch, std::memory_order_release);
    for (unsigned w : e.remoteWaiters) {
      std::lock_guard<std::mutex> lock(devices[w]->mutex);
      devices[w]->cv.notify_all();
    }
  }
  if (auto err = d.device->synchronize())
    return err;
  if (opts.profile) {
    std::vector<LaunchTiming> timings = d.device->takeTimings();
    llvm::append_range(timings, d.hostTimings);
    d.hostTimings.clear();
    for (const LaunchTiming &t : timings) {
      NodeExec &e = *nodes[t.node];
      e.seconds += t.durationUs * 1e-6;
      ++e.runs;
      unsigned track = t.stream >= 0 && (size_t)t.stream < d.tracks.size()
                           ? d.tracks[t.stream]
                           : (t.kind == EventKind::Copy ? d.copyTrack : d.computeTrack);
      trace.record(track,
                   {e.node->name(), opName(e.node->op()).str(), t.kind, step, t.startUs,
                    t.durationUs});
    }
  }
  return llvm::Error::success();
}

void Executor::Impl::abortAll() {
  aborted.store(true);
  cpuCollectives->abort();
  for (auto &c : otherCollectives)
    c->abort();
  for (auto &other : devices) {
    std::lock_guard<std::mutex> lock(other->mutex);
    other->cv.notify_all();
  }
}

void Executor::Impl::workerLoop(DeviceState &d) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(d.mutex);
      d.cv.wait(lock, [&] { return shuttingDown || d.startEpoch != seen; });
      if (shuttingDown)
        return;
      seen = d.startEpoch;
    }
    llvm::Error err = runDevice(d);
    if (err)
      abortAll();
    std::lock_guard<std::mutex> lock(doneMutex);
    d.error = std::move(err);
    ++devicesDone;
    doneCv.notify_all();
  }
}

Executor::Impl::~Impl() {
  // The prefetch helpers write into device buffers: let them finish first.
  for (Prefetched &p : prefetched)
    if (p.done.valid())
      p.done.wait();
  capture.reset();
  for (auto &d : devices) {
    std::lock_guard<std::mutex> lock(d->mutex);
    shuttingDown = true;
    d->cv.notify_all();
  }
  for (auto &d : devices) {
    if (d->worker.joinable())
      d->worker.join();
    llvm::consumeError(std::move(d->error));
    if (!d->device)
      continue;
    llvm::consumeError(d->device->synchronize());
    for (auto &entry : d->variables.storage)
      d->device->deallocate(entry.second.data);
    for (auto &entry : d->constants)
      d->device->deallocate(entry.second);
    if (d->arena)
      d->device->deallocate(d->arena);
    if (d->scratch)
      d->device->deallocate(d->scratch);
  }
  for (auto &[node, slots] : staging)
    for (void *p : slots)
      if (p)
        devices[nodes[node]->device]->device->deallocate(p);
}

//===-- Executor -----------------------------------------------------------===//

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

llvm::Expected<std::unique_ptr<Executor>> Executor::create(const Module &m, ExecutorOptions opts) {
  auto impl = std::make_unique<Impl>();
  impl->module = &m;
  impl->opts = std::move(opts);
  if (auto e = impl->bind())
    return e;
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

llvm::Error Executor::Impl::checkFeeds(const llvm::StringMap<Tensor> &feeds) const {
  for (const auto &entry : feeds)
    if (!graph->findInput(entry.getKey()))
      return makeError("fed '" + entry.getKey() + "', which is not an input of the graph");
  for (auto &e : nodes) {
    if (e->action != Action::Feed)
      continue;
    auto it = feeds.find(e->node->name());
    if (it == feeds.end())
      return makeError("graph input '" + e->node->name() + "' (" +
                       toString(e->node->result()->type()) + ") was not fed");
    if (it->second.type() != e->node->result()->type())
      return makeError("graph input '" + e->node->name() + "' expects " +
                       toString(e->node->result()->type()) + ", was fed " +
                       toString(it->second.type()));
  }
  return llvm::Error::success();
}

llvm::Error Executor::Impl::consumePrefetched(uint64_t stepNumber) {
  Prefetched p = std::move(prefetched.front());
  prefetched.pop_front();
  std::string failed = p.done.get();
  if (!failed.empty())
    return makeError("prefetching the inputs of step " + llvm::Twine(stepNumber) + ": " + failed);
  for (unsigned i : p.host) {
    NodeExec &e = *nodes[i];
    const Tensor &t = p.tensors->find(e.node->name())->second;
    if (auto err = devices[e.device]->device->copyIn(e.outputs[0].data, t.raw(), t.bytes()))
      return err;
  }
  // Each GPU moves its inputs into their step buffers after the copies (a
  // device copy on its compute stream, ordered by the copy's event).
  for (size_t i = 0; i < p.staged.size(); ++i) {
    NodeExec &e = *nodes[p.staged[i]];
    Device &dev = *devices[e.device]->device;
    if (auto err = dev.wait(*(*p.events)[i]))
      return err;
    dev.noteNode(p.staged[i], EventKind::Input);
    if (auto err = dev.receive(e.outputs[0].data, dev, staging[p.staged[i]][p.slot],
                               e.outputs[0].bytes()))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error Executor::Impl::runDevices() {
  ++epoch;
  aborted.store(false);
  cpuCollectives->reset();
  for (auto &c : otherCollectives)
    c->reset();
  if (devices.size() == 1)
    return runDevice(*devices[0]);
  {
    std::lock_guard<std::mutex> lock(doneMutex);
    devicesDone = 0;
  }
  for (auto &d : devices) {
    std::lock_guard<std::mutex> lock(d->mutex);
    d->startEpoch = epoch;
    d->cv.notify_all();
  }
  std::unique_lock<std::mutex> lock(doneMutex);
  doneCv.wait(lock, [&] { return devicesDone == devices.size(); });
  // Report the root cause, not the devices that stopped because of it.
  std::string primary, secondary;
  for (auto &d : devices) {
    if (!d->error)
      continue;
    std::string msg = llvm::toString(std::move(d->error));
    d->error = llvm::Error::success();
    std::string &slot =
        llvm::StringRef(msg).contains("another device failed") ? secondary : primary;
    if (slot.empty())
      slot = msg;
  }
  if (!primary.empty() || !secondary.empty())
    return makeError(primary.empty() ? secondary : primary);
  return llvm::Error::success();
}

llvm::Expected<std::vector<Tensor>> Executor::run(const llvm::StringMap<Tensor> &feeds) {
  Impl &im = *impl_;
  double stepStart = im.trace.nowUs();
  im.step = step_;
  if (feeds.empty() && !im.prefetched.empty()) {
    if (auto err = im.consumePrefetched(step_))
      return err;
  } else {
    if (!im.prefetched.empty())
      return makeError("run() was given feeds while " + llvm::Twine(im.prefetched.size()) +
                       " prefetched step(s) wait; run them with run({}) first");
    if (auto err = im.checkFeeds(feeds))
      return err;
    for (auto &e : im.nodes) {
      if (e->action != Action::Feed)
        continue;
      const Tensor &t = feeds.find(e->node->name())->second;
      Device &dev = *im.devices[e->device]->device;
      double start = im.trace.nowUs();
      if (auto err = dev.copyIn(e->outputs[0].data, t.raw(), t.bytes()))
        return err;
      if (im.opts.profile)
        im.trace.record(im.devices[e->device]->copyTrack,
                        {e->node->name(), "Input", EventKind::Input, step_, start,
                         im.trace.nowUs() - start});
    }
  }
  llvm::Error failure = llvm::Error::success();
  if (im.capture && im.capture->ready()) {
    for (auto &c : im.otherCollectives)
      c->reset();
    failure = im.capture->replay();
  } else if (im.capture && im.stepsRun == 1) {
    // Capture the second step; a failed capture runs the step eagerly.
    llvm::Error e = im.capture->begin();
    if (!e)
      e = im.runDevices();
    if (!e)
      e = im.capture->finish();
    if (e) {
      im.capture->abandon();
      im.capture.reset();
      im.graphNote = "CUDA graphs not used: capturing step " + std::to_string(step_) +
                     " failed: " + llvm::toString(std::move(e));
      failure = im.runDevices();
    } else {
      im.graphNote = "step " + std::to_string(step_) +
                     " was captured as a CUDA graph; later steps replay it";
      failure = im.capture->replay();
    }
  } else {
    failure = im.runDevices();
  }
  if (failure)
    return failure;
  ++im.stepsRun;
  std::vector<Tensor> out;
  for (const Value *v : im.outputs) {
    Tensor t(v->type());
    Device &owner = *im.devices[im.schedule.deviceOf.lookup(v->producer())]->device;
    if (auto err = owner.copyOut(t.raw(), im.viewOf(v).data, t.bytes()))
      return err;
    out.push_back(std::move(t));
  }
  if (im.opts.profile)
    im.trace.recordStep(step_, stepStart, im.trace.nowUs() - stepStart);
  ++step_;
  return out;
}

llvm::Error Executor::prefetch(llvm::StringMap<Tensor> feeds) {
  Impl &im = *impl_;
  if (im.prefetched.size() >= 2)
    return makeError("two steps' inputs are already prefetched; run a step first");
  if (auto err = im.checkFeeds(feeds))
    return err;
  Impl::Prefetched p;
  p.slot = im.prefetchCount % 2;
  p.tensors = std::make_shared<const llvm::StringMap<Tensor>>(std::move(feeds));
  struct Copy {
    Device *device;
    void *dst;
    const Tensor *tensor;
  };
  std::vector<Copy> copies;
  for (unsigned i = 0; i < im.nodes.size(); ++i) {
    NodeExec &e = *im.nodes[i];
    if (e.action != Action::Feed)
      continue;
    Device &dev = *im.devices[e.device]->device;
    if (dev.kind() == DeviceKind::CPU) {
      p.host.push_back(i);
      continue;
    }
    void *&buffer = im.staging[i][p.slot];
    if (!buffer) {
      auto b = dev.allocate(e.outputs[0].bytes());
      if (!b)
        return withContext(b.takeError(), "prefetch buffer of input '" + e.node->name() + "'");
      buffer = *b;
    }
    p.staged.push_back(i);
    copies.push_back({&dev, buffer, &p.tensors->find(e.node->name())->second});
  }
  p.events = std::make_shared<std::vector<std::shared_ptr<DeviceEvent>>>();
  auto events = p.events;
  auto tensors = p.tensors; // keeps the copies' sources alive
  p.done = std::async(std::launch::async,
                      [copies = std::move(copies), events, tensors]() -> std::string {
                        for (const Copy &c : copies) {
                          auto ev = c.device->copyInAsync(c.dst, c.tensor->raw(),
                                                          c.tensor->bytes());
                          if (!ev)
                            return llvm::toString(ev.takeError());
                          events->push_back(std::move(*ev));
                        }
                        return std::string();
                      });
  ++im.prefetchCount;
  im.prefetched.push_back(std::move(p));
  return llvm::Error::success();
}

const std::string &Executor::cudaGraphNote() const { return impl_->graphNote; }

llvm::Expected<Tensor> Executor::readVariable(llvm::StringRef name) const {
  for (auto &d : impl_->devices) {
    auto it = d->variables.storage.find(name);
    if (it == d->variables.storage.end())
      continue;
    Tensor t(it->second.type);
    if (auto e = d->device->copyOut(t.raw(), it->second.data, t.bytes()))
      return e;
    return t;
  }
  return makeError("no variable '" + name + "' is held by any device");
}

llvm::Error Executor::writeVariable(llvm::StringRef name, const Tensor &value) {
  bool found = false;
  for (auto &d : impl_->devices) {
    auto it = d->variables.storage.find(name);
    if (it == d->variables.storage.end())
      continue;
    if (it->second.type != value.type())
      return makeError("variable '" + name + "' is " + toString(it->second.type) + ", given " +
                       toString(value.type()));
    if (auto e = d->device->copyIn(it->second.data, value.raw(), value.bytes()))
      return e;
    found = true;
  }
  if (!found)
    return makeError("no variable '" + name + "' is held by any device");
  return llvm::Error::success();
}

std::vector<std::string> Executor::variableNames() const {
  std::vector<std::string> names;
  for (const Variable &v : impl_->module->variables())
    for (auto &d : impl_->devices)
      if (d->variables.storage.count(v.name)) {
        names.push_back(v.name);
        break;
      }
  return names;
}

const std::vector<std::string> &Executor::devices() const { return impl_->schedule.devices; }

std::vector<std::string> Executor::deviceDescriptions() const {
  std::vector<std::string> out;
  for (auto &d : impl_->devices)
    out.push_back(d->device->name() + " (" + d->device->describe() + ")");
  return out;
}

std::vector<DeviceMemory> Executor::memory() const {
  std::vector<DeviceMemory> out;
  for (auto &d : impl_->devices) {
    DeviceMemory m;
    m.device = d->device->name();
    m.arenaBytes = d->plan.plan.arenaBytes;
    m.peakLiveBytes = d->plan.plan.peakLiveBytes;
    m.naiveBytes = d->plan.plan.naiveBytes;
    for (auto &entry : d->variables.storage)
      m.variableBytes += entry.second.type.bytes();
    out.push_back(m);
  }
  return out;
}

std::vector<NodeProfile> Executor::profile() const {
  std::vector<NodeProfile> out;
  for (auto &e : impl_->nodes)
    if (e->runs)
      out.push_back({e->node, impl_->devices[e->device]->device->name(), e->seconds, e->runs});
  return out;
}

const TraceRecorder &Executor::trace() const { return impl_->trace; }

} // namespace graphc
