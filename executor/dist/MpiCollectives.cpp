//===- MpiCollectives.cpp - Collectives across workers over MPI -----------===//

#include "executor/dist/MpiCollectives.h"
#include "executor/dist/MessageChannel.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdio>

#include <unistd.h>

namespace graphc {

llvm::Expected<std::vector<uint64_t>> MpiCollectives::gather(uint64_t value, llvm::StringRef what) {
  return gatherOn(/*world=*/false, value, what);
}

llvm::Expected<std::vector<uint64_t>> MpiCollectives::gatherOn(bool world, uint64_t value,
                                                               llvm::StringRef what) {
  std::vector<unsigned long long> all(world ? mpi_.size : numWorkers());
  unsigned long long mine = value;
  MPI_Request req;
  if (auto e = wait_.jobEnding(what + " (all-gather)"))
    return e;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    int rc = MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1, MPI_UNSIGNED_LONG_LONG,
                            world ? mpi_.control : mpi_.workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  if (auto e = wait_.waitAll(&req, 1, what + " (all-gather)"))
    return e;
  return std::vector<uint64_t>(all.begin(), all.end());
}

llvm::Error MpiCollectives::broadcast(llvm::MutableArrayRef<uint8_t> bytes, llvm::StringRef what) {
  if (numWorkers() == 1 || bytes.empty())
    return llvm::Error::success();
  MPI_Request req;
  if (auto e = wait_.jobEnding(what + " (broadcast from rank 0)"))
    return e;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    int rc = MPI_Ibcast(bytes.data(), (int)bytes.size(), MPI_BYTE, 0, mpi_.workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  return wait_.waitAll(&req, 1, what + " (broadcast from rank 0)");
}

llvm::Error MpiCollectives::agree(uint64_t value, llvm::StringRef what) {
  auto all = gatherOn(/*world=*/true, value, "comparing the " + what.str());
  if (!all)
    return all.takeError();
  if (llvm::any_of(*all, [&](uint64_t v) { return v != all->front(); })) {
    std::vector<std::string> each;
    for (unsigned r = 0; r < mpi_.size; ++r) {
      char hex[24];
      snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)(*all)[r]);
      each.push_back("rank " + std::to_string(r) + " " + hex);
    }
    return makeError("the ranks do not run the same " + what + " (" + llvm::join(each, ", ") +
                     "); start every rank with the same binary, plan and options");
  }
  rendezvous_ = true;
  return learnPeers();
}

llvm::Error MpiCollectives::learnPeers() {
  if (peers_.learned())
    return llvm::Error::success();
  auto pids = gatherOn(/*world=*/true, (uint64_t)getpid(), "learning each rank's process");
  if (!pids)
    return pids.takeError();
  auto hosts = gatherOn(/*world=*/true, PeerWatch::thisHost(), "learning each rank's host");
  if (!hosts)
    return hosts.takeError();
  peers_.learn(mpi_.rank, std::move(*pids), std::move(*hosts));
  return llvm::Error::success();
}

llvm::Error MpiCollectives::orFlags(llvm::MutableArrayRef<uint8_t> flags, llvm::StringRef what) {
  if (numWorkers() == 1 || flags.empty())
    return llvm::Error::success();
  MPI_Request req;
  if (auto e = wait_.jobEnding(what))
    return e;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, flags.data(), (int)flags.size(), MPI_UNSIGNED_CHAR,
                            MPI_BOR, mpi_.workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  return wait_.waitAll(&req, 1, what);
}

llvm::Expected<bool> MpiCollectives::any(bool flag, llvm::StringRef what) {
  if (numWorkers() == 1)
    return flag;
  int mine = flag ? 1 : 0, result = 0;
  MPI_Request req;
  if (auto e = wait_.jobEnding(what))
    return e;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    int rc = MPI_Iallreduce(&mine, &result, 1, MPI_INT, MPI_MAX, mpi_.workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  if (auto e = wait_.waitAll(&req, 1, what))
    return e;
  return result != 0;
}

llvm::Error MpiCollectives::meet(llvm::StringRef what) {
  if (numWorkers() == 1)
    return llvm::Error::success();
  MPI_Request req;
  if (auto e = wait_.jobEnding(what))
    return e;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    int rc = MPI_Ibarrier(mpi_.workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  return wait_.waitAll(&req, 1, what, nullptr, noDeadline());
}

llvm::Error MpiCollectives::prepareGroups(llvm::ArrayRef<std::string> groups) {
  std::lock_guard<std::mutex> lock(mpi_.mutex);
  for (const std::string &g : groups) {
    if (mpi_.groups.count(g))
      continue;
    MPI_Comm c;
    int rc = MPI_Comm_dup(mpi_.groupParent(), &c);
    if (rc != MPI_SUCCESS)
      return makeError("a communicator for collective '" + g + "' failed: " + mpiErrorText(rc));
    mpi_.groups[g] = c;
  }
  return llvm::Error::success();
}

llvm::Error MpiCollectives::allReduceSum(llvm::StringRef group, llvm::ArrayRef<TensorView> tensors,
                                         llvm::StringRef what) {
  if (numWorkers() == 1)
    return llvm::Error::success();
  auto it = mpi_.groups.find(group);
  if (it == mpi_.groups.end())
    return makeError("collective '" + group + "' crosses workers but was not prepared (" + what +
                     ")");
  const std::string collective = ("the all-reduce '" + group + "' across " +
                                  llvm::Twine(numWorkers()) + " workers (" + what + ")")
                                     .str();
  if (auto e = wait_.jobEnding(collective))
    return e;
  std::vector<MPI_Request> reqs;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    for (const TensorView &t : tensors) {
      if (t.dtype != DType::F32)
        return makeError("collective '" + group + "': " + what + " brings a non-f32 tensor");
      int64_t n = t.numElements();
      if (n == 0)
        continue;
      MPI_Request r;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, t.data, (int)n, MPI_FLOAT, MPI_SUM, it->second, &r);
      if (rc != MPI_SUCCESS)
        return makeError("all-reduce '" + group + "' across workers failed: " + mpiErrorText(rc));
      reqs.push_back(r);
    }
  }
  return wait_.waitAll(reqs.data(), (int)reqs.size(), collective);
}

} // namespace graphc
