#include "executor/ParameterServer.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace graphc {

namespace {

enum class PsKind : uint32_t {
  Grads = 1, ///< worker → task: the sums of a step
  Save,      ///< the chief → task: send your state
  Done,      ///< worker → task: finished
  DoneFinal, ///< the chief → task: finished; send the final state when all are
  Vars,      ///< task → worker: the variables
  State,     ///< task → the chief: variables and slots (and statistics when final)
  Note,      ///< task → the chief waiting for the final state: an update was applied
};

struct PsHeader {
  uint32_t kind = 0, worker = 0;
  int64_t step = 0;
  double lr = 0;
  uint64_t version = 0;   ///< request: the version read; reply: the version sent
  uint64_t staleness = 0; ///< Vars: this update's; final State: the largest
  uint64_t updates = 0;   ///< final State: updates applied
  double meanStaleness = 0;
};

constexpr int kRequestTag = 7101, kReplyTag = 7102;

const char *kindName(uint32_t k) {
  switch ((PsKind)k) {
  case PsKind::Grads:
    return "gradients";
  case PsKind::Save:
    return "a state request";
  case PsKind::Done:
  case PsKind::DoneFinal:
    return "its end";
  case PsKind::Vars:
    return "variables";
  case PsKind::State:
    return "a state";
  case PsKind::Note:
    return "a note";
  }
  return "an unknown message";
}

/// A message buffer: the header, then `values` floats.
std::vector<char> messageBuffer(int64_t values) {
  return std::vector<char>(sizeof(PsHeader) + (size_t)values * sizeof(float));
}
PsHeader headerOf(const std::vector<char> &m) {
  PsHeader h;
  std::memcpy(&h, m.data(), sizeof h);
  return h;
}
void setHeader(std::vector<char> &m, const PsHeader &h) {
  std::memcpy(m.data(), &h, sizeof h);
}
float *valuesOf(std::vector<char> &m) {
  return reinterpret_cast<float *>(m.data() + sizeof(PsHeader));
}
const float *valuesOf(const std::vector<char> &m) {
  return reinterpret_cast<const float *>(m.data() + sizeof(PsHeader));
}

llvm::Error checkSize(size_t bytes, unsigned task) {
  if (bytes > (size_t)INT32_MAX)
    return makeError("ps task " + llvm::Twine(task) + " holds " + llvm::Twine((uint64_t)bytes) +
                     " bytes, more than one MPI message carries (2 GiB): use more ps tasks");
  return llvm::Error::success();
}

std::string secondsText(std::chrono::milliseconds t) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3g", std::chrono::duration<double>(t).count());
  return buf;
}

std::string taskName(const Workers &w, unsigned task) {
  return "ps task " + std::to_string(task) + " (rank " + std::to_string(w.numWorkers() + task) +
         ")";
}

} // namespace

PsLayout::PsLayout(std::vector<PsVariable> vars, unsigned tasks)
    : vars_(std::move(vars)), byTask_(tasks), values_(tasks, 0), stateValues_(tasks, 0) {
  for (const PsVariable &v : vars_) {
    assert(v.task < tasks && "a variable of a task outside the layout");
    byTask_[v.task].push_back(&v);
    values_[v.task] += v.type.numElements();
    stateValues_[v.task] += v.type.numElements() * (int64_t)(1 + v.slots.size());
  }
}

//===----------------------------------------------------------------------===//
// The worker's side.
//===----------------------------------------------------------------------===//

PsClient::PsClient(Workers &workers, PsLayout layout)
    : workers_(workers), layout_(std::move(layout)), read_(layout_.tasks(), 0) {
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    requests_.push_back(messageBuffer(layout_.values(p)));
    replies_.push_back(messageBuffer(layout_.stateValues(p)));
  }
}

