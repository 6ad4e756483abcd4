//===- CudaCollectives.cpp - All-reduce among GPU devices -----------------===//

#include "executor/cuda/CudaCollectives.h"

#include "executor/cuda/CudaDevice.h"
#include "executor/cuda/SumRanks.h"
#include "ir/Diagnostics.h"
#include "ir/Shards.h"
#include "kernels/cuda/CudaCheck.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

/// The bytes the views cover, for the stream's hazard tracking.
static llvm::SmallVector<ByteRange, 8> byteRanges(llvm::ArrayRef<TensorView> views) {
  llvm::SmallVector<ByteRange, 8> ranges;
  for (const TensorView &v : views)
    ranges.push_back(ByteRange::of(v.data, v.bytes()));
  return ranges;
}

llvm::Expected<std::unique_ptr<CudaCollectives>>
CudaCollectives::create(std::chrono::milliseconds timeout,
                        const std::map<std::string, std::vector<CudaDevice *>> &groups,
                        const std::set<std::string> &acrossWorkers, CrossWorkerExchange *exchange) {
  std::unique_ptr<CudaCollectives> c(new CudaCollectives(timeout));
  // In name order (a map): the groups across workers make their
  // communicators in the same order on every worker.
  for (const auto &[name, devices] : groups) {
    Group g;
    g.devices = devices;
    std::vector<int> ordinals;
    for (CudaDevice *d : devices)
      ordinals.push_back(d->ordinal());
    const bool spansWorkers = acrossWorkers.count(name) > 0;
    g.path = chooseCollectivePath(ordinals, spansWorkers ? 2 : 1);
    if (spansWorkers) {
      if (!exchange)
        return makeError("collective '" + name + "' spans workers, but this run has none");
      if (auto e = c->bindAcrossWorkers(name, g, *exchange, ordinals))
        return e;
      c->groups_[name] = std::move(g);
      continue;
    }
    if (devices.size() > (size_t)kSumMaxRanks && g.path != CollectivePath::Nccl)
      return makeError("collective '" + name + "' has " + llvm::Twine(devices.size()) +
                       " ranks sharing GPUs; the own reduction takes at most " +
                       llvm::Twine(kSumMaxRanks));
    if (g.path == CollectivePath::PeerKernel) {
      for (size_t r = 1; r < devices.size(); ++r)
        if (!CudaDevice::peerAccess(ordinals[0], ordinals[r]))
          return makeError(
              "collective '" + name + "': its ranks share GPUs (physical GPUs " +
              llvm::join(llvm::map_range(ordinals, [](int o) { return std::to_string(o); }), ", ") +
              "), which NCCL refuses, and GPU " + llvm::Twine(ordinals[0]) +
              " cannot address GPU " + llvm::Twine(ordinals[r]) +
              " (no peer access) for the own reduction; map the plan's GPUs one per "
              "physical GPU or all onto one");
    }
    if (g.path == CollectivePath::Nccl) {
      if (!c->nccl_) {
        auto api = loadNccl();
        if (!api)
          return withContext(api.takeError(), "collective '" + name + "'");
        c->nccl_ = *api;
      }
      auto [it, fresh] = c->commSets_.try_emplace(ordinals);
      if (fresh) {
        it->second.assign(ordinals.size(), nullptr);
        GRAPHC_NCCL_TRY(
            *c->nccl_, nullptr,
            c->nccl_->ncclCommInitAll(it->second.data(), (int)ordinals.size(), ordinals.data()));
        // A failing peer (NCCL's asynchronous error) ends the device's wait.
        for (size_t r = 0; r < devices.size(); ++r) {
          ncclComm_t comm = it->second[r];
          const NcclApi *api = c->nccl_;
          std::atomic<bool> *broken = &c->broken_;
          std::string what = "NCCL communicator of " + devices[r]->name();
          devices[r]->addWaitCheck([api, comm, broken, what]() -> llvm::Error {
            ncclResult_t async = ncclSuccess;
            if (api->ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess ||
                async == ncclInProgress)
              return llvm::Error::success();
            broken->store(true);
            return makeError(what + " failed: " + api->ncclGetErrorString(async));
          });
        }
      }
      g.comms = it->second;
    }
    c->groups_[name] = std::move(g);
  }
  return c;
}

