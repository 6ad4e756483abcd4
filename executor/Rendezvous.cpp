//===- Rendezvous.cpp - Where a collective's ranks meet on the host -------===//

#include "executor/Rendezvous.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

#include <cassert>

namespace graphc {

static std::string shapesOf(llvm::ArrayRef<TensorView> views) {
  std::vector<std::string> s;
  for (const TensorView &v : views)
    s.push_back(toString(TensorType(v.dtype, v.shape)));
  return llvm::join(s, ", ");
}

llvm::Error Rendezvous::aborted(llvm::StringRef group, uint64_t seq, unsigned rank) const {
  return makeError("collective '" + group + "' #" + llvm::Twine(seq) + " rank " +
                   llvm::Twine(rank) + ": aborted because another device failed");
}

llvm::Error Rendezvous::timedOut(const Group &g, const Call &c, llvm::StringRef group, uint64_t seq,
                                 unsigned rank, llvm::StringRef phase) const {
  std::vector<std::string> missing;
  for (unsigned r = 0; r < g.nranks; ++r)
    if (!c.present[r])
      missing.push_back(std::to_string(r));
  return makeError(
      "collective '" + group + "' (" + c.arrivals[rank].kind + ") #" + llvm::Twine(seq) +
      ": rank " +
      llvm::Twine(rank) + " waited " + llvm::Twine((int64_t)timeout_.count()) + " ms to " + phase +
      "; ranks not arrived: " +
      (missing.empty() ? std::string("none") : llvm::join(missing, ", ")) +
      "; its tensors: " + (c.present[rank] ? shapesOf(c.arrivals[rank].inputs) : std::string("?")));
}

llvm::Error Rendezvous::checkTensors(const Call &c, llvm::StringRef group, uint64_t seq) {
  const std::vector<TensorView> &first = c.arrivals[0].inputs;
  for (unsigned r = 0; r < c.arrivals.size(); ++r) {
    const std::vector<TensorView> &mine = c.arrivals[r].inputs, &outs = c.arrivals[r].outputs;
    bool same = mine.size() == first.size() && outs.size() == mine.size();
    for (size_t t = 0; same && t < mine.size(); ++t)
      same = mine[t].shape == first[t].shape && mine[t].dtype == DType::F32 &&
             outs[t].shape == mine[t].shape && outs[t].dtype == DType::F32;
    if (!same)
      return makeError("collective '" + group + "' #" + llvm::Twine(seq) + ": " +
                       c.arrivals[r].caller + " (rank " + llvm::Twine(r) + ") brings [" +
                       shapesOf(mine) + "], " + c.arrivals[0].caller + " (rank 0) brings [" +
                       shapesOf(first) + "] (f32 required)");
  }
  return llvm::Error::success();
}

Rendezvous::Group &Rendezvous::known(llvm::StringRef group) {
  auto it = groups_.find(group);
  assert(it != groups_.end() && "a rank arrives in a group before anything else");
  return it->second;
}

llvm::Expected<RendezvousMeeting> Rendezvous::arrive(llvm::StringRef group, unsigned rank,
                                                     unsigned nranks, RendezvousArrival arrival) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = groups_.find(group);
  if (it == groups_.end())
    it = groups_.emplace(group.str(), Group()).first;
  Group &g = it->second;
  if (g.nranks == 0) {
    g.nranks = nranks;
    g.next.assign(nranks, 0);
  }
  if (g.nranks != nranks || rank >= nranks)
    return makeError("collective '" + group + "': " + arrival.caller + " says rank " +
                     llvm::Twine(rank) + " of " + llvm::Twine(nranks) + ", the group has " +
                     llvm::Twine(g.nranks));
  if (aborted_)
    return aborted(group, g.next[rank], rank);
  uint64_t seq = g.next[rank]++;
  Call &c = g.calls[seq];
  if (c.arrivals.empty()) {
    c.arrivals.resize(nranks);
    c.present.assign(nranks, false);
  }
  c.arrivals[rank] = std::move(arrival);
  c.present[rank] = true;
  if (++c.arrived == nranks)
    cv_.notify_all();
  else if (!cv_.wait_for(lock, timeout_, [&] { return aborted_ || c.arrived == nranks; }))
    return timedOut(g, c, group, seq, rank, "arrive");
  if (aborted_)
    return aborted(group, seq, rank);
  if (auto e = checkTensors(c, group, seq))
    return e;
  return RendezvousMeeting{seq, c.arrivals};
}

bool Rendezvous::finishShare(llvm::StringRef group, uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mutex_);
  Group &g = known(group);
  return ++g.calls[sequence].finished == g.nranks;
}

void Rendezvous::publish(llvm::StringRef group, uint64_t sequence, void *value) {
  std::lock_guard<std::mutex> lock(mutex_);
  Call &c = known(group).calls[sequence];
  c.published = value;
  c.hasPublished = true;
  cv_.notify_all();
}

llvm::Expected<void *> Rendezvous::awaitPublished(llvm::StringRef group, uint64_t sequence,
                                                  unsigned rank, llvm::StringRef publisher) {
  std::unique_lock<std::mutex> lock(mutex_);
  Group &g = known(group);
  Call &c = g.calls[sequence];
  if (!cv_.wait_for(lock, timeout_, [&] { return aborted_ || c.hasPublished; }))
    return makeError("collective '" + group + "' (" + c.arrivals[rank].kind + ") #" +
                     llvm::Twine(sequence) + ": rank " + llvm::Twine(rank) + " waited " +
                     llvm::Twine((int64_t)timeout_.count()) + " ms for " + publisher);
  if (aborted_)
    return aborted(group, sequence, rank);
  return c.published;
}

bool Rendezvous::leave(llvm::StringRef group, uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mutex_);
  Group &g = known(group);
  auto it = g.calls.find(sequence);
  if (it == g.calls.end() || ++it->second.left != g.nranks)
    return false;
  g.calls.erase(it);
  return true;
}

void Rendezvous::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void Rendezvous::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = false;
  for (auto &[name, g] : groups_) {
    g.calls.clear();
    uint64_t next = 0;
    for (uint64_t n : g.next)
      next = std::max(next, n);
    g.next.assign(g.nranks, next);
  }
}

} // namespace graphc