llvm::Expected<uint64_t> PsClient::exchange(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs,
                                            Executor &ex) {
  const unsigned W = workers_.numWorkers();
  std::vector<Workers::Message> sends, receives;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    PsHeader h;
    h.kind = (uint32_t)PsKind::Grads;
    h.worker = workers_.rank();
    h.step = step;
    h.lr = lr;
    h.version = read_[p];
    setHeader(requests_[p], h);
    float *to = valuesOf(requests_[p]);
    for (const PsVariable *v : layout_.of(p)) {
      if (v->output >= outputs.size() || outputs[v->output].type() != v->type)
        return makeError("the step's output " + llvm::Twine(v->output) + " is not the sum for '" +
                         v->name + "' (" + toString(v->type) + ")");
      std::memcpy(to, outputs[v->output].raw(), outputs[v->output].bytes());
      to += v->type.numElements();
    }
    if (auto e = checkSize(requests_[p].size(), p))
      return e;
    sends.push_back({W + p, kRequestTag, requests_[p].data(), requests_[p].size()});
    receives.push_back({W + p, kReplyTag, replies_[p].data(), replies_[p].size()});
  }
  if (auto e = workers_.exchange(sends, receives,
                                 "sending the step's gradients to the ps tasks and receiving the "
                                 "variables"))
    return e;
  uint64_t staleness = 0;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    PsHeader h = headerOf(replies_[p]);
    size_t want = sizeof(PsHeader) + (size_t)layout_.values(p) * sizeof(float);
    if (h.kind != (uint32_t)PsKind::Vars || receives[p].received != want)
      return makeError(taskName(workers_, p) + " answered the gradients of step " +
                       llvm::Twine(step) + " with " + kindName(h.kind) + " of " +
                       llvm::Twine((uint64_t)receives[p].received) + " bytes");
    read_[p] = h.version;
    staleness = std::max(staleness, h.staleness);
    const float *from = valuesOf(replies_[p]);
    for (const PsVariable *v : layout_.of(p)) {
      Tensor t(v->type);
      std::memcpy(t.raw(), from, t.bytes());
      from += v->type.numElements();
      if (auto e = ex.writeVariable(v->name, t))
        return e;
    }
  }
  return staleness;
}

/// Reads a task's state message into named tensors.
static void appendState(const PsLayout &layout, unsigned task, const std::vector<char> &reply,
                        std::vector<NamedTensor> &out) {
  const float *from = valuesOf(reply);
  for (const PsVariable *v : layout.of(task)) {
    std::vector<std::string> names{v->name};
    names.insert(names.end(), v->slots.begin(), v->slots.end());
    for (const std::string &name : names) {
      Tensor t(v->type);
      std::memcpy(t.raw(), from, t.bytes());
      from += v->type.numElements();
      out.push_back({name, std::move(t)});
    }
  }
}

llvm::Expected<std::vector<NamedTensor>> PsClient::state() {
  const unsigned W = workers_.numWorkers();
  std::vector<PsHeader> asks(layout_.tasks());
  std::vector<Workers::Message> sends, receives;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    asks[p].kind = (uint32_t)PsKind::Save;
    asks[p].worker = workers_.rank();
    sends.push_back({W + p, kRequestTag, &asks[p], sizeof(PsHeader)});
    receives.push_back({W + p, kReplyTag, replies_[p].data(), replies_[p].size()});
  }
  if (auto e = workers_.exchange(sends, receives, "gathering the ps tasks' variables"))
    return e;
  std::vector<NamedTensor> out;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    PsHeader h = headerOf(replies_[p]);
    if (h.kind != (uint32_t)PsKind::State || receives[p].received != replies_[p].size())
      return makeError(taskName(workers_, p) + " answered a state request with " +
                       kindName(h.kind));
    appendState(layout_, p, replies_[p], out);
  }
  return out;
}

