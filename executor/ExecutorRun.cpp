//===- ExecutorRun.cpp - Running steps: one worker per device ---------------===//
//
// Each device's worker issues its nodes in schedule order, waiting on the
// events of remote predecessors (with a timeout that names both nodes);
// transfers go through Device::receive, all-reduces through the group's
// collective engine. run() feeds the inputs, starts every worker and collects
// the outputs; prefetch() stages future inputs while steps run.
//
//===----------------------------------------------------------------------===//

#include "executor/Executor.h"

#include "executor/ExecutorImpl.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace graphc {

using namespace exec;

namespace {

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

llvm::Error ExecutorImpl::runNode(NodeExec &e, DeviceState &d) {
  Device &dev = *d.device;
  switch (e.action) {
  case Action::Feed:
  case Action::Alias:
    return llvm::Error::success();
  case Action::Transfer: {
    const Node *src = e.node->operand(0)->producer();
    Device &from = *devices[deviceOf(src)]->device;
    dev.noteNode(index.lookup(e.node), EventKind::Copy);
    // A fed value moving to the devices that read it is the batch's staging.
    bool fed = nodes[index.lookup(src)]->action == Action::Feed;
    StepClock::Scope part(&stepClock, fed ? StepPart::Input : StepPart::IntraWorker);
    return dev.receive(e.outputs[0].data, from, e.inputs[0].data, e.outputs[0].bytes());
  }
  case Action::Collective: {
    const Attrs &a = e.node->attrs();
    unsigned node = index.lookup(e.node);
    dev.noteNode(node, EventKind::Collective);
    // A CPU collective runs on this thread, not through a launch: time it here.
    bool timed = opts.profile && dev.kind() == DeviceKind::CPU;
    double start = timed ? trace.nowUs() : 0;
    StepClock::Scope part(&stepClock, StepPart::IntraWorker);
    const std::string &group = a.getString("group");
    const unsigned rank = (unsigned)a.getInt("rank"), nranks = (unsigned)a.getInt("nranks");
    const std::string what = "node '" + e.node->name() + "' on " + dev.name();
    llvm::Error err = [&]() -> llvm::Error {
      switch (e.node->op()) {
      case Op::ReduceScatter:
        return e.collectives->reduceScatter(group, rank, nranks, e.inputs, e.outputs, what, dev);
      case Op::AllGather: { // in place, in this device's replica of the variable
        auto whole = d.variables.variable(a.getString("var"));
        if (!whole)
          return whole.takeError();
        return e.collectives->allGather(group, rank, nranks, *whole, what, dev);
      }
      default:
        return e.collectives->allReduce(group, rank, nranks, e.inputs, e.outputs, what, dev);
      }
    }();
    if (timed && !err)
      d.hostTimings.push_back({node, EventKind::Collective, start, trace.nowUs() - start});
    return err;
  }
  case Action::Kernel:
    break;
  }
  if (e.deferred)
    return llvm::Error::success(); // runs with its group's last member
  if (!e.fusedGroup.empty())
    return runFusedGroup(e, d);
  KernelContext ctx = contextFor(e, d);
  dev.noteNode(index.lookup(e.node), e.kind);
  return dev.launch(*e.kernel, ctx);
}

KernelContext ExecutorImpl::contextFor(NodeExec &e, DeviceState &d) const {
  KernelContext ctx;
  ctx.inputs = e.inputs;
  ctx.outputs = e.outputs;
  ctx.scratch = d.scratch;
  ctx.step = step;
  ctx.microStep = microStep;
  ctx.variables = &d.variables;
  ctx.variablesVersion = variablesVersion;
  return ctx;
}

namespace {

/// A fused group as one launch: the device sees every member's operands (its
/// hazards on CUDA) and gives the stream; the first member's runGroup() runs
/// them all, each with its own context.
class GroupLaunch : public Kernel {
public:
  std::vector<Kernel *> members;
  std::vector<KernelContext> contexts;

