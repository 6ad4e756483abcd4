//===- NcclAcrossWorkers.cpp - One NCCL communicator over workers ---------===//

#include "executor/cuda/NcclAcrossWorkers.h"

#include "ir/Diagnostics.h"
#include "kernels/cuda/CudaCheck.h"

#include "llvm/Support/xxhash.h"

#include <thread>

namespace graphc {

namespace {

using Clock = std::chrono::steady_clock;

} // namespace

llvm::Expected<std::pair<NcclRankLayout, std::vector<uint64_t>>>
NcclAcrossWorkers::layoutOf(CrossWorkerExchange &exchange, llvm::StringRef group,
                            llvm::ArrayRef<int> ordinals) {
  // One gather: the count in the low 15 bits, whether this worker's ranks
  // share a GPU in bit 15 (so that every worker fails at once, not only this
  // one), the GPUs' hash above.
  if (ordinals.empty() || ordinals.size() >= (1u << 15))
    return makeError("collective '" + group + "' has " + llvm::Twine(ordinals.size()) +
                     " GPUs in this worker");
  const std::string refusal = acrossWorkersRefusal(group, ordinals);
  // xxHash64: the same on every process (LLVM's hash_code may be seeded).
  uint64_t gpus = llvm::xxHash64(llvm::StringRef(reinterpret_cast<const char *>(ordinals.data()),
                                                 ordinals.size() * sizeof(int)));
  uint64_t mine = (gpus << 16) | (refusal.empty() ? 0 : 0x8000) | ordinals.size();
  auto all = exchange.gather(mine, "the GPUs of collective '" + group.str() + "' on each worker");
  if (!all)
    return all.takeError();
  if (!refusal.empty())
    return makeError(refusal);
  std::vector<uint64_t> counts;
  for (size_t w = 0; w < all->size(); ++w) {
    if ((*all)[w] & 0x8000)
      return makeError("collective '" + group + "': worker " + llvm::Twine(w) +
                       "'s ranks share GPUs, which NCCL refuses (its error says which)");
    counts.push_back((*all)[w] & 0x7fff);
  }
  auto layout = ncclRankLayout(group, counts, exchange.rank());
  if (!layout)
    return layout.takeError();
  return std::make_pair(std::move(*layout), std::move(*all));
}

std::string NcclAcrossWorkers::describe(unsigned local) const {
  return "NCCL rank " + std::to_string(layout_.firstRank + local) + " of " +
         std::to_string(layout_.nranks) + " (worker " + std::to_string(layout_.worker) + " of " +
         std::to_string(layout_.perWorker.size()) + ")";
}

llvm::Expected<std::unique_ptr<NcclAcrossWorkers>>
NcclAcrossWorkers::create(const NcclApi &api, CrossWorkerExchange &exchange, llvm::StringRef group,
                          const NcclRankLayout &layout, llvm::ArrayRef<int> ordinals) {
  assert(ordinals.size() == layout.localRanks && "one ordinal per local rank");
  std::unique_ptr<NcclAcrossWorkers> c(new NcclAcrossWorkers(api, layout, exchange.timeout()));
  const std::string ranks = layout.localRanks == 1
                                ? "NCCL rank " + std::to_string(layout.firstRank)
                                : "NCCL ranks " + std::to_string(layout.firstRank) + ".." +
                                      std::to_string(layout.firstRank + layout.localRanks - 1);
  const std::string where = "collective '" + group.str() + "' (" + ranks + " of " +
                            std::to_string(layout.nranks) + ", worker " +
                            std::to_string(layout.worker) + " of " +
                            std::to_string(layout.perWorker.size()) + ")";

  // NCCL's id from worker 0; zeros when it could not make one.
  ncclUniqueId id{};
  llvm::Error idError = llvm::Error::success();
  if (layout.worker == 0) {
    ncclResult_t r = api.ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      idError = ncclCallError(api, r, nullptr, "ncclGetUniqueId", __FILE__, __LINE__);
      id = ncclUniqueId{};
    }
  }
  llvm::MutableArrayRef<uint8_t> bytes(reinterpret_cast<uint8_t *>(id.internal), sizeof(id));
  if (auto e = exchange.broadcast(bytes, "NCCL's unique id for " + where)) {
    llvm::consumeError(std::move(idError));
    return e;
  }
  if (idError)
    return withContext(std::move(idError), where);
  if (llvm::all_of(bytes, [](uint8_t b) { return b == 0; }))
    return makeError(where + ": worker 0 could not create NCCL's unique id (its error says why)");