llvm::Error CudaCollectives::bindAcrossWorkers(llvm::StringRef name, Group &g,
                                               CrossWorkerExchange &exchange,
                                               llvm::ArrayRef<int> ordinals) {
  // Collective: a worker whose ranks share a GPU fails every worker.
  auto layout = NcclAcrossWorkers::layoutOf(exchange, name, ordinals);
  if (!layout)
    return layout.takeError();
  if (!nccl_) {
    auto api = loadNccl();
    if (!api)
      return withContext(api.takeError(), "collective '" + name + "'");
    nccl_ = *api;
  }
  auto [it, fresh] = workerComms_.try_emplace(layout->second);
  if (fresh) {
    auto comms = NcclAcrossWorkers::create(*nccl_, exchange, name, layout->first, ordinals);
    if (!comms) {
      workerComms_.erase(it);
      return comms.takeError();
    }
    it->second = std::move(*comms);
    NcclAcrossWorkers *across = it->second.get();
    for (unsigned r = 0; r < g.devices.size(); ++r)
      g.devices[r]->addWaitCheck([across, r] { return across->check(r); });
  }
  g.workers = it->second.get();
  return llvm::Error::success();
}

CudaCollectives::~CudaCollectives() {
  reset();
  if (!nccl_)
    return;
  for (auto &[ordinals, comms] : commSets_)
    for (ncclComm_t comm : comms)
      if (comm) {
        // A communicator with work that never finished would block destroy.
        if (broken_.load())
          nccl_->ncclCommAbort(comm);
        else
          nccl_->ncclCommDestroy(comm);
      }
}

CollectivePath CudaCollectives::path(llvm::StringRef group) const {
  auto it = groups_.find(group.str());
  return it == groups_.end() ? CollectivePath::SharedGpu : it->second.path;
}

void CudaCollectives::abort() {
  rendezvous_.abort();
  // Work that may never finish: abort the communicators at the end.
  broken_.store(true);
  for (auto &[key, comms] : workerComms_)
    comms->markBroken();
}

void CudaCollectives::reset() {
  rendezvous_.reset();
  std::lock_guard<std::mutex> lock(tokensMutex_);
  for (auto &t : tokens_) {
    if (t->ready)
      t->device->events().release(t->ready);
    if (t->done)
      t->device->events().release(t->done);
  }
  tokens_.clear();
}

CudaCollectives::Token *CudaCollectives::newToken(CudaDevice &d) {
  std::lock_guard<std::mutex> lock(tokensMutex_);
  tokens_.push_back(std::make_unique<Token>());
  tokens_.back()->device = &d;
  return tokens_.back().get();
}

llvm::Error CudaCollectives::ncclAllReduce(Group &g, unsigned rank,
                                           llvm::ArrayRef<TensorView> inputs,
                                           llvm::ArrayRef<TensorView> outputs,
                                           cudaStream_t stream) {
  const NcclApi &api = *nccl_;
  ncclComm_t comm = g.comms[rank];
  GRAPHC_NCCL_TRY(api, comm, api.ncclGroupStart());
  for (size_t t = 0; t < inputs.size(); ++t) {
    ncclResult_t r =
        api.ncclAllReduce(inputs[t].data, outputs[t].data, (size_t)inputs[t].numElements(),
                          ncclFloat32, ncclSum, comm, stream);
    if (r != ncclSuccess) {
      api.ncclGroupEnd();
      return ncclCallError(api, r, comm, "ncclAllReduce", __FILE__, __LINE__);
    }
  }
  GRAPHC_NCCL_TRY(api, comm, api.ncclGroupEnd());
  return llvm::Error::success();
}

