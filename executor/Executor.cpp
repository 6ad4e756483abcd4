#include "executor/Executor.h"

#include "executor/Collectives.h"
#include "executor/CoreBudget.h"
#include "executor/MemoryPlan.h"
#include "executor/Schedule.h"
#include "ir/Diagnostics.h"
#include "ir/Initializers.h"
#include "kernels/cpu/CpuBackend.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace graphc {

namespace {

/// How a node is carried out.
enum class Action : unsigned char {
  Kernel,    ///< run its kernel
  Feed,      ///< an Input: the step copies the feed in
  Alias,     ///< a Variable, Constant or view whose bytes already sit where its result is
  Collective ///< an AllReduce: rendezvous through CpuCollectives
};

struct NodeExec {
  const Node *node = nullptr;
  unsigned device = 0;
  Action action = Action::Kernel;
  std::unique_ptr<Kernel> kernel;
  std::vector<TensorView> inputs, outputs;
  /// Nodes on other devices that must finish first.
  llvm::SmallVector<unsigned, 4> remotePreds;
  /// Devices to wake when this node finishes.
  llvm::SmallVector<unsigned, 2> remoteWaiters;
  std::atomic<uint64_t> doneEpoch{0};
  EventKind kind = EventKind::Compute;
  double seconds = 0;
  int64_t runs = 0;
};

struct AlignedBuffer {
  std::unique_ptr<unsigned char, void (*)(void *)> bytes{nullptr, std::free};
  int64_t size = 0;
  void allocate(int64_t n) {
    size = n;
    size_t rounded = ((size_t)std::max<int64_t>(n, 1) + 63) / 64 * 64;
    bytes.reset(static_cast<unsigned char *>(std::aligned_alloc(64, rounded)));
    if (!bytes)
      llvm::report_bad_alloc_error("arena allocation failed");
    std::memset(bytes.get(), 0, rounded);
  }
};

class DeviceVariables : public VariableAccess {
public:
  llvm::StringMap<Tensor> storage;
  llvm::Expected<TensorView> variable(llvm::StringRef name) override {
    auto it = storage.find(name);
    if (it == storage.end())
      return makeError("variable '" + name + "' is not held on this device");
    TensorView v;
    v.data = it->second.raw();
    v.dtype = it->second.dtype();
    v.shape.assign(it->second.shape().begin(), it->second.shape().end());
    return v;
  }
};

struct DeviceState {
  std::string name;
  DeviceKind kind = DeviceKind::CPU;
  int threads = 1;
  std::vector<unsigned> order; ///< NodeExec indices in issue order
  AlignedBuffer arena;
  AlignedBuffer scratch; ///< the largest scratch any of its kernels asks for
  DeviceMemoryPlan plan;
  DeviceVariables variables;
  std::unique_ptr<dnnl::stream> stream;
  unsigned computeTrack = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::thread worker;
  uint64_t startEpoch = 0; ///< the worker runs a step when this advances
  llvm::Error error = llvm::Error::success();
};

bool isFiniteView(const TensorView &v) {
  if (v.dtype != DType::F32)
    return true;
  const float *p = v.as<float>();
  for (int64_t i = 0, n = v.numElements(); i < n; ++i)
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
  std::unique_ptr<CpuCollectives> collectives;
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

  llvm::Error bind();
  llvm::Error bindVariables();
  TensorView viewOf(const Value *v, DeviceState &d);
  llvm::Error runDevice(DeviceState &d);
  llvm::Error runNode(NodeExec &e, DeviceState &d);
  void workerLoop(DeviceState &d);
  ~Impl();
};

static std::string defaultDevice(const std::string &assigned) {
  return assigned.empty() ? "cpu:0" : assigned;
}

llvm::Error Executor::Impl::bind() {
  graph = module->findGraph("main");
  if (!graph)
    return makeError("module '" + module->name() + "' has no main graph");
  auto map = [&](const Node &n) {
    std::string d = defaultDevice(n.assignedDevice());
    return opts.deviceMap ? opts.deviceMap(d) : d;
  };
  auto s = buildSchedule(*graph, map);
  if (!s)
    return s.takeError();
  schedule = std::move(*s);

  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  int total = opts.threads > 0 ? opts.threads : (int)hardware;
  unsigned cpuDevices = 0;
  for (const std::string &name : schedule.devices) {
    auto d = std::make_unique<DeviceState>();
    d->name = name;
    if (llvm::StringRef(name).startswith("gpu"))
      return makeError("the plan needs device '" + name +
                       "', which this build cannot run (no CUDA backend loaded); visible "
                       "devices: cpu. Run with --emulate to map it onto a CPU device");
    if (!llvm::StringRef(name).startswith("cpu"))
      return makeError("unknown device '" + name + "' (expected cpu:N or gpu:N)");
    ++cpuDevices;
    d->stream = std::make_unique<dnnl::stream>(CpuBackend::instance().engine());
    d->computeTrack = trace.addTrack(name, "compute");
    devices.push_back(std::move(d));
  }
  for (auto &d : devices)
    d->threads = std::max(1, total / (int)std::max(1u, cpuDevices));
  cores = std::make_unique<CoreBudget>(total);
  collectives = std::make_unique<CpuCollectives>(opts.waitTimeout);

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

  // Kernels.
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
    default:
      break;
    }
    if (n->op() == Op::Transfer)
      e->kind = EventKind::Copy;
    KernelEnv env;
    env.kind = d.kind;
    env.threads = d.threads;
    env.seed = opts.seed;
    env.backend = &CpuBackend::instance();
    auto k = KernelRegistry::global().create(*n, env);
    if (!k)
      return withContext(k.takeError(), "on device " + d.name);
    // Every value is plain (row-major) for now; blocked layouts are chosen here
    // once the kernels that can keep them are in place.
    llvm::SmallVector<Layout, 4> in(n->numOperands(), Layout::Plain),
        out(n->numResults(), Layout::Plain);
    if (auto err = (*k)->prepare(in, out))
      return err;
    e->kernel = std::move(*k);
  }

  // Memory plans and arenas.
  for (unsigned i = 0; i < devices.size(); ++i) {
    DeviceState &d = *devices[i];
    d.plan = planDeviceMemory(schedule, i, [&](const Node &n) -> std::optional<unsigned> {
      const NodeExec &e = *nodes[index.lookup(&n)];
      return e.kernel ? e.kernel->inPlaceOperand() : std::nullopt;
    });
    d.arena.allocate(d.plan.plan.arenaBytes);
    int64_t scratch = 0;
    for (unsigned n : d.order)
      if (nodes[n]->kernel)
        scratch = std::max<int64_t>(scratch, nodes[n]->kernel->scratchBytes());
    d.scratch.allocate(scratch);
  }
  if (auto e = bindVariables())
    return e;

  // Views, aliases and dependencies.
  for (auto &e : nodes) {
    const Node *n = e->node;
    DeviceState &d = *devices[e->device];
    for (const Value *v : n->operands())
      e->inputs.push_back(viewOf(v, d));
    for (auto &r : n->results())
      e->outputs.push_back(viewOf(r.get(), d));
    if (isViewOp(n->op()) && e->outputs[0].data == e->inputs[0].data)
      e->action = Action::Alias;
    llvm::SmallVector<unsigned, 8> preds;
    for (const Node *p : schedule.predecessors(n)) {
      unsigned pi = index.lookup(p);
      if (nodes[pi]->device != e->device && !llvm::is_contained(e->remotePreds, pi)) {
        e->remotePreds.push_back(pi);
        if (!llvm::is_contained(nodes[pi]->remoteWaiters, e->device))
          nodes[pi]->remoteWaiters.push_back(e->device);
      }
    }
  }
  for (const Value *v : graph->outputs())
    outputs.push_back(v);

  // Workers for several devices; one device runs on the calling thread.
  if (devices.size() > 1)
    for (auto &d : devices)
      d->worker = std::thread([this, dev = d.get()] { workerLoop(*dev); });
  return llvm::Error::success();
}

