//===- Executor.cpp - Binding a module to devices, and the executor's queries -===//
//
// Executor::create binds once: a schedule per graph (main, and the graphs
// ExecutorOptions::graphs names; the batch's plumbing moved onto a GPU where
// BatchStaging.h says), devices with their thread shares, kernels,
// layouts (LayoutAssignment.h), memory plans (one arena per device for every graph),
// variables, collective groups and (optionally) step capture. Running steps
// is ExecutorRun.cpp.
//
//===----------------------------------------------------------------------===//

#include "executor/BatchStaging.h"
#include "executor/DeviceRegistry.h"
#include "executor/Executor.h"
#include "executor/ExecutorImpl.h"
#include "executor/LayoutAssignment.h"
#include "ir/Cost.h"
#include "ir/DeviceId.h"
#include "ir/Initializers.h"
#include "ir/MemoryLimit.h"
#include "kernels/cpu/CpuBackend.h"

#include <map>
#include <set>

namespace graphc {

using namespace exec;

llvm::Error ExecutorImpl::bind() {
  std::vector<const Graph *> graphs{module->findGraph("main")};
  if (!graphs[0])
    return makeError("module '" + module->name() + "' has no main graph");
  for (const std::string &name : opts.graphs) {
    const Graph *g = module->findGraph(name);
    if (!g || name == "main" || llvm::is_contained(graphs, g))
      return makeError("module '" + module->name() + "' has no graph '" + name +
                       "' to run besides main");
    graphs.push_back(g);
  }
  auto map = [&](const Node &n) {
    DeviceId d = n.assignedDevice().value_or(DeviceId::host());
    if (!opts.deviceMap)
      return d;
    DeviceId to = opts.deviceMap(d);
    if (to != d)
      plannedDevice.try_emplace(to.str(), d);
    return to;
  };
  // Schedules name their devices; each name's device, to create it by.
  std::map<std::string, DeviceId> named;
  for (const Graph *g : graphs) {
    llvm::DenseMap<const Node *, DeviceId> staged;
    if (opts.batchOnDevice)
      staged = stageBatchOnDevices(*g, map);
    auto s = buildSchedule(*g, [&](const Node &n) {
      auto it = staged.find(&n);
      DeviceId d = it != staged.end() ? it->second : map(n);
      return named.try_emplace(d.str(), d).first->first;
    });
    if (!s)
      return s.takeError();
    programs.push_back({g, std::move(*s), {}, {}});
    llvm::append_range(deviceNames, programs.back().schedule.devices);
  }
  llvm::sort(deviceNames);
  deviceNames.erase(std::unique(deviceNames.begin(), deviceNames.end()), deviceNames.end());
  for (const std::string &name : deviceNames)
    deviceIds.push_back(named.at(name));
  if (auto e = createDevices())
    return e;

  // Node records, program after program, each in its global issue order.
  for (unsigned p = 0; p < programs.size(); ++p) {
    Program &prog = programs[p];
    std::vector<unsigned> device; // the schedule's device index -> ours
    for (const std::string &name : prog.schedule.devices)
      device.push_back((unsigned)(llvm::lower_bound(deviceNames, name) - deviceNames.begin()));
    std::vector<const Node *> issue(prog.graph->numNodes());
    for (auto &[n, pos] : prog.schedule.position)
      issue[pos] = n;
    for (const Node *n : issue) {
      auto e = std::make_unique<NodeExec>();
      e->node = n;
      e->device = device[prog.schedule.deviceOf.lookup(n)];
      e->program = p;
      index[n] = nodes.size();
      devices[e->device]->orders[p].push_back(nodes.size());
      if (n->op() == Op::Input)
        prog.feeds.push_back(nodes.size());
      nodes.push_back(std::move(e));
    }
    for (const Value *v : prog.graph->outputs())
      prog.outputs.push_back(v);
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
    for (const Node *p : programs[e->program].schedule.predecessors(n)) {
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
  if (opts.fuseUpdates)
    groupFusableKernels();
  for (auto &d : devices)
    d->device->setProfiling(opts.profile, &trace);
  if (auto e = bindCapture())
    return e;

  // Workers for several devices; one device runs on the calling thread.
  if (devices.size() > 1)
    for (auto &d : devices)
      d->worker = std::thread([this, dev = d.get()] { workerLoop(*dev); });
  return llvm::Error::success();
}

llvm::Error ExecutorImpl::createDevices() {
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  int total = opts.threads > 0 ? opts.threads : (int)hardware;
  auto isCpu = [&](llvm::StringRef name) {
    auto it = llvm::lower_bound(deviceNames, name);
    return deviceIds[it - deviceNames.begin()].kind == DeviceKind::CPU;
  };
  const int threads = cpuDeviceThreads(programs[0].schedule, deviceNames, isCpu, total);
  cpuThreads = threads;
  cores = std::make_unique<CoreBudget>(total);
  cpuCollectives = std::make_unique<CpuCollectives>(opts.waitTimeout, &stepClock);
  for (unsigned i = 0; i < deviceNames.size(); ++i) {
    const std::string &name = deviceNames[i];
    const DeviceId id = deviceIds[i];
    auto d = std::make_unique<DeviceState>();
    d->orders.resize(programs.size());
    DeviceRequest req;
    req.id = id;
    req.threads = threads;
    req.cores = cores.get();
    req.waitTimeout = opts.waitTimeout;
    if (auto speed = opts.relativeSpeed.find(id); speed != opts.relativeSpeed.end()) {
      if (!(speed->second > 0 && speed->second <= 1) || id.kind != DeviceKind::CPU)
        return makeError("device '" + name + "': an emulated relative speed must be in (0, 1] " +
                         "and on a CPU device, got " + std::to_string(speed->second));
      req.relativeSpeed = speed->second;
    }
    if (opts.physicalGpu && id.isGpu())
      req.physicalOrdinal = opts.physicalGpu(id);
    auto dev = createDevice(req);
    if (!dev)
      return dev.takeError();
    d->device = std::move(*dev);
    auto planned = plannedDevice.find(name);
    d->traceName = planned == plannedDevice.end() ? name : planned->second.str() + "@" + name;
    for (const std::string &stream : d->device->traceStreams())
      d->tracks.push_back(trace.addTrack(d->traceName, stream));
    d->computeTrack = d->tracks[0];
    d->copyTrack = d->tracks.size() > 1 ? d->tracks[1] : d->tracks[0];
    devices.push_back(std::move(d));
  }
  return llvm::Error::success();
}

llvm::Error ExecutorImpl::createKernels() {
  for (auto &e : nodes) {
    const Node *n = e->node;
    DeviceState &d = *devices[e->device];
    if (isCollective(n->op())) { // AllReduce, ReduceScatter, AllGather
      e->action = Action::Collective;
      e->kind = EventKind::Collective;
      continue;
    }
    switch (n->op()) {
    case Op::Input:
      e->action = Action::Feed;
      e->kind = EventKind::Input;
      continue;
    case Op::Variable:
    case Op::Constant:
      e->action = Action::Alias;
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
    env.convAlgorithm = opts.convAlgorithm;
    env.gpuLayout = opts.gpuLayout;
    env.cpuLayout = opts.cpuLayout;
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

/// Runs of a device's issue order whose kernels share a non-empty fusion key
/// (the optimizer updates, Kernel::fusionKey) become one group, launched at
/// its last member through runGroup(). Only nodes that produce nothing and
/// that no other device waits for join, so running them a few positions late
/// changes nothing: no other node of their device runs in between.
void ExecutorImpl::groupFusableKernels() {
  auto keyOf = [&](unsigned i) {
    const NodeExec &e = *nodes[i];
    if (e.action != Action::Kernel || !e.kernel || e.node->numResults() ||
        !e.remoteWaiters.empty())
      return std::string();
    return e.kernel->fusionKey();
  };
  for (auto &d : devices)
    for (const std::vector<unsigned> &order : d->orders)
      for (size_t i = 0; i < order.size();) {
        std::string key = keyOf(order[i]);
        size_t end = i + 1;
        while (!key.empty() && end < order.size() && keyOf(order[end]) == key)
          ++end;
        if (end - i > 1) {
          for (size_t k = i; k + 1 < end; ++k)
            nodes[order[k]]->deferred = true;
          nodes[order[end - 1]]->fusedGroup.assign(order.begin() + i, order.begin() + end);
        }
        i = end;
      }
}

void ExecutorImpl::assignLayouts() {
  std::vector<LayoutSite> sites;
  sites.reserve(nodes.size());
  for (auto &e : nodes) {
    LayoutSite s;
    s.node = e->node;
    s.device = e->device;
    s.kind = devices[e->device]->device->kind();
    s.kernel = e->action == Action::Kernel ? e->kernel.get() : nullptr;
    // A copy between two devices of one kind moves the bytes as they are.
    s.copiesAsIs = e->action == Action::Transfer &&
                   devices[deviceOf(e->node->operand(0)->producer())]->device->kind() == s.kind;
    sites.push_back(s);
  }
  LayoutOptions o;
  o.blocked = opts.blockedLayouts;
  o.cpu = opts.cpuLayout;
  o.cpuHasAmx = cpuHasAmx();
  o.gpu = opts.gpuLayout;
  layouts = graphc::assignLayouts(sites, o);
}

llvm::Error ExecutorImpl::planMemory() {
  for (unsigned i = 0; i < devices.size(); ++i) {
    DeviceState &d = *devices[i];
    // Each program's plan; one arena holds the largest.
    for (const Program &p : programs) {
      auto local = llvm::find(p.schedule.devices, deviceNames[i]);
      if (local == p.schedule.devices.end())
        continue;
      DeviceMemoryPlan plan =
          planDeviceMemory(p.schedule, (unsigned)(local - p.schedule.devices.begin()),
                           [&](const Node &n) -> std::optional<unsigned> {
                             const NodeExec &e = *nodes[index.lookup(&n)];
                             return e.kernel ? e.kernel->inPlaceOperand() : std::nullopt;
                           });
      d.plan.offset.insert(plan.offset.begin(), plan.offset.end());
      d.plan.external.insert(plan.external.begin(), plan.external.end());
      if (plan.plan.arenaBytes >= d.plan.plan.arenaBytes)
        d.plan.plan = std::move(plan.plan);
    }
    auto arena = d.device->allocate(d.plan.plan.arenaBytes);
    if (!arena)
      return withContext(arena.takeError(), "the arena of " + d.device->name());
    d.arena = *arena;
    int64_t scratch = 0;
    for (const std::vector<unsigned> &order : d.orders)
      for (unsigned n : order)
        if (nodes[n]->kernel)
          scratch = std::max<int64_t>(scratch, nodes[n]->kernel->scratchBytes());
    if (d.device->kind() == DeviceKind::CPU) {
      cpuScratch.bytes = std::max(cpuScratch.bytes, scratch);
      cpuScratch.owner = cpuScratch.owner ? cpuScratch.owner : d.device.get();
      ++cpuScratch.devices;
      continue;
    }
    auto s = d.device->allocate(scratch);
    if (!s)
      return s.takeError();
    d.scratch = *s;
  }
  return shareCpuScratch();
}

llvm::Error ExecutorImpl::shareCpuScratch() {
  if (!cpuScratch.owner || cpuScratch.bytes == 0)
    return llvm::Error::success();
  // A CPU device uses scratch only while it holds cores: one buffer per lease
  // that can be held at once serves every CPU device.
  const int buffers = std::min(cpuScratch.devices, cores->leasesAtOnce(cpuThreads));
  for (int i = 0; i < buffers; ++i) {
    auto s = cpuScratch.owner->allocate((size_t)cpuScratch.bytes);
    if (!s)
      return withContext(s.takeError(), "the CPU devices' scratch");
    cpuScratch.buffers.push_back(*s);
  }
  cores->shareScratch(cpuScratch.buffers);
  return llvm::Error::success();
}

llvm::Error ExecutorImpl::bindVariables() {
  variablesVersion = 1;
  // Main's (device, variable) pairs: another graph must find its variables
  // where main keeps them, or it would update a copy main never reads.
  std::set<std::pair<unsigned, std::string>> mainHolds;
  // Storage on every device that reads or writes the variable.
  for (auto &e : nodes) {
    const Node *n = e->node;
    if (isVariableUpdate(n->op()))
      variablesVersion = 0;
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
    // A sharded update's slots: this device holds its rank's piece only.
    const int64_t rank = n->attrs().getInt("rank", 0), nranks = n->attrs().getInt("nranks", 0);
    for (const std::string &name : names) {
      if (e->program == 0)
        mainHolds.insert({e->device, name});
      else if (!mainHolds.count({e->device, name}))
        return nodeError(*n, "uses variable '" + name + "' on " + d.device->name() +
                                 ", where graph 'main' keeps no copy of it (graph '" +
                                 n->graph().name() + "' would work on a copy main never sees)");
      if (d.variables.storage.count(name))
        continue;
      const Variable *v = module->findVariable(name);
      if (!v)
        return nodeError(*n, "uses unknown variable '" + name + "'");
      if (v->sharded && (!isApplyRule(n->op()) || nranks == 0))
        return nodeError(*n, "uses sharded variable '" + name +
                                 "' whole; only a sharded update of its piece may");
      auto value = initialValue(*v, opts.seed);
      if (!value)
        return value.takeError();
      TensorType type = v->type;
      const char *from = static_cast<const char *>(value->raw());
      if (v->sharded) {
        ShardRange piece = shardRange(v->type.numElements(), rank, nranks);
        type = TensorType(v->type.dtype, {piece.size()});
        from += piece.begin * (int64_t)dtypeSize(v->type.dtype);
        d.variables.pieces[name] = piece;
      }
      auto p = d.device->allocate(type.bytes());
      if (!p)
        return withContext(p.takeError(), "variable '" + name + "'");
      if (auto err = d.device->copyIn(*p, from, type.bytes()))
        return err;
      d.variables.storage[name] = {*p, type};
    }
  }
  return llvm::Error::success();
}

llvm::Error ExecutorImpl::bindCollectives() {
  // All members of a group must be on host devices (the project's own
  // reduction) or all on GPUs (the CUDA backend's engine); across workers,
  // the first sum with MPI, the second with NCCL (bindGroup).
  std::map<std::string, std::vector<unsigned>> groups;
  std::map<std::string, std::vector<Device *>> gpuGroups; // devices by rank
  std::set<std::string> gpuAcrossWorkers;
  for (unsigned i = 0; i < nodes.size(); ++i)
    if (nodes[i]->action == Action::Collective)
      groups[nodes[i]->node->attrs().getString("group")].push_back(i);
  std::vector<std::string> acrossWorkers; // sorted: groups is a map
  for (auto &[name, members] : groups) {
    std::vector<DeviceKind> kinds;
    for (unsigned m : members)
      kinds.push_back(devices[nodes[m]->device]->device->kind());
    const Node &first = *nodes[members[0]]->node;
    auto binding = bindGroup(name, kinds, first.attrs().getInt("workers", 1), opts.acrossWorkers,
                             opts.gpuAcrossWorkers);
    if (!binding)
      return nodeError(first, llvm::toString(binding.takeError()));
    if (binding->across == AcrossWorkers::Mpi)
      acrossWorkers.push_back(name);
    if (binding->across == AcrossWorkers::Nccl)
      gpuAcrossWorkers.insert(name);
    if (binding->engine == DeviceKind::GPU) {
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
          return nodeError(first,
                           "collective '" + name + "' has no node for rank " + llvm::Twine(r));
      continue;
    }
    for (unsigned m : members)
      nodes[m]->collectives = cpuCollectives.get();
  }
  if (!acrossWorkers.empty()) {
    if (auto e = opts.acrossWorkers->prepareGroups(acrossWorkers))
      return e;
    cpuCollectives->reduceAcrossWorkers(opts.acrossWorkers, acrossWorkers);
  }
  if (gpuGroups.empty())
    return llvm::Error::success();
  const DeviceBackend *gpu = DeviceRegistry::global().find(DeviceKind::GPU);
  if (!gpu)
    return makeError("collective '" + gpuGroups.begin()->first +
                     "' runs on GPUs, which need a gpu backend (not built)");
  auto engine =
      gpu->createCollectives(opts.waitTimeout, gpuGroups, gpuAcrossWorkers, opts.gpuAcrossWorkers);
  if (!engine)
    return engine.takeError();
  for (auto &[name, members] : groups)
    if (gpuGroups.count(name))
      for (unsigned m : members)
        nodes[m]->collectives = engine->get();
  otherCollectives.push_back(std::move(*engine));
  return llvm::Error::success();
}

std::string ExecutorImpl::hostWorkInStep() const {
  for (const auto &d : devices) {
    if (d->device->kind() == DeviceKind::GPU)
      continue;
    llvm::ArrayRef<unsigned> order = d->orders[0];
    if (order.empty())
      continue;
    // The first node that computes, rather than feeds or holds a value.
    auto work = llvm::find_if(order, [&](unsigned i) {
      Op op = nodes[i]->node->op();
      return op != Op::Input && op != Op::Variable && op != Op::Constant && op != Op::Transfer;
    });
    const Node *n = nodes[work != order.end() ? *work : order.front()]->node;
    return d->device->name() + " runs " + std::to_string(order.size()) + " of its nodes, '" +
           n->name() + "' (" + opName(n->op()).str() + ") among them";
  }
  return "";
}

llvm::Error ExecutorImpl::bindCapture() {
  if (opts.cudaGraphs == CudaGraphs::Off)
    return llvm::Error::success();
  std::vector<DeviceKind> kinds;
  std::vector<Device *> devs;
  for (auto &d : devices) {
    kinds.push_back(d->device->kind());
    devs.push_back(d->device.get());
  }
  std::string why =
      programs.size() > 1
          ? ("the executor runs " + llvm::Twine(programs.size()) +
             " graphs (gradient accumulation's micro-steps and the update)")
                .str()
          : stepCaptureRefusal(*programs[0].graph, kinds, opts.profile, opts.checkNumerics);
  if (why.empty()) {
    // Every device is of one kind (the refusal admits GPUs only).
    const DeviceBackend *backend =
        kinds.empty() ? nullptr : DeviceRegistry::global().find(kinds[0]);
    if (backend)
      capture = backend->createStepCapture(devs, opts.waitTimeout);
    if (!capture)
      why = "the devices are not CUDA devices of this process";
  }
  if (why.empty()) {
    graphNote = "the second step is captured as a CUDA graph and replayed after";
    return llvm::Error::success();
  }
  if (why == kHostDeviceRefusal)
    why += ": " + hostWorkInStep();
  if (opts.cudaGraphs == CudaGraphs::On)
    return makeError("CUDA graphs were asked for (on), but the step cannot be one: " + why);
  // Auto says why only where a GPU takes part: a run on host devices alone
  // has nothing to capture.
  if (llvm::is_contained(kinds, DeviceKind::GPU))
    graphNote = "CUDA graphs not used: " + why;
  return llvm::Error::success();
}

TensorView ExecutorImpl::viewOf(const Value *v) {
  TensorView view;
  view.dtype = v->type().dtype;
  view.shape = v->type().shape;
  view.layout = layouts.lookup(v);
  // A value is read where it lives; transfers copy between devices.
  DeviceState &owner = *devices[deviceOf(v->producer())];
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


//===-- Executor -----------------------------------------------------------===//

Executor::Executor(std::unique_ptr<ExecutorImpl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

llvm::Expected<std::unique_ptr<Executor>> Executor::create(const Module &m, ExecutorOptions opts) {
  // Under --memory-limit, auto's Winograd scratchpads may be what does not
  // fit: a second binding differs only in computing every convolution
  // directly, so where it fits, that was the reason.
  bool mayRetry = opts.convAlgorithm == ConvAlgorithm::Auto && memoryLimit() > 0 &&
                  llvm::any_of(DeviceRegistry::global().backends(), [](const DeviceBackend *b) {
                    return b->autoConvolutionsMayUseWinograd();
                  });
  ExecutorOptions direct = mayRetry ? opts : ExecutorOptions();
  auto impl = std::make_unique<ExecutorImpl>();
  impl->module = &m;
  impl->opts = std::move(opts);
  if (auto e = impl->bind()) {
    if (!mayRetry)
      return e;
    impl.reset(); // gives back what the first binding holds
    direct.convAlgorithm = ConvAlgorithm::Direct;
    auto retry = create(m, std::move(direct));
    if (!retry) {
      llvm::consumeError(retry.takeError());
      return e;
    }
    llvm::consumeError(std::move(e));
    (*retry)->impl_->algorithmNote =
        "convolutions compute directly: with Winograd's scratch the run does not fit the "
        "--memory-limit of " + bytesText(memoryLimit());
    return retry;
  }
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}


const std::string &Executor::cudaGraphNote() const { return impl_->graphNote; }

const std::string &Executor::algorithmNote() const { return impl_->algorithmNote; }

llvm::Expected<Tensor> Executor::readVariable(llvm::StringRef name) const {
  const Variable *v = impl_->module->findVariable(name);
  if (v && v->sharded) { // whole again from every device's piece
    Tensor t(v->type);
    int64_t covered = 0;
    for (auto &d : impl_->devices) {
      auto it = d->variables.pieces.find(name);
      if (it == d->variables.pieces.end())
        continue;
      const int64_t elem = (int64_t)dtypeSize(v->type.dtype);
      if (auto e = d->device->copyOut(static_cast<char *>(t.raw()) + it->second.begin * elem,
                                      d->variables.storage[name].data, it->second.size() * elem))
        return e;
      covered += it->second.size();
    }
    if (covered != v->type.numElements())
      return makeError("sharded variable '" + name + "': the devices of this process hold " +
                       llvm::Twine(covered) + " of its " + llvm::Twine(v->type.numElements()) +
                       " elements");
    return t;
  }
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
    if (auto piece = d->variables.pieces.find(name); piece != d->variables.pieces.end()) {
      // Sharded: this device's piece of the whole value.
      const Variable *v = impl_->module->findVariable(name);
      if (v->type != value.type())
        return makeError("variable '" + name + "' is " + toString(v->type) + ", given " +
                         toString(value.type()));
      const int64_t elem = (int64_t)dtypeSize(v->type.dtype);
      if (auto e = d->device->copyIn(
              it->second.data, static_cast<const char *>(value.raw()) + piece->second.begin * elem,
              piece->second.size() * elem))
        return e;
      found = true;
      continue;
    }
    if (it->second.type != value.type())
      return makeError("variable '" + name + "' is " + toString(it->second.type) + ", given " +
                       toString(value.type()));
    if (auto e = d->device->copyIn(it->second.data, value.raw(), value.bytes()))
      return e;
    found = true;
  }
  if (!found)
    return makeError("no variable '" + name + "' is held by any device");
  if (impl_->variablesVersion)
    ++impl_->variablesVersion;
  return llvm::Error::success();
}

std::vector<std::string> Executor::variableNames() const {
  std::vector<std::string> names;
  for (const Variable &v : impl_->module->variables()) {
    if (!v.persistent())
      continue;
    for (auto &d : impl_->devices)
      if (d->variables.storage.count(v.name)) {
        names.push_back(v.name);
        break;
      }
  }
  return names;
}

const std::vector<std::string> &Executor::devices() const {
  return impl_->deviceNames;
}

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
      out.push_back({e->node, impl_->devices[e->device]->device->name(), e->seconds, e->runs,
                     e->kernel ? e->kernel->reordersRun() : ReorderCount()});
  return out;
}

std::vector<NodePrimitives> Executor::primitives() const {
  std::vector<NodePrimitives> out;
  for (auto &e : impl_->nodes)
    if (e->kernel)
      if (auto run = e->kernel->primitivesRun(); !run.empty())
        out.push_back({e->node, impl_->devices[e->device]->device->name(), std::move(run)});
  return out;
}

int64_t Executor::valuesInLayout(Layout l) const {
  return llvm::count_if(impl_->layouts, [&](const auto &entry) { return entry.second == l; });
}

Layout Executor::layoutOf(const Value *v) const {
  return impl_->layouts.lookup(v);
}

bool Executor::hasGpu() const {
  return llvm::any_of(impl_->devices,
                      [](const auto &d) { return d->device->kind() == DeviceKind::GPU; });
}

std::vector<FusedGroup> Executor::fusedGroups() const {
  std::vector<FusedGroup> out;
  for (auto &e : impl_->nodes)
    if (!e->fusedGroup.empty()) {
      out.push_back({impl_->devices[e->device]->device->name(), {}});
      for (unsigned i : e->fusedGroup)
        out.back().nodes.push_back(impl_->nodes[i]->node);
    }
  return out;
}

const TraceRecorder &Executor::trace() const { return impl_->trace; }

const StepTimes &Executor::lastStepTimes() const {
  return impl_->lastStepTimes;
}

} // namespace graphc