llvm::Error CudaCollectives::ownAllReduce(llvm::StringRef name, const RendezvousMeeting &m,
                                          unsigned rank, cudaStream_t stream, Token &mine) {
  if (rank != 0) {
    auto done =
        rendezvous_.awaitPublished(name, m.sequence, rank, "rank 0 to enqueue the reduction");
    if (!done)
      return done.takeError();
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(*done), 0));
    return llvm::Error::success();
  }
  const unsigned nranks = m.arrivals.size();
  for (unsigned r = 1; r < nranks; ++r)
    GRAPHC_CUDA_TRY(
        cudaStreamWaitEvent(stream, static_cast<Token *>(m.arrivals[r].token)->ready, 0));
  const auto &first = m.arrivals[0].inputs;
  for (size_t t0 = 0; t0 < first.size(); t0 += kSumMaxTensors) {
    SumRanksBatch b;
    b.ranks = (int)nranks;
    b.tensors = (int)std::min<size_t>(kSumMaxTensors, first.size() - t0);
    for (int t = 0; t < b.tensors; ++t) {
      b.count[t] = first[t0 + t].numElements();
      for (unsigned r = 0; r < nranks; ++r) {
        b.in[t][r] = m.arrivals[r].inputs[t0 + t].as<const float>();
        b.out[t][r] = m.arrivals[r].outputs[t0 + t].as<float>();
      }
    }
    GRAPHC_CUDA_TRY(launchSumRanks(b, stream));
  }
  auto done = mine.device->events().acquire();
  if (!done)
    return done.takeError();
  mine.done = *done;
  GRAPHC_CUDA_TRY(cudaEventRecord(mine.done, stream));
  rendezvous_.publish(name, m.sequence, mine.done);
  return llvm::Error::success();
}

llvm::Error CudaCollectives::allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                                       llvm::ArrayRef<TensorView> inputs,
                                       llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                       Device &device) {
  auto m = member(group, rank, what, device);
  if (!m)
    return m.takeError();
  auto [gp, d] = *m;
  Group &g = *gp;
  auto stream = d->beginOperation(CudaStream::Collective, byteRanges(inputs), byteRanges(outputs),
                                  "collective '" + group.str() + "' (" +
                                      collectivePathName(g.path).str() + ")");
  if (!stream)
    return stream.takeError();
  Token *token = nullptr;
  const bool nccl = g.path == CollectivePath::Nccl || g.path == CollectivePath::NcclAcrossWorkers;
  if (!nccl) {
    token = newToken(*d);
    auto ready = d->events().acquire();
    if (!ready)
      return ready.takeError();
    token->ready = *ready;
    GRAPHC_CUDA_TRY(cudaEventRecord(token->ready, *stream));
  }
  RendezvousArrival arrival;
  arrival.inputs.assign(inputs.begin(), inputs.end());
  arrival.outputs.assign(outputs.begin(), outputs.end());
  arrival.caller = what.str();
  arrival.kind = "AllReduce";
  arrival.token = token;
  auto meeting = rendezvous_.arrive(group, rank, nranks, std::move(arrival));
  if (!meeting)
    return meeting.takeError();
  llvm::Error err = g.workers ? g.workers->allReduce(rank, group, inputs, outputs, *stream)
                    : nccl    ? ncclAllReduce(g, rank, inputs, outputs, *stream)
                              : ownAllReduce(group, *meeting, rank, *stream, *token);
  return finish(group, meeting->sequence, rank, std::move(err), *d);
}

llvm::Error CudaCollectives::finish(llvm::StringRef group, uint64_t sequence, unsigned rank,
                                    llvm::Error err, CudaDevice &d) {
  rendezvous_.leave(group, sequence);
  if (err)
    return withContext(std::move(err), "collective '" + group + "' #" + llvm::Twine(sequence) +
                                           " rank " + llvm::Twine(rank));
  return d.endOperation(CudaStream::Collective);
}

llvm::Expected<std::pair<CudaCollectives::Group *, CudaDevice *>>
CudaCollectives::member(llvm::StringRef group, unsigned rank, llvm::StringRef what,
                        Device &device) {
  auto git = groups_.find(group.str());
  if (git == groups_.end())
    return makeError("collective '" + group + "' was not bound to the CUDA engine (" + what + ")");
  Group &g = git->second;
  auto *d = dynamic_cast<CudaDevice *>(&device);
  if (!d || rank >= g.devices.size() || g.devices[rank] != d)
    return makeError("collective '" + group + "': " + what + " calls as rank " + llvm::Twine(rank) +
                     " from a device that is not that rank's");
  return std::pair<Group *, CudaDevice *>{&g, d};
}