llvm::Error Executor::Impl::bindVariables() {
  // Storage on every device that reads or writes the variable.
  for (auto &e : nodes) {
    const Node *n = e->node;
    if (n->op() != Op::Variable && !isVariableUpdate(n->op()))
      continue;
    DeviceState &d = *devices[e->device];
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
      d.variables.storage[name] = value->clone();
    }
  }
  return llvm::Error::success();
}

TensorView Executor::Impl::viewOf(const Value *v, DeviceState &d) {
  TensorView view;
  view.dtype = v->type().dtype;
  view.shape = v->type().shape;
  // A value produced on another device is read where it lives (host memory).
  DeviceState &owner = *devices[schedule.deviceOf.lookup(v->producer())];
  auto off = owner.plan.offset.find(v);
  if (off != owner.plan.offset.end()) {
    view.data = owner.arena.bytes.get() + off->second;
    return view;
  }
  const Value *root = owner.plan.external.lookup(v);
  assert(root && "every value is either in an arena or aliases external storage");
  const Node *src = root->producer();
  if (src->op() == Op::Constant) {
    view.data = const_cast<void *>(src->attrs().getTensor("value")->raw());
  } else {
    Tensor &t = owner.variables.storage[src->attrs().getString("var")];
    view.data = t.raw();
  }
  (void)d;
  return view;
}

