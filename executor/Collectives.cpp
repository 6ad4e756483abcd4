#include "executor/Collectives.h"

#include "executor/Device.h"
#include "ir/Diagnostics.h"
#include "ir/Shards.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace graphc {

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
  across_ = across;
  acrossGroups_.insert(groups.begin(), groups.end());
}

void CpuCollectives::abort() {
  rendezvous_.abort();
}

void CpuCollectives::reset() {
  rendezvous_.reset();
}

namespace {

/// Rank `rank`'s slice of every tensor, summed over the ranks in rank order
/// into every rank's outputs.
void sumSlice(const RendezvousMeeting &m, unsigned rank) {
  const unsigned nranks = m.arrivals.size();
  const std::vector<TensorView> &first = m.arrivals[0].inputs;
  // In chunks, each summed in rank order into a buffer before any output is
  // written (an output may be its rank's input).
  constexpr int64_t kChunk = 4096;
  float sum[kChunk];
  for (size_t t = 0; t < first.size(); ++t) {
    if (nranks == 1) { // a sum of one: a copy, or nothing in place
      const TensorView &in = first[t], &out = m.arrivals[0].outputs[t];
      if (out.data != in.data)
        std::memcpy(out.data, in.data, in.bytes());
      continue;
    }
    const int64_t n = first[t].numElements();
    const int64_t lo = n * rank / nranks, hi = n * (rank + 1) / nranks;
    for (int64_t at = lo; at < hi; at += kChunk) {
      const int64_t len = std::min(kChunk, hi - at);
      std::fill(sum, sum + len, 0.0f);
      for (const RendezvousArrival &a : m.arrivals) {
        const float *x = a.inputs[t].as<float>() + at;
        for (int64_t i = 0; i < len; ++i)
          sum[i] += x[i];
      }
      for (const RendezvousArrival &a : m.arrivals)
        std::memcpy(a.outputs[t].as<float>() + at, sum, len * sizeof(float));
    }
  }
}

} // namespace

llvm::Error CpuCollectives::complete(llvm::StringRef group, const RendezvousMeeting &m,
                                     llvm::StringRef what) {
  if (!acrossGroups_.count(group))
    return llvm::Error::success();
  // Every slice is summed here: add the other workers' sums.
  const std::vector<TensorView> &sum = m.arrivals[0].outputs;
  {
    StepClock::Scope across(clock_, StepPart::InterWorker);
    if (auto e = across_->allReduceSum(group, sum, what))
      return e;
  }
  for (size_t r = 1; r < m.arrivals.size(); ++r)
    for (size_t t = 0; t < sum.size(); ++t)
      std::memcpy(m.arrivals[r].outputs[t].data, sum[t].data, sum[t].bytes());
  return llvm::Error::success();
}

llvm::Error CollectiveEngine::reduceScatter(llvm::StringRef group, unsigned, unsigned,
                                            llvm::ArrayRef<TensorView>, llvm::ArrayRef<TensorView>,
                                            llvm::StringRef what, Device &device) {
  return makeError("collective '" + group + "' (ReduceScatter, " + what +
                   "): this path has no reduce-scatter on " + device.name() +
                   " (sharded optimizer state needs NCCL, one GPU per rank, or host devices)");
}

llvm::Error CollectiveEngine::allGather(llvm::StringRef group, unsigned, unsigned,
                                        const TensorView &, llvm::StringRef what, Device &device) {
  return makeError("collective '" + group + "' (AllGather, " + what +
                   "): this path has no all-gather on " + device.name() +
                   " (sharded optimizer state needs NCCL, one GPU per rank, or host devices)");
}

llvm::Error CpuCollectives::allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                                      llvm::ArrayRef<TensorView> inputs,
                                      llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                      Device &) {
  RendezvousArrival arrival;
  arrival.inputs.assign(inputs.begin(), inputs.end());
  arrival.outputs.assign(outputs.begin(), outputs.end());
  arrival.kind = "AllReduce";
  return meet(
      group, rank, nranks, std::move(arrival), what,
      [&](const RendezvousMeeting &m) { sumSlice(m, rank); }, true);
}