llvm::Error
CudaCollectives::shardedCall(llvm::StringRef group, unsigned rank, unsigned nranks,
                             llvm::ArrayRef<TensorView> reads, llvm::ArrayRef<TensorView> writes,
                             llvm::StringRef what, Device &device, llvm::StringRef op,
                             llvm::function_ref<llvm::Error(ncclComm_t, cudaStream_t)> enqueue) {
  auto m = member(group, rank, what, device);
  if (!m)
    return m.takeError();
  auto [gp, d] = *m;
  Group &g = *gp;
  if (g.path != CollectivePath::Nccl)
    return makeError("collective '" + group + "' (" + op + ", " + what + ") takes the " +
                     collectivePathName(g.path) + " path, which has no " + op +
                     "; sharded optimizer state needs one GPU per rank in one process");
  auto stream = d->beginOperation(CudaStream::Collective, byteRanges(reads), byteRanges(writes),
                                  "collective '" + group.str() + "' (" + op.str() + ")");
  if (!stream)
    return stream.takeError();
  RendezvousArrival arrival;
  arrival.inputs.assign(reads.begin(), reads.end());
  arrival.outputs = arrival.inputs; // the shapes every rank must agree on
  arrival.caller = what.str();
  auto meeting = rendezvous_.arrive(group, rank, nranks, std::move(arrival));
  if (!meeting)
    return meeting.takeError();
  const NcclApi &api = *nccl_;
  ncclComm_t comm = g.comms[rank];
  llvm::Error err = [&]() -> llvm::Error {
    GRAPHC_NCCL_TRY(api, comm, api.ncclGroupStart());
    if (auto e = enqueue(comm, *stream)) {
      api.ncclGroupEnd();
      return e;
    }
    GRAPHC_NCCL_TRY(api, comm, api.ncclGroupEnd());
    return llvm::Error::success();
  }();
  return finish(group, meeting->sequence, rank, std::move(err), *d);
}

llvm::Error CudaCollectives::reduceScatter(llvm::StringRef group, unsigned rank, unsigned nranks,
                                           llvm::ArrayRef<TensorView> inputs,
                                           llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                           Device &device) {
  return shardedCall(
      group, rank, nranks, inputs, outputs, what, device, "ReduceScatter",
      [&](ncclComm_t comm, cudaStream_t stream) -> llvm::Error {
        const NcclApi &api = *nccl_;
        for (size_t t = 0; t < inputs.size(); ++t) {
          const int64_t n = inputs[t].numElements();
          const float *in = inputs[t].as<const float>();
          if (n % nranks == 0) {
            GRAPHC_NCCL_TRY(api, comm,
                            api.ncclReduceScatter(in, outputs[t].data, (size_t)(n / nranks),
                                                  ncclFloat32, ncclSum, comm, stream));
            continue;
          }
          // Uneven pieces: rank r is the root of its own piece's sum.
          for (unsigned r = 0; r < nranks; ++r) {
            ShardRange piece = shardRange(n, r, nranks);
            GRAPHC_NCCL_TRY(api, comm,
                            api.ncclReduce(in + piece.begin, r == rank ? outputs[t].data : nullptr,
                                           (size_t)piece.size(), ncclFloat32, ncclSum, (int)r, comm,
                                           stream));
          }
        }
        return llvm::Error::success();
      });
}

llvm::Error CudaCollectives::allGather(llvm::StringRef group, unsigned rank, unsigned nranks,
                                       const TensorView &whole, llvm::StringRef what,
                                       Device &device) {
  return shardedCall(group, rank, nranks, whole, whole, what, device, "AllGather",
                     [&](ncclComm_t comm, cudaStream_t stream) -> llvm::Error {
                       const NcclApi &api = *nccl_;
                       const int64_t n = whole.numElements();
                       float *all = whole.as<float>();
                       if (n % nranks == 0) { // in place: rank r's piece is where it belongs
                         const size_t count = (size_t)(n / nranks);
                         GRAPHC_NCCL_TRY(api, comm,
                                         api.ncclAllGather(all + rank * count, all, count,
                                                           ncclFloat32, comm, stream));
                         return llvm::Error::success();
                       }
                       for (unsigned r = 0; r < nranks; ++r) {
                         ShardRange piece = shardRange(n, r, nranks);
                         GRAPHC_NCCL_TRY(api, comm,
                                         api.ncclBroadcast(all + piece.begin, all + piece.begin,
                                                           (size_t)piece.size(), ncclFloat32,
                                                           (int)r, comm, stream));
                       }
                       return llvm::Error::success();
                     });
}

} // namespace graphc