  llvm::Error run(KernelContext &ctx) override {
    std::vector<KernelContext *> each;
    for (KernelContext &c : contexts) {
      c.stream = ctx.stream;
      c.scratch = ctx.scratch; // a CPU device's comes with its cores
      c.deviceStep = ctx.deviceStep;
      each.push_back(&c);
    }
    return members.front()->runGroup(members, each);
  }
};

} // namespace

llvm::Error ExecutorImpl::runFusedGroup(NodeExec &last, DeviceState &d) {
  GroupLaunch group;
  std::vector<TensorView> operands;
  for (unsigned i : last.fusedGroup) {
    NodeExec &m = *nodes[i];
    group.members.push_back(m.kernel.get());
    group.contexts.push_back(contextFor(m, d));
    llvm::append_range(operands, m.inputs);
  }
  KernelContext ctx = contextFor(last, d);
  ctx.inputs = operands;
  // The group's time is its last member's (the profile counts the others as
  // run with it).
  d.device->noteNode(index.lookup(last.node), last.kind);
  return d.device->launch(group, ctx);
}

llvm::Error ExecutorImpl::checkNumerics(NodeExec &e, DeviceState &d) {
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

llvm::Error ExecutorImpl::runDevice(DeviceState &d) {
  const int micro = running == 0 ? -1 : (int)microStep;
  if (opts.profile)
    d.workerStartUs = trace.nowUs();
  for (unsigned i : d.orders[running]) {
    NodeExec &e = *nodes[i];
    for (unsigned p : e.remotePreds) {
      NodeExec &pred = *nodes[p];
      double waitStart = opts.profile ? trace.nowUs() : 0;
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
      if (auto err = d.device->wait(*pred.event))
        return err;
      if (opts.profile)
        noteWait(d, pred, waitStart, micro);
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
  if (auto err = d.device->endStep())
    return err;
  if (auto err = d.device->synchronize())
    return err;
  if (opts.profile) {
    d.syncedUs = trace.nowUs();
    collectTimings(d, micro);
    d.workerEndUs = trace.nowUs();
  }
  return llvm::Error::success();
}

void ExecutorImpl::abortAll() {
  aborted.store(true);
  cpuCollectives->abort();
  for (auto &c : otherCollectives)
    c->abort();
  for (auto &other : devices) {
    std::lock_guard<std::mutex> lock(other->mutex);
    other->cv.notify_all();
  }
}

void ExecutorImpl::workerLoop(DeviceState &d) {
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

ExecutorImpl::~ExecutorImpl() {
  // The prefetch helpers write into device buffers: let them finish first.
  for (Prefetched &p : prefetched)
    if (p.done.valid())
      p.done.wait();
  capture.reset();
  // Set before any worker's lock is taken (each worker reads it under its own
  // device's lock, so no single lock orders the write for all of them); the
  // lock below still orders it before the worker's wait, so no wake-up is lost.
  shuttingDown.store(true);
  for (auto &d : devices) {
    std::lock_guard<std::mutex> lock(d->mutex);
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
  for (void *p : cpuScratch.buffers)
    cpuScratch.owner->deallocate(p);
  for (auto &[node, slots] : staging)
    for (void *p : slots)
      if (p)
        devices[nodes[node]->device]->device->deallocate(p);
}

llvm::Error ExecutorImpl::checkFeeds(const Program &p,
                                       const llvm::StringMap<Tensor> &feeds) const {
  for (const auto &entry : feeds)
    if (!p.graph->findInput(entry.getKey()))
      return makeError("fed '" + entry.getKey() + "', which is not an input of graph '" +
                       p.graph->name() + "'");
  for (unsigned i : p.feeds) {
    const NodeExec *e = nodes[i].get();
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

llvm::Error ExecutorImpl::consumePrefetched(uint64_t stepNumber) {
  Prefetched p = std::move(prefetched.front());
  prefetched.pop_front();
  std::string failed = p.done.get();
  if (!failed.empty())
    return makeError("prefetching the inputs of step " + llvm::Twine(stepNumber) + ": " + failed);
  for (unsigned i : p.host) {
    NodeExec &e = *nodes[i];
    const Tensor &t = p.tensors->find(e.node->name())->second;
    double start = trace.nowUs();
    if (auto err = devices[e.device]->device->copyIn(e.outputs[0].data, t.raw(), t.bytes()))
      return err;
    if (opts.profile)
      noteHostCopy(e.device, e.node->name(), "Input", CopyRoute::HostToDevice, start, -1);
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

llvm::Error ExecutorImpl::runDevices() {
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
  return run("main", feeds);
}

llvm::Expected<std::vector<Tensor>> Executor::run(llvm::StringRef graph,
                                                  const llvm::StringMap<Tensor> &feeds) {
  ExecutorImpl &im = *impl_;
  auto found =
      llvm::find_if(im.programs, [&](const ExecutorImpl::Program &p) { return p.graph->name() == graph; });
  if (found == im.programs.end())
    return makeError("the executor runs no graph '" + graph +
                     "' (bind it with ExecutorOptions::graphs)");
  const ExecutorImpl::Program &prog = *found;
  const bool main = found == im.programs.begin();
  double stepStart = im.trace.nowUs();
  im.step = step_;
  im.running = (unsigned)(found - im.programs.begin());
  const int micro = main ? -1 : (int)im.microStep;
  if (im.opts.profile)
    im.startRunTimeline();
  im.stepClock.start();
  std::optional<StepClock::Scope> staging(std::in_place, &im.stepClock, StepPart::Input);
  if (main && feeds.empty() && !im.prefetched.empty()) {
    if (auto err = im.consumePrefetched(step_))
      return err;
  } else {
    if (!im.prefetched.empty())
      return makeError("run() was given feeds while " + llvm::Twine(im.prefetched.size()) +
                       " prefetched step(s) wait; run them with run({}) first");
    if (auto err = im.checkFeeds(prog, feeds))
      return err;
    for (unsigned i : prog.feeds) {
      NodeExec &e = *im.nodes[i];
      const Tensor &t = feeds.find(e.node->name())->second;
      Device &dev = *im.devices[e.device]->device;
      double start = im.trace.nowUs();
      if (auto err = dev.copyIn(e.outputs[0].data, t.raw(), t.bytes()))
        return err;
      if (im.opts.profile)
        im.noteHostCopy(e.device, e.node->name(), "Input", CopyRoute::HostToDevice, start, micro);
    }
  }
  staging.reset();
  // Devices that keep the step in their memory set it now, outside any
  // capture, where it differs from what they hold.
  for (auto &d : im.devices)
    if (auto err = d->device->beginStep(im.step, im.microStep))
      return err;
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
      std::string why =
          "capturing this run's second step failed: " + llvm::toString(std::move(e));
      if (im.opts.cudaGraphs == CudaGraphs::On)
        return makeError("CUDA graphs were asked for (on), but " + why);
      im.graphNote = "CUDA graphs not used: " + why;
      failure = im.runDevices();
    } else {
      im.graphNote = "this run's second step was captured as a CUDA graph; later steps replay it";
      failure = im.capture->replay();
    }
  } else {
    failure = im.runDevices();
  }
  if (failure)
    return failure;
  const double devicesDone = im.trace.nowUs();
  ++im.stepsRun;
  std::vector<Tensor> out;
  for (const Value *v : prog.outputs) {
    Tensor t(v->type());
    unsigned owner = im.deviceOf(v->producer());
    double start = im.trace.nowUs();
    if (auto err = im.devices[owner]->device->copyOut(t.raw(), im.viewOf(v).data, t.bytes()))
      return err;
    if (im.opts.profile)
      im.noteHostCopy(owner, v->name(), "Output", CopyRoute::DeviceToHost, start, micro);
    out.push_back(std::move(t));
  }
  im.lastStepTimes = im.stepClock.finish();
  if (im.opts.profile)
    im.recordRunTimeline(micro, stepStart, devicesDone);
  if (main) {
    ++step_;
    im.microStep = 0;
  } else {
    ++im.microStep;
  }
  return out;
}

llvm::Error Executor::prefetch(llvm::StringMap<Tensor> feeds) {
  ExecutorImpl &im = *impl_;
  if (im.prefetched.size() >= 2)
    return makeError("two steps' inputs are already prefetched; run a step first");
  if (auto err = im.checkFeeds(im.programs[0], feeds))
    return err;
  ExecutorImpl::Prefetched p;
  p.slot = im.prefetchCount % 2;
  p.tensors = std::make_shared<const llvm::StringMap<Tensor>>(std::move(feeds));
  struct Copy {
    Device *device;
    void *dst;
    const Tensor *tensor;
  };
  std::vector<Copy> copies;
  for (unsigned i : im.programs[0].feeds) {
    NodeExec &e = *im.nodes[i];
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


} // namespace graphc