  // Every local GPU joins in one NCCL group (NCCL needs that when a thread
  // creates several ranks); non-blocking, so the wait below is ours.
  c->locals_.resize(layout.localRanks);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  llvm::Error failed = llvm::Error::success();
  GRAPHC_NCCL_TRY(api, nullptr, api.ncclGroupStart());
  for (unsigned r = 0; r < layout.localRanks && !failed; ++r) {
    Local &l = c->locals_[r];
    l.ordinal = ordinals[r];
    cudaError_t s = cudaSetDevice(l.ordinal);
    if (s != cudaSuccess) {
      failed = cudaCallError(s, "cudaSetDevice", __FILE__, __LINE__);
      break;
    }
    ncclResult_t n = api.ncclCommInitRankConfig(&l.comm, (int)layout.nranks, id,
                                                (int)(layout.firstRank + r), &config);
    if (n != ncclSuccess && n != ncclInProgress)
      failed = ncclCallError(api, n, l.comm, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  ncclResult_t end = api.ncclGroupEnd();
  if (!failed && end != ncclSuccess && end != ncclInProgress)
    failed = ncclCallError(api, end, nullptr, "ncclGroupEnd", __FILE__, __LINE__);
  if (!failed) {
    std::vector<unsigned> all;
    for (unsigned r = 0; r < layout.localRanks; ++r)
      all.push_back(r);
    failed = c->awaitReady(all, "creating its communicator");
  }
  if (failed) {
    c->broken_ = true;
    return withContext(std::move(failed), where);
  }
  for (Local &l : c->locals_) {
    GRAPHC_CUDA_TRY(cudaSetDevice(l.ordinal));
    GRAPHC_CUDA_TRY(cudaEventCreateWithFlags(&l.done, cudaEventDisableTiming));
  }
  return c;
}

llvm::Error NcclAcrossWorkers::awaitReady(llvm::ArrayRef<unsigned> locals, llvm::StringRef what) {
  const auto start = Clock::now(), deadline = start + timeout_;
  std::chrono::microseconds nap(0);
  for (;;) {
    bool busy = false;
    for (unsigned r : locals) {
      Local &l = locals_[r];
      if (!l.comm)
        return makeError(what + ": the communicator of " + describe(r) + " was aborted");
      ncclResult_t async = ncclSuccess;
      ncclResult_t q = api_.ncclCommGetAsyncError(l.comm, &async);
      if (q != ncclSuccess)
        return ncclCallError(api_, q, l.comm, "ncclCommGetAsyncError", __FILE__, __LINE__);
      if (async == ncclInProgress) {
        busy = true;
      } else if (async != ncclSuccess) {
        llvm::Error e = ncclCallError(api_, async, l.comm, "NCCL", __FILE__, __LINE__);
        broken_ = true;
        for (unsigned k : locals)
          abort(locals_[k]);
        return withContext(std::move(e), what + " on " + describe(r));
      }
    }
    if (!busy)
      return llvm::Error::success();
    if (Clock::now() > deadline) {
      broken_ = true;
      for (unsigned k : locals)
        abort(locals_[k]);
      return makeError(what + " did not complete within " + secondsText(timeout_) +
                       " s: another worker died or stalled (--collective-timeout); its "
                       "communicator is aborted");
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(std::chrono::microseconds(200), nap + std::chrono::microseconds(10));
  }
}

void NcclAcrossWorkers::abort(Local &l) {
  if (l.comm)
    api_.ncclCommAbort(l.comm);
  l.comm = nullptr;
  l.pending = false;
}

void NcclAcrossWorkers::markBroken() {
  broken_ = true;
}

llvm::Error NcclAcrossWorkers::allReduce(unsigned local, llvm::StringRef group,
                                         llvm::ArrayRef<TensorView> inputs,
                                         llvm::ArrayRef<TensorView> outputs, cudaStream_t stream) {
  Local &l = locals_[local];
  if (!l.comm)
    return makeError("the communicator of " + describe(local) + " was aborted");
  GRAPHC_NCCL_TRY(api_, l.comm, api_.ncclGroupStart());
  for (size_t t = 0; t < inputs.size(); ++t) {
    ncclResult_t r =
        api_.ncclAllReduce(inputs[t].data, outputs[t].data, (size_t)inputs[t].numElements(),
                           ncclFloat32, ncclSum, l.comm, stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      api_.ncclGroupEnd();
      return ncclCallError(api_, r, l.comm, "ncclAllReduce", __FILE__, __LINE__);
    }
  }
  ncclResult_t end = api_.ncclGroupEnd();
  if (end != ncclSuccess && end != ncclInProgress)
    return ncclCallError(api_, end, l.comm, "ncclGroupEnd", __FILE__, __LINE__);
  if (auto e = awaitReady({local}, "enqueuing the all-reduce"))
    return withContext(std::move(e), "collective '" + group + "' on " + describe(local));
  GRAPHC_CUDA_TRY(cudaEventRecord(l.done, stream));
  l.pending = true;
  l.issued = Clock::now();
  l.group = group.str();
  return llvm::Error::success();
}

llvm::Error NcclAcrossWorkers::check(unsigned local) {
  Local &l = locals_[local];
  if (!l.comm)
    return llvm::Error::success();
  ncclResult_t async = ncclSuccess;
  if (api_.ncclCommGetAsyncError(l.comm, &async) == ncclSuccess && async != ncclSuccess &&
      async != ncclInProgress) {
    llvm::Error e = ncclCallError(api_, async, l.comm, "NCCL", __FILE__, __LINE__);
    broken_ = true;
    abort(l);
    return withContext(std::move(e), "the communicator of " + describe(local));
  }
  if (!l.pending)
    return llvm::Error::success();
  cudaError_t q = cudaEventQuery(l.done);
  if (q == cudaSuccess) {
    l.pending = false;
    return llvm::Error::success();
  }
  if (q != cudaErrorNotReady)
    return cudaCallError(q, "cudaEventQuery", __FILE__, __LINE__);
  if (Clock::now() - l.issued <= timeout_)
    return llvm::Error::success();
  std::string group = l.group;
  broken_ = true;
  abort(l);
  return makeError("the NCCL all-reduce of collective '" + group + "' on " + describe(local) +
                   " did not complete within " + secondsText(timeout_) +
                   " s: another worker died or stalled (--collective-timeout); its communicator "
                   "is aborted");
}

NcclAcrossWorkers::~NcclAcrossWorkers() {
  // Non-blocking communicators: finalize (flushes what is issued), wait for
  // it as long as a collective may take, then destroy; abort otherwise.
  if (!broken_) {
    std::vector<unsigned> live;
    for (unsigned r = 0; r < locals_.size(); ++r)
      if (locals_[r].comm) {
        ncclResult_t f = api_.ncclCommFinalize(locals_[r].comm);
        if (f != ncclSuccess && f != ncclInProgress)
          broken_ = true;
        live.push_back(r);
      }
    if (!broken_)
      llvm::consumeError(awaitReady(live, "finalizing the communicators"));
  }
  for (Local &l : locals_) {
    if (l.comm) {
      if (broken_)
        api_.ncclCommAbort(l.comm);
      else
        api_.ncclCommDestroy(l.comm);
    }
    if (l.done) {
      cudaSetDevice(l.ordinal);
      cudaEventDestroy(l.done);
    }
  }
}

} // namespace graphc
