#include "executor/Collectives.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>

namespace graphc {

static std::string shapesOf(llvm::ArrayRef<TensorView> views) {
  std::vector<std::string> s;
  for (const TensorView &v : views)
    s.push_back(toString(TensorType(v.dtype, v.shape)));
  return llvm::join(s, ", ");
}

llvm::Expected<GroupBinding> bindGroup(llvm::StringRef group, llvm::ArrayRef<DeviceKind> members,
                                       int64_t workers, const CrossWorkerReducer *host,
                                       const CrossWorkerExchange *gpu) {
  bool anyGpu = false, anyCpu = false;
  for (DeviceKind k : members)
    (k == DeviceKind::CPU ? anyCpu : anyGpu) = true;
  if (anyGpu && anyCpu)
    return makeError("collective '" + group +
                     "' spans host and GPU devices; insert transfers so that all members are "
                     "on one kind");
  GroupBinding b;
  b.engine = anyGpu ? DeviceKind::GPU : DeviceKind::CPU;
  if (workers <= 1)
    return b;
  // The host path sums with the reducer, the GPU path builds its NCCL
  // communicator through the exchange: each needs its own.
  unsigned have = anyGpu ? (gpu ? gpu->numWorkers() : 0) : (host ? host->numWorkers() : 0);
  if (have == 0)
    return makeError("collective '" + group + "' spans " + llvm::Twine(workers) +
                     " workers, but this process runs alone (start the plan's workers with "
                     "mpirun)");
  if (have != workers)
    return makeError("collective '" + group + "' spans " + llvm::Twine(workers) +
                     " workers, but this run has " + llvm::Twine(have));
  b.across = anyGpu ? AcrossWorkers::Nccl : AcrossWorkers::Mpi;
  return b;
}

void CpuCollectives::reduceAcrossWorkers(CrossWorkerReducer *across,
                                         llvm::ArrayRef<std::string> groups) {
  std::lock_guard<std::mutex> lock(mutex_);
  across_ = across;
  acrossGroups_.insert(groups.begin(), groups.end());
}

void CpuCollectives::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void CpuCollectives::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = false;
  for (auto &[name, g] : groups_) {
    g.arrived = g.finished = 0;
    for (auto &v : g.inputs)
      v.clear();
    for (auto &v : g.outputs)
      v.clear();
  }
}

llvm::Error CpuCollectives::waitFor(std::unique_lock<std::mutex> &lock, Group &g, uint64_t seq,
                                    const std::function<bool()> &done, llvm::StringRef group,
                                    unsigned rank, llvm::StringRef phase) {
  if (cv_.wait_for(lock, timeout_, [&] { return aborted_ || done(); })) {
    if (aborted_)
      return makeError("collective '" + group + "' #" + llvm::Twine(seq) + " rank " +
                       llvm::Twine(rank) + ": aborted because another device failed");
    return llvm::Error::success();
  }
  std::vector<std::string> missing;
  for (unsigned r = 0; r < g.nranks; ++r)
    if (g.inputs[r].empty() && phase == "arrive")
      missing.push_back(std::to_string(r));
  return makeError("collective '" + group + "' (AllReduce) #" + llvm::Twine(seq) + ": rank " +
                   llvm::Twine(rank) + " waited " + llvm::Twine(timeout_.count()) + " ms to " + phase + "; ranks not arrived: " +
                   (missing.empty() ? std::string("none") : llvm::join(missing, ", ")) +
                   "; its tensors: " + shapesOf(g.inputs[rank]));
}

llvm::Error CpuCollectives::allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                                      llvm::ArrayRef<TensorView> inputs,
                                      llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                      Device &) {
  std::unique_lock<std::mutex> lock(mutex_);
  Group &g = groups_[group.str()];
  if (g.nranks == 0) {
    g.nranks = nranks;
    g.inputs.resize(nranks);
    g.outputs.resize(nranks);
    g.callers.resize(nranks);
  }
  if (g.nranks != nranks || rank >= nranks)
    return makeError("collective '" + group + "': " + what + " says rank " + llvm::Twine(rank) +
                     " of " + llvm::Twine(nranks) + ", the group has " + llvm::Twine(g.nranks));
  uint64_t seq = g.sequence;
  g.inputs[rank].assign(inputs.begin(), inputs.end());
  g.outputs[rank].assign(outputs.begin(), outputs.end());
  g.callers[rank] = what.str();
  if (++g.arrived == nranks)
    cv_.notify_all();
  else if (auto e = waitFor(lock, g, seq, [&] { return g.arrived == nranks || g.sequence != seq; },
                            group, rank, "arrive"))
    return e;
  // Everyone is here: check shapes against rank 0.
  for (unsigned r = 0; r < nranks; ++r) {
    bool same = g.inputs[r].size() == g.inputs[0].size();
    for (size_t t = 0; same && t < g.inputs[r].size(); ++t)
      same = g.inputs[r][t].shape == g.inputs[0][t].shape && g.inputs[r][t].dtype == DType::F32;
    if (!same)
      return makeError("collective '" + group + "' #" + llvm::Twine(seq) + ": " + g.callers[r] +
                       " (rank " + llvm::Twine(r) + ") brings [" + shapesOf(g.inputs[r]) + "], " +
                       g.callers[0] + " (rank 0) brings [" + shapesOf(g.inputs[0]) +
                       "] (f32 required)");
  }
  // Reduce this rank's slice of every tensor while others do theirs.
  std::vector<std::vector<TensorView>> in = g.inputs, out = g.outputs;
  lock.unlock();
  // In chunks, each summed in rank order into a buffer before any output is
  // written (an output may be its rank's input).
  constexpr int64_t kChunk = 4096;
  float sum[kChunk];
  for (size_t t = 0; t < in[0].size(); ++t) {
    int64_t n = in[0][t].numElements();
    int64_t lo = n * rank / nranks, hi = n * (rank + 1) / nranks;
    if (nranks == 1) { // a sum of one: a copy, or nothing in place
      if (out[0][t].data != in[0][t].data)
        std::memcpy(out[0][t].data, in[0][t].data, in[0][t].bytes());
      continue;
    }
    for (int64_t at = lo; at < hi; at += kChunk) {
      const int64_t len = std::min(kChunk, hi - at);
      std::fill(sum, sum + len, 0.0f);
      for (unsigned r = 0; r < nranks; ++r) {
        const float *x = in[r][t].as<float>() + at;
        for (int64_t i = 0; i < len; ++i)
          sum[i] += x[i];
      }
      for (unsigned r = 0; r < nranks; ++r)
        std::memcpy(out[r][t].as<float>() + at, sum, len * sizeof(float));
    }
  }
  lock.lock();
  if (++g.finished == nranks) {
    if (acrossGroups_.count(group)) {
      // Every slice is summed here: add the other workers' sums.
      lock.unlock();
      {
        StepClock::Scope across(clock_, StepPart::InterWorker);
        if (auto e = across_->allReduceSum(group, out[0], what))
          return e;
      }
      for (unsigned r = 1; r < nranks; ++r)
        for (size_t t = 0; t < out[0].size(); ++t)
          std::memcpy(out[r][t].data, out[0][t].data, out[0][t].bytes());
      lock.lock();
    }
    g.arrived = g.finished = 0;
    for (auto &v : g.inputs)
      v.clear();
    ++g.sequence;
    cv_.notify_all();
    return llvm::Error::success();
  }
  return waitFor(lock, g, seq, [&] { return g.sequence != seq; }, group, rank, "finish");
}

} // namespace graphc