llvm::Error Executor::Impl::runNode(NodeExec &e, DeviceState &d) {
  switch (e.action) {
  case Action::Feed:
  case Action::Alias:
    return llvm::Error::success();
  case Action::Collective: {
    const Attrs &a = e.node->attrs();
    return collectives->allReduce(a.getString("group"), (unsigned)a.getInt("rank"),
                                  (unsigned)a.getInt("nranks"), e.inputs, e.outputs,
                                  "node '" + e.node->name() + "' on " + d.name);
  }
  case Action::Kernel:
    break;
  }
  KernelContext ctx;
  ctx.inputs = e.inputs;
  ctx.outputs = e.outputs;
  ctx.scratch = d.scratch.bytes.get();
  ctx.step = step;
  ctx.variables = &d.variables;
  ctx.stream = d.stream.get();
  CoreBudget::Lease lease(*cores, d.threads);
  setCpuThreads(d.threads);
  if (auto err = e.kernel->run(ctx))
    return err;
  d.stream->wait();
  return llvm::Error::success();
}

llvm::Error Executor::Impl::runDevice(DeviceState &d) {
  for (unsigned i : d.order) {
    NodeExec &e = *nodes[i];
    for (unsigned p : e.remotePreds) {
      NodeExec &pred = *nodes[p];
      if (pred.doneEpoch.load(std::memory_order_acquire) == epoch)
        continue;
      double waitStart = trace.nowUs();
      std::unique_lock<std::mutex> lock(d.mutex);
      bool ok = d.cv.wait_for(lock, opts.waitTimeout, [&] {
        return aborted.load() || pred.doneEpoch.load(std::memory_order_acquire) == epoch;
      });
      if (aborted.load())
        return makeError("stopped because another device failed");
      if (!ok)
        return nodeError(*e.node, "on " + d.name + " waited " +
                                      llvm::Twine((int64_t)opts.waitTimeout.count()) +
                                      " ms for node '" + pred.node->name() + "' on " +
                                      devices[pred.device]->name + " at step " +
                                      llvm::Twine(step));
      if (opts.profile)
        trace.record(d.computeTrack, {pred.node->name(), "wait", EventKind::Wait, step, waitStart,
                                      trace.nowUs() - waitStart});
    }
    if (aborted.load())
      return makeError("stopped because another device failed");
    double start = opts.profile ? trace.nowUs() : 0;
    if (auto err = runNode(e, d))
      return err;
    if (opts.profile && e.action != Action::Alias) {
      double dur = trace.nowUs() - start;
      e.seconds += dur * 1e-6;
      ++e.runs;
      trace.record(d.computeTrack, {e.node->name(), opName(e.node->op()).str(), e.kind, step,
                                    start, dur});
    }
    if (opts.checkNumerics)
      for (unsigned r = 0; r < e.outputs.size(); ++r)
        if (!isFiniteView(e.outputs[r]))
          return nodeError(*e.node, "produced a non-finite value (NaN or infinity) in result '" +
                                        e.node->result(r)->name() + "' at step " +
                                        llvm::Twine(step) + " (first such node on " + d.name +
                                        "; --check-numerics)");
    e.doneEpoch.store(epoch, std::memory_order_release);
    for (unsigned w : e.remoteWaiters) {
      std::lock_guard<std::mutex> lock(devices[w]->mutex);
      devices[w]->cv.notify_all();
    }
  }
  return llvm::Error::success();
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
    if (err) {
      aborted.store(true);
      collectives->abort();
      for (auto &other : devices) {
        std::lock_guard<std::mutex> lock(other->mutex);
        other->cv.notify_all();
      }
    }
    std::lock_guard<std::mutex> lock(doneMutex);
    d.error = std::move(err);
    ++devicesDone;
    doneCv.notify_all();
  }
}

