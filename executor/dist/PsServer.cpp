//===- PsServer.cpp - A parameter-server task -----------------------------===//

#include "executor/dist/PsServer.h"

#include "executor/dist/PsProtocol.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace graphc {

llvm::Expected<std::unique_ptr<PsServer>>
PsServer::create(MessageChannel &channel, const Module &part, unsigned task, PsLayout layout,
                 const ExecutorOptions &exec, Options options) {
  if (task >= layout.tasks())
    return makeError("ps task " + llvm::Twine(task) + " is not one of " +
                     llvm::Twine(layout.tasks()));
  if (options.async && options.workerScale.size() != channel.numWorkers())
    return makeError("asynchronous ps tasks need every worker's scale");
  if (auto e = checkPsMessageSize(
          sizeof(PsHeader) + (size_t)layout.stateValues(task) * sizeof(float), task))
    return e;
  std::unique_ptr<PsServer> s(new PsServer(channel, task, std::move(layout), std::move(options)));
  auto ex = Executor::create(part, exec);
  if (!ex)
    return ex.takeError();
  s->executor_ = std::move(*ex);
  for (const PsRoute *r : s->layout_.of(task))
    s->feeds_[r->input] = Tensor(r->type);
  return s;
}

PsServer::~PsServer() = default;

llvm::Error PsServer::apply(llvm::ArrayRef<const float *> parts, double scale, int64_t step,
                            double lr) {
  assert(!parts.empty());
  int64_t offset = 0;
  for (const PsRoute *r : layout_.of(task_)) {
    float *sum = feeds_[r->input].data<float>();
    const int64_t n = r->type.numElements();
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
  for (const PsRoute *r : layout_.of(task_)) {
    auto t = executor_->readVariable(r->var);
    if (!t)
      return t.takeError();
    std::memcpy(out, t->raw(), t->bytes());
    out += r->type.numElements();
  }
  return llvm::Error::success();
}

llvm::Error PsServer::packState(float *out) const {
  for (const PsRoute *r : layout_.of(task_)) {
    std::vector<std::string> names{r->var};
    names.insert(names.end(), r->slots.begin(), r->slots.end());
    for (const std::string &name : names) {
      auto t = executor_->readVariable(name);
      if (!t)
        return t.takeError();
      if (t->type() != r->type)
        return makeError("slot '" + name + "' is " + toString(t->type()) + ", not " +
                         toString(r->type));
      std::memcpy(out, t->raw(), t->bytes());
      out += r->type.numElements();
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The loop over the workers' requests.
//===----------------------------------------------------------------------===//

class PsServer::Serving {
public:
  explicit Serving(PsServer &server);
  llvm::Expected<PsTaskStats> run();

private:
  using Clock = std::chrono::steady_clock;
  /// The workers this task waits for: every one still training, but when
  /// synchronous not those whose gradients of the step are in; the one
  /// silent longest first, those away last.
  std::vector<unsigned> awaited() const;
  /// Waits for the next request (into request_) until the deadline of the
  /// worker silent longest that is not away (none when all are); returns
  /// its worker and size.
  llvm::Expected<std::pair<unsigned, size_t>> receive();
  /// One request of worker `w` (in request_).
  llvm::Error handle(unsigned w, const PsHeader &h, size_t received);
  llvm::Error onGradients(unsigned w, const PsHeader &h, size_t received);
  llvm::Error applyAsync(unsigned w, const PsHeader &h);
  llvm::Error joinRound(unsigned w, const PsHeader &h);
  /// Every worker's sums of the round are in: one update, every worker answered.
  llvm::Error closeRound();
  llvm::Error onDone(unsigned w, const PsHeader &h);
  void recordUpdate(uint64_t staleness);
  /// The variables to every worker of `to` at once (all of them when
  /// synchronous); a reply carries the staleness of the update it answers.
  llvm::Error sendVariables(llvm::ArrayRef<unsigned> to, uint64_t staleness);
  /// The chief waits for the final state: an update keeps its deadline moving.
  llvm::Error noteToChief();
  llvm::Error sendState(unsigned worker, bool final);
  llvm::Error send(unsigned worker, std::vector<char> &m, const llvm::Twine &what);

  PsServer &server_;
  MessageChannel &channel_;
  const unsigned workers_;
  const std::string me_;
  const int64_t values_;
  std::vector<char> request_, reply_, state_;
  // Synchronous: the round's requests, one per worker.
  std::vector<std::vector<float>> round_;
  std::vector<bool> inRound_, done_, away_;
  std::vector<int64_t> lastStep_;
  std::vector<Clock::time_point> lastSeen_;
  unsigned arrived_ = 0, finished_ = 0;
  int64_t roundStep_ = 0;
  double roundLr_ = 0;
  int finalFor_ = -1;
  uint64_t version_ = 0;
  double stalenessSum_ = 0;
  PsTaskStats stats_;
};

PsServer::Serving::Serving(PsServer &server)
    : server_(server), channel_(server.channel_), workers_(channel_.numWorkers()),
      me_(psTaskName(channel_, server.task_)), values_(server.layout_.values(server.task_)),
      request_(psMessage(values_)), reply_(psMessage(values_)),
      state_(psMessage(server.layout_.stateValues(server.task_))), round_(workers_),
      inRound_(workers_, false), done_(workers_, false), away_(workers_, false),
      lastStep_(workers_, -1),
      lastSeen_(workers_, Clock::now()) {}

llvm::Expected<PsTaskStats> PsServer::Serving::run() {
  while (finished_ < workers_) {
    auto in = receive();
    if (!in)
      return in.takeError();
    if (auto e = handle(in->first, psHeaderOf(request_), in->second))
      return e;
  }
  if (finalFor_ >= 0)
    if (auto e = sendState((unsigned)finalFor_, /*final=*/true))
      return e;
  return stats_;
}

llvm::Error PsServer::Serving::handle(unsigned w, const PsHeader &h, size_t received) {
  switch ((PsKind)h.kind) {
  case PsKind::Grads:
    return onGradients(w, h, received);
  case PsKind::Save:
    return sendState(w, /*final=*/false);
  case PsKind::Away:
    away_[w] = true;
    return llvm::Error::success();
  case PsKind::Done:
  case PsKind::DoneFinal:
    return onDone(w, h);
  default:
    return makeError(me_ + " got " + psKindName(h.kind) + " from worker " + llvm::Twine(w) +
                     ", which it does not serve");
  }
}

std::vector<unsigned> PsServer::Serving::awaited() const {
  std::vector<unsigned> expected;
  for (unsigned w = 0; w < workers_; ++w)
    if (!done_[w] && (server_.options_.async || !inRound_[w]))
      expected.push_back(w);
  assert(!expected.empty() && "a round waits for no worker");
  llvm::stable_sort(expected, [&](unsigned a, unsigned b) {
    return std::make_pair(bool(away_[a]), lastSeen_[a]) < std::make_pair(bool(away_[b]), lastSeen_[b]);
  });
  return expected;
}

llvm::Expected<std::pair<unsigned, size_t>> PsServer::Serving::receive() {
  const std::vector<unsigned> expected = awaited();
  std::vector<std::string> silent;
  for (unsigned w : expected)
    silent.push_back("worker " + std::to_string(w) + " (" +
                     (lastStep_[w] < 0 ? std::string("nothing heard yet")
                                       : "last heard after step " + std::to_string(lastStep_[w])) +
                     (away_[w] ? ", away" : "") + ")");
  const std::string waiting = me_ + " waiting for the gradients of " + llvm::join(silent, " and ");
  // Others' messages must not hide a silent worker (asynchronous tasks). A
  // worker away (evaluating) has no deadline: it runs no exchange that could
  // stall, and mpirun ends the job if its process dies.
  const Clock::time_point deadline = away_[expected.front()]
                                         ? noDeadline()
                                         : lastSeen_[expected.front()] + channel_.timeout();
  if (Clock::now() > deadline)
    return makeError(waiting + " did not complete within " + secondsText(channel_.timeout()) +
                     " s: worker " + llvm::Twine(expected.front()) +
                     " died or stalled (--collective-timeout); ending every rank");
  Message in{0, kPsRequestTag, request_.data(), request_.size()};
  if (auto e = channel_.receiveAny(in, deadline, waiting))
    return e;
  const PsHeader h = psHeaderOf(request_);
  const unsigned w = in.rank;
  if (w >= workers_ || in.received < sizeof(PsHeader))
    return makeError(me_ + " got " + llvm::Twine((uint64_t)in.received) + " bytes from rank " +
                     llvm::Twine(w) + ", which is no worker's request");
  lastSeen_[w] = Clock::now();
  if ((PsKind)h.kind == PsKind::Grads)
    channel_.setStep(h.step); // for messages
  if ((PsKind)h.kind != PsKind::Save)
    away_[w] = false; // a state request (a checkpoint written while away) keeps it away
  if (done_[w])
    return makeError(me_ + " got " + psKindName(h.kind) + " from worker " + llvm::Twine(w) +
                     " after its end");
  return std::make_pair(w, in.received);
}

llvm::Error PsServer::Serving::onGradients(unsigned w, const PsHeader &h, size_t received) {
  if (received != request_.size())
    return makeError(me_ + " got " + llvm::Twine((uint64_t)received) +
                     " bytes of gradients from worker " + llvm::Twine(w) + ", expected " +
                     llvm::Twine((uint64_t)request_.size()));
  lastStep_[w] = h.step;
  return server_.options_.async ? applyAsync(w, h) : joinRound(w, h);
}

llvm::Error PsServer::Serving::applyAsync(unsigned w, const PsHeader &h) {
  const uint64_t staleness = version_ - std::min(version_, h.version);
  if (auto e = server_.apply({psValuesOf(request_)}, server_.options_.workerScale[w],
                             (int64_t)version_, h.lr))
    return withContext(std::move(e),
                       me_ + ": worker " + llvm::Twine(w) + "'s step " + llvm::Twine(h.step));
  recordUpdate(staleness);
  if (auto e = server_.packVariables(psValuesOf(reply_)))
    return e;
  if (auto e = sendVariables({w}, staleness))
    return e;
  return noteToChief();
}

llvm::Error PsServer::Serving::joinRound(unsigned w, const PsHeader &h) {
  if (inRound_[w])
    return makeError(me_ + ": worker " + llvm::Twine(w) + " sent step " + llvm::Twine(h.step) +
                     " before the others sent step " + llvm::Twine(roundStep_));
  if (arrived_ == 0) {
    roundStep_ = h.step;
    roundLr_ = h.lr;
  } else if (h.step != roundStep_ || h.lr != roundLr_) {
    return makeError(me_ + ": worker " + llvm::Twine(w) + " sent step " + llvm::Twine(h.step) +
                     " while the others sent step " + llvm::Twine(roundStep_) +
                     " (the workers of a synchronous run are in step)");
  }
  round_[w].assign(psValuesOf(request_), psValuesOf(request_) + values_);
  inRound_[w] = true;
  if (++arrived_ < workers_)
    return llvm::Error::success();
  return closeRound();
}

llvm::Error PsServer::Serving::closeRound() {
  std::vector<const float *> parts;
  for (unsigned k = 0; k < workers_; ++k)
    parts.push_back(round_[k].data());
  if (auto e = server_.apply(parts, 1.0, roundStep_, roundLr_))
    return withContext(std::move(e), me_ + ": step " + llvm::Twine(roundStep_));
  recordUpdate(0);
  if (auto e = server_.packVariables(psValuesOf(reply_)))
    return e;
  std::vector<unsigned> everyone(workers_);
  std::iota(everyone.begin(), everyone.end(), 0u);
  if (auto e = sendVariables(everyone, 0))
    return e;
  arrived_ = 0;
  inRound_.assign(workers_, false);
  return llvm::Error::success();
}

llvm::Error PsServer::Serving::onDone(unsigned w, const PsHeader &h) {
  if (arrived_ > 0)
    return makeError(me_ + ": worker " + llvm::Twine(w) + " finished while step " +
                     llvm::Twine(roundStep_) + " waited for it");
  done_[w] = true;
  ++finished_;
  if ((PsKind)h.kind == PsKind::DoneFinal)
    finalFor_ = (int)w;
  return llvm::Error::success();
}

void PsServer::Serving::recordUpdate(uint64_t staleness) {
  ++version_;
  ++stats_.updates;
  stats_.maxStaleness = std::max(stats_.maxStaleness, staleness);
  stalenessSum_ += (double)staleness;
  stats_.meanStaleness = stalenessSum_ / (double)stats_.updates;
}

llvm::Error PsServer::Serving::send(unsigned worker, std::vector<char> &m,
                                    const llvm::Twine &what) {
  return channel_.exchange({{worker, kPsReplyTag, m.data(), m.size()}}, {}, what.str());
}

llvm::Error PsServer::Serving::sendVariables(llvm::ArrayRef<unsigned> to, uint64_t staleness) {
  PsHeader h;
  h.kind = (uint32_t)PsKind::Vars;
  h.version = version_;
  h.staleness = staleness;
  setPsHeader(reply_, h);
  std::vector<Message> sends;
  for (unsigned w : to)
    sends.push_back({w, kPsReplyTag, reply_.data(), reply_.size()});
  std::string who = to.size() == 1 ? "worker " + std::to_string(to[0]) : "the workers";
  return channel_.exchange(sends, {}, "sending " + me_ + "'s variables to " + who);
}

llvm::Error PsServer::Serving::noteToChief() {
  if (finalFor_ < 0)
    return llvm::Error::success();
  std::vector<char> note = psMessage(0);
  PsHeader h;
  h.kind = (uint32_t)PsKind::Note;
  h.version = version_;
  setPsHeader(note, h);
  return send((unsigned)finalFor_, note, "telling the chief the run goes on");
}

llvm::Error PsServer::Serving::sendState(unsigned worker, bool final) {
  PsHeader h;
  h.kind = (uint32_t)PsKind::State;
  h.version = version_;
  if (final) {
    h.updates = stats_.updates;
    h.staleness = stats_.maxStaleness;
    h.meanStaleness = stats_.meanStaleness;
  }
  setPsHeader(state_, h);
  if (auto e = server_.packState(psValuesOf(state_)))
    return e;
  return send(worker, state_, "sending " + me_ + "'s state to the chief");
}

llvm::Expected<PsTaskStats> PsServer::serve() {
  return Serving(*this).run();
}

} // namespace graphc