llvm::Error CpuCollectives::reduceScatter(llvm::StringRef group, unsigned rank, unsigned nranks,
                                          llvm::ArrayRef<TensorView> inputs,
                                          llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                          Device &) {
  if (acrossGroups_.count(group))
    return makeError("collective '" + group + "' (ReduceScatter, " + what +
                     ") spans workers, which sharded optimizer state does not");
  // The rendezvous checks that every rank brings the same shapes: each
  // brings its whole inputs (its outputs are its own pieces, written here).
  RendezvousArrival arrival;
  arrival.inputs.assign(inputs.begin(), inputs.end());
  arrival.outputs = arrival.inputs;
  arrival.kind = "ReduceScatter";
  return meet(
      group, rank, nranks, std::move(arrival), what,
      [&](const RendezvousMeeting &m) {
        // Each element summed from 0 in rank order, as sumSlice does.
        for (size_t t = 0; t < inputs.size(); ++t) {
          ShardRange piece = shardRange(inputs[t].numElements(), rank, nranks);
          assert(outputs[t].numElements() == piece.size() && "a piece per rank");
          float *out = outputs[t].as<float>();
          std::fill(out, out + piece.size(), 0.0f);
          for (const RendezvousArrival &a : m.arrivals) {
            const float *x = a.inputs[t].as<const float>() + piece.begin;
            for (int64_t i = 0; i < piece.size(); ++i)
              out[i] += x[i];
          }
        }
      },
      false);
}

llvm::Error CpuCollectives::allGather(llvm::StringRef group, unsigned rank, unsigned nranks,
                                      const TensorView &whole, llvm::StringRef what, Device &) {
  if (acrossGroups_.count(group))
    return makeError("collective '" + group + "' (AllGather, " + what +
                     ") spans workers, which sharded optimizer state does not");
  RendezvousArrival arrival;
  arrival.inputs = {whole};
  arrival.outputs = {whole};
  arrival.kind = "AllGather";
  return meet(
      group, rank, nranks, std::move(arrival), what,
      [&](const RendezvousMeeting &m) {
        ShardRange piece = shardRange(whole.numElements(), rank, nranks);
        const float *mine = whole.as<const float>() + piece.begin;
        for (unsigned r = 0; r < m.arrivals.size(); ++r)
          if (r != rank)
            std::memcpy(m.arrivals[r].outputs[0].as<float>() + piece.begin, mine,
                        piece.size() * sizeof(float));
      },
      false);
}

llvm::Error CpuCollectives::meet(llvm::StringRef group, unsigned rank, unsigned nranks,
                                 RendezvousArrival arrival, llvm::StringRef what,
                                 llvm::function_ref<void(const RendezvousMeeting &)> share,
                                 bool acrossWorkers) {
  arrival.caller = what.str();
  auto meeting = rendezvous_.arrive(group, rank, nranks, std::move(arrival));
  if (!meeting)
    return meeting.takeError();
  const uint64_t seq = meeting->sequence;
  share(*meeting);
  // The last rank to finish its share completes the call; the others return
  // once it has, so that every rank's outputs hold the whole result. A failed
  // completion publishes nothing: the executor aborts the waiting ranks.
  if (rendezvous_.finishShare(group, seq)) {
    if (acrossWorkers)
      if (auto e = complete(group, *meeting, what))
        return e;
    rendezvous_.publish(group, seq, nullptr);
  } else if (auto done =
                 rendezvous_.awaitPublished(group, seq, rank, "every rank to finish its share");
             !done) {
    return done.takeError();
  }
  rendezvous_.leave(group, seq);
  return llvm::Error::success();
}

} // namespace graphc
