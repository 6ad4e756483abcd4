//===- MpiMessages.cpp - Point-to-point messages over MPI -----------------===//

#include "executor/dist/MpiMessages.h"

#include "ir/Diagnostics.h"

#include <vector>

namespace graphc {

llvm::Error MpiMessages::exchange(llvm::ArrayRef<Message> sends,
                                  llvm::MutableArrayRef<Message> receives, llvm::StringRef what) {
  if (mpi_.messages == MPI_COMM_NULL)
    return noExchangeError(what);
  if (auto e = wait_.jobEnding(what))
    return e;
  std::vector<MPI_Request> reqs;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    // Receives first, so that the peers' replies always find one posted.
    for (Message &m : receives) {
      MPI_Request r;
      int rc = MPI_Irecv(m.data, (int)m.bytes, MPI_BYTE, (int)m.rank, m.tag, mpi_.messages, &r);
      if (rc != MPI_SUCCESS)
        return makeError(what + " failed: " + mpiErrorText(rc));
      reqs.push_back(r);
    }
    for (const Message &m : sends) {
      MPI_Request r;
      int rc = MPI_Isend(m.data, (int)m.bytes, MPI_BYTE, (int)m.rank, m.tag, mpi_.messages, &r);
      if (rc != MPI_SUCCESS)
        return makeError(what + " failed: " + mpiErrorText(rc));
      reqs.push_back(r);
    }
  }
  std::vector<MPI_Status> statuses(reqs.size());
  if (auto e = wait_.waitAll(reqs.data(), (int)reqs.size(), what, statuses.data()))
    return e;
  for (size_t i = 0; i < receives.size(); ++i) {
    int count = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &count);
    receives[i].received = (size_t)count;
  }
  return llvm::Error::success();
}

llvm::Error MpiMessages::receiveAny(Message &into, std::chrono::steady_clock::time_point deadline,
                                    llvm::StringRef what) {
  if (mpi_.messages == MPI_COMM_NULL)
    return noExchangeError(what);
  MPI_Request req;
  if (auto e = wait_.jobEnding(what))
    return e;
  {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    int rc = MPI_Irecv(into.data, (int)into.bytes, MPI_BYTE, MPI_ANY_SOURCE, into.tag,
                       mpi_.messages, &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  MPI_Status status;
  if (auto e = wait_.waitAll(&req, 1, what, &status, deadline)) {
    std::lock_guard<std::mutex> lock(mpi_.mutex);
    MPI_Cancel(&req);
    return e;
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  into.rank = (unsigned)status.MPI_SOURCE;
  into.received = (size_t)count;
  return llvm::Error::success();
}

} // namespace graphc