llvm::Error PsClient::finish(bool final, std::vector<NamedTensor> *state,
                             std::vector<PsTaskStats> *stats) {
  const unsigned W = workers_.numWorkers();
  std::vector<PsHeader> ends(layout_.tasks());
  std::vector<Workers::Message> sends;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    ends[p].kind = (uint32_t)(final ? PsKind::DoneFinal : PsKind::Done);
    ends[p].worker = workers_.rank();
    sends.push_back({W + p, kRequestTag, &ends[p], sizeof(PsHeader)});
  }
  if (auto e = workers_.exchange(sends, {}, "telling the ps tasks this worker is done"))
    return e;
  if (!final)
    return llvm::Error::success();
  // Each task answers once every worker is done; until then a note after each
  // update it applies keeps this wait's deadline moving.
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    for (;;) {
      Workers::Message reply{W + p, kReplyTag, replies_[p].data(), replies_[p].size()};
      if (auto e = workers_.exchange({}, reply,
                                     "waiting for every worker to finish (" +
                                         taskName(workers_, p) + "'s final state)"))
        return e;
      PsHeader h = headerOf(replies_[p]);
      if (h.kind == (uint32_t)PsKind::Note)
        continue;
      if (h.kind != (uint32_t)PsKind::State || reply.received != replies_[p].size())
        return makeError(taskName(workers_, p) + " ended the run with " + kindName(h.kind));
      if (state)
        appendState(layout_, p, replies_[p], *state);
      if (stats)
        stats->push_back({h.updates, h.staleness, h.meanStaleness});
      break;
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The task's side.
//===----------------------------------------------------------------------===//

llvm::Expected<std::unique_ptr<PsServer>> PsServer::create(Workers &workers, const Module &part,
                                                           unsigned task, PsLayout layout,
                                                           const ExecutorOptions &exec,
                                                           Options options) {
  if (task >= layout.tasks())
    return makeError("ps task " + llvm::Twine(task) + " is not one of " +
                     llvm::Twine(layout.tasks()));
  if (options.async && options.workerScale.size() != workers.numWorkers())
    return makeError("asynchronous ps tasks need every worker's scale");
  if (auto e = checkSize(sizeof(PsHeader) + (size_t)layout.stateValues(task) * sizeof(float), task))
    return e;
  std::unique_ptr<PsServer> s(new PsServer(workers, task, std::move(layout), std::move(options)));
  auto ex = Executor::create(part, exec);
  if (!ex)
    return ex.takeError();
  s->executor_ = std::move(*ex);
  for (const PsVariable *v : s->layout_.of(task))
    s->feeds_[v->input] = Tensor(v->type);
  return s;
}

PsServer::~PsServer() = default;

llvm::Error PsServer::apply(llvm::ArrayRef<const float *> parts, double scale, int64_t step,
                            double lr) {
  assert(!parts.empty());
  int64_t offset = 0;
  for (const PsVariable *v : layout_.of(task_)) {
    float *sum = feeds_[v->input].data<float>();
    const int64_t n = v->type.numElements();
    std::memcpy(sum, parts[0] + offset, n * sizeof(float));
    for (size_t k = 1; k < parts.size(); ++k) {
      const float *add = parts[k] + offset;
      for (int64_t i = 0; i < n; ++i)
        sum[i] += add[i];
    }
    if (scale != 1)
      for (int64_t i = 0; i < n; ++i)
        sum[i] = (float)(sum[i] * scale);
    offset += n;
  }
  feeds_["lr"] = Tensor::scalar((float)lr);
  executor_->setStep((uint64_t)step);
  auto out = executor_->run(feeds_);
  if (!out)
    return out.takeError();
  return llvm::Error::success();
}

llvm::Error PsServer::packVariables(float *out) const {
  for (const PsVariable *v : layout_.of(task_)) {
    auto t = executor_->readVariable(v->name);
    if (!t)
      return t.takeError();
    std::memcpy(out, t->raw(), t->bytes());
    out += v->type.numElements();
  }
  return llvm::Error::success();
}

llvm::Error PsServer::packState(float *out) const {
  for (const PsVariable *v : layout_.of(task_)) {
    std::vector<std::string> names{v->name};
    names.insert(names.end(), v->slots.begin(), v->slots.end());
    for (const std::string &name : names) {
      auto t = executor_->readVariable(name);
      if (!t)
        return t.takeError();
      if (t->type() != v->type)
        return makeError("slot '" + name + "' is " + toString(t->type()) + ", not " +
                         toString(v->type));
      std::memcpy(out, t->raw(), t->bytes());
      out += v->type.numElements();
    }
  }
  return llvm::Error::success();
}

llvm::Expected<PsTaskStats> PsServer::serve() {
  using Clock = std::chrono::steady_clock;
  const unsigned W = workers_.numWorkers();
  const std::string me = taskName(workers_, task_);
  const int64_t n = layout_.values(task_);
  std::vector<char> request = messageBuffer(n), reply = messageBuffer(n),
                    state = messageBuffer(layout_.stateValues(task_));
  // Synchronous: the round's requests, one per worker.
  std::vector<std::vector<float>> round(W);
  std::vector<bool> inRound(W, false), done(W, false);
  std::vector<int64_t> lastStep(W, -1);
  std::vector<Clock::time_point> lastSeen(W, Clock::now());
  unsigned arrived = 0, finished = 0;
  int64_t roundStep = 0;
  double roundLr = 0;
  int finalFor = -1;
  uint64_t version = 0;
  double stalenessSum = 0;
  PsTaskStats stats;

  auto send = [&](unsigned worker, std::vector<char> &m, const llvm::Twine &what) {
    return workers_.exchange({{worker, kReplyTag, m.data(), m.size()}}, {}, what.str());
  };
  // The variables to every worker of `to` at once (all of them when
  // synchronous); a reply carries the staleness of the update it answers.
  auto sendVariables = [&](llvm::ArrayRef<unsigned> to, uint64_t staleness) -> llvm::Error {
    PsHeader h;
    h.kind = (uint32_t)PsKind::Vars;
    h.version = version;
    h.staleness = staleness;
    setHeader(reply, h);
    std::vector<Workers::Message> sends;
    for (unsigned w : to)
      sends.push_back({w, kReplyTag, reply.data(), reply.size()});
    std::string who = to.size() == 1 ? "worker " + std::to_string(to[0]) : "the workers";
    return workers_.exchange(sends, {}, "sending " + me + "'s variables to " + who);
  };
  auto noteToChief = [&]() -> llvm::Error {
    if (finalFor < 0)
      return llvm::Error::success();
    std::vector<char> note = messageBuffer(0);
    PsHeader h;
    h.kind = (uint32_t)PsKind::Note;
    h.version = version;
    setHeader(note, h);
    return send((unsigned)finalFor, note, "telling the chief the run goes on");
  };
  auto sendState = [&](unsigned worker, bool final) -> llvm::Error {
    PsHeader h;
    h.kind = (uint32_t)PsKind::State;
    h.version = version;
    if (final) {
      h.updates = stats.updates;
      h.staleness = stats.maxStaleness;
      h.meanStaleness = stats.meanStaleness;
    }
    setHeader(state, h);
    if (auto e = packState(valuesOf(state)))
      return e;
    return send(worker, state, "sending " + me + "'s state to the chief");
  };
  auto applied = [&](uint64_t staleness) {
    ++version;
    ++stats.updates;
    stats.maxStaleness = std::max(stats.maxStaleness, staleness);
    stalenessSum += (double)staleness;
    stats.meanStaleness = stalenessSum / (double)stats.updates;
  };

  while (finished < W) {
    // The workers this task waits for: every one still training, but when
    // synchronous not those whose gradients of the step are in. The one
    // silent longest sets the deadline; the message names them all.
    std::vector<unsigned> expected;
    for (unsigned w = 0; w < W; ++w)
      if (!done[w] && (options_.async || !inRound[w]))
        expected.push_back(w);
    assert(!expected.empty() && "a round waits for no worker");
    llvm::stable_sort(expected, [&](unsigned a, unsigned b) { return lastSeen[a] < lastSeen[b]; });
    std::vector<std::string> silent;
    for (unsigned w : expected)
      silent.push_back("worker " + std::to_string(w) + " (" +
                       (lastStep[w] < 0 ? std::string("nothing heard yet")
                                        : "last heard after step " + std::to_string(lastStep[w])) +
                       ")");
    const std::string waiting = me + " waiting for the gradients of " + llvm::join(silent, " and ");
    const Clock::time_point deadline = lastSeen[expected.front()] + workers_.timeout();
    // Others' messages must not hide a silent worker (asynchronous tasks).
    if (Clock::now() > deadline)
      return makeError(waiting + " did not complete within " + secondsText(workers_.timeout()) +
                       " s: worker " + llvm::Twine(expected.front()) +
                       " died or stalled (--collective-timeout); ending every rank");
    Workers::Message in{0, kRequestTag, request.data(), request.size()};
    if (auto e = workers_.receiveAny(in, deadline, waiting))
      return e;
    PsHeader h = headerOf(request);
    const unsigned w = in.rank;
    if (w >= W || in.received < sizeof(PsHeader))
      return makeError(me + " got " + llvm::Twine((uint64_t)in.received) + " bytes from rank " +
                       llvm::Twine(w) + ", which is no worker's request");
    lastSeen[w] = Clock::now();
    if ((PsKind)h.kind == PsKind::Grads)
      workers_.setStep(h.step); // for messages
    if (done[w])
      return makeError(me + " got " + kindName(h.kind) + " from worker " + llvm::Twine(w) +
                       " after its end");
    switch ((PsKind)h.kind) {
    case PsKind::Grads: {
      if (in.received != request.size())
        return makeError(me + " got " + llvm::Twine((uint64_t)in.received) +
                         " bytes of gradients from worker " + llvm::Twine(w) + ", expected " +
                         llvm::Twine((uint64_t)request.size()));
      lastStep[w] = h.step;
      if (options_.async) {
        uint64_t staleness = version - std::min(version, h.version);
        if (auto e = apply({valuesOf(request)}, options_.workerScale[w], (int64_t)version, h.lr))
          return withContext(std::move(e),
                             me + ": worker " + llvm::Twine(w) + "'s step " + llvm::Twine(h.step));
        applied(staleness);
        if (auto e = packVariables(valuesOf(reply)))
          return e;
        if (auto e = sendVariables({w}, staleness))
          return e;
        if (auto e = noteToChief())
          return e;
        break;
      }
      if (inRound[w])
        return makeError(me + ": worker " + llvm::Twine(w) + " sent step " + llvm::Twine(h.step) +
                         " before the others sent step " + llvm::Twine(roundStep));
      if (arrived == 0) {
        roundStep = h.step;
        roundLr = h.lr;
      } else if (h.step != roundStep || h.lr != roundLr) {
        return makeError(me + ": worker " + llvm::Twine(w) + " sent step " + llvm::Twine(h.step) +
                         " while the others sent step " + llvm::Twine(roundStep) +
                         " (the workers of a synchronous run are in step)");
      }
      round[w].assign(valuesOf(request), valuesOf(request) + n);
      inRound[w] = true;
      if (++arrived < W)
        break;
      std::vector<const float *> parts;
      for (unsigned k = 0; k < W; ++k)
        parts.push_back(round[k].data());
      if (auto e = apply(parts, 1.0, roundStep, roundLr))
        return withContext(std::move(e), me + ": step " + llvm::Twine(roundStep));
      applied(0);
      if (auto e = packVariables(valuesOf(reply)))
        return e;
      std::vector<unsigned> everyone(W);
      std::iota(everyone.begin(), everyone.end(), 0u);
      if (auto e = sendVariables(everyone, 0))
        return e;
      arrived = 0;
      inRound.assign(W, false);
      break;
    }
    case PsKind::Save:
      if (auto e = sendState(w, /*final=*/false))
        return e;
      break;
    case PsKind::Done:
    case PsKind::DoneFinal:
      if (arrived > 0)
        return makeError(me + ": worker " + llvm::Twine(w) + " finished while step " +
                         llvm::Twine(roundStep) + " waited for it");
      done[w] = true;
      ++finished;
      if ((PsKind)h.kind == PsKind::DoneFinal)
        finalFor = (int)w;
      break;
    default:
      return makeError(me + " got " + kindName(h.kind) + " from worker " + llvm::Twine(w) +
                       ", which it does not serve");
    }
  }
  if (finalFor >= 0)
    if (auto e = sendState((unsigned)finalFor, /*final=*/true))
      return e;
  return stats;
}

} // namespace graphc