Executor::Impl::~Impl() {
  for (auto &d : devices) {
    std::lock_guard<std::mutex> lock(d->mutex);
    shuttingDown = true;
    d->cv.notify_all();
  }
  for (auto &d : devices)
    if (d->worker.joinable())
      d->worker.join();
  for (auto &d : devices)
    llvm::consumeError(std::move(d->error));
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

llvm::Expected<std::vector<Tensor>> Executor::run(const llvm::StringMap<Tensor> &feeds) {
  Impl &im = *impl_;
  double stepStart = im.trace.nowUs();
  // Feeds.
  for (auto &e : im.nodes) {
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
    if (it->second.bytes())
      std::memcpy(e->outputs[0].data, it->second.raw(), it->second.bytes());
  }
  for (const auto &entry : feeds)
    if (!im.graph->findInput(entry.getKey()))
      return makeError("fed '" + entry.getKey() + "', which is not an input of the graph");
  im.step = step_;
  ++im.epoch;
  im.aborted.store(false);
  im.collectives->reset();
  llvm::Error failure = llvm::Error::success();
  if (im.devices.size() == 1) {
    failure = im.runDevice(*im.devices[0]);
  } else {
    {
      std::lock_guard<std::mutex> lock(im.doneMutex);
      im.devicesDone = 0;
    }
    for (auto &d : im.devices) {
      std::lock_guard<std::mutex> lock(d->mutex);
      d->startEpoch = im.epoch;
      d->cv.notify_all();
    }
    std::unique_lock<std::mutex> lock(im.doneMutex);
    im.doneCv.wait(lock, [&] { return im.devicesDone == im.devices.size(); });
    // Report the root cause, not the devices that stopped because of it.
    std::string primary, secondary;
    for (auto &d : im.devices) {
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
      failure = makeError(primary.empty() ? secondary : primary);
  }
  if (failure)
    return failure;
  std::vector<Tensor> out;
  for (const Value *v : im.outputs) {
    Tensor t(v->type());
    DeviceState &owner = *im.devices[im.schedule.deviceOf.lookup(v->producer())];
    TensorView view = im.viewOf(v, owner);
    if (t.bytes())
      std::memcpy(t.raw(), view.data, t.bytes());
    out.push_back(std::move(t));
  }
  if (im.opts.profile)
    im.trace.recordStep(step_, stepStart, im.trace.nowUs() - stepStart);
  ++step_;
  return out;
}

llvm::Expected<Tensor> Executor::readVariable(llvm::StringRef name) const {
  for (auto &d : impl_->devices) {
    auto it = d->variables.storage.find(name);
    if (it != d->variables.storage.end())
      return it->second.clone();
  }
  return makeError("no variable '" + name + "' is held by any device");
}

llvm::Error Executor::writeVariable(llvm::StringRef name, const Tensor &value) {
  bool found = false;
  for (auto &d : impl_->devices) {
    auto it = d->variables.storage.find(name);
    if (it == d->variables.storage.end())
      continue;
    if (it->second.type() != value.type())
      return makeError("variable '" + name + "' is " + toString(it->second.type()) +
                       ", given " + toString(value.type()));
    std::memcpy(it->second.raw(), value.raw(), value.bytes());
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

std::vector<DeviceMemory> Executor::memory() const {
  std::vector<DeviceMemory> out;
  for (auto &d : impl_->devices) {
    DeviceMemory m;
    m.device = d->name;
    m.arenaBytes = d->plan.plan.arenaBytes;
    m.peakLiveBytes = d->plan.plan.peakLiveBytes;
    m.naiveBytes = d->plan.plan.naiveBytes;
    for (auto &entry : d->variables.storage)
      m.variableBytes += entry.second.bytes();
    out.push_back(m);
  }
  return out;
}

std::vector<NodeProfile> Executor::profile() const {
  std::vector<NodeProfile> out;
  for (auto &e : impl_->nodes)
    if (e->runs)
      out.push_back({e->node, impl_->devices[e->device]->name, e->seconds, e->runs});
  return out;
}

const TraceRecorder &Executor::trace() const { return impl_->trace; }

} // namespace graphc
