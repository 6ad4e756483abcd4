//===- MpiSession.h - What the MPI parts of a world share --------*- C++ -*-===//
//
// Internal to executor/dist (the only headers that include <mpi.h>): who
// this rank is, the communicators, and the lock that serializes MPI calls
// (MPI_THREAD_SERIALIZED: device threads, the loader and the main thread may
// all call in). MpiWorkers owns the session; MpiWait, MpiCollectives and
// MpiMessages hold it by reference.
//
// Communicators: `control` spans every rank (the plan's rendezvous);
// `training` and `trainingControl` the training ranks once ps tasks are set
// (their agreements and gathers, and the parent of the groups'
// communicators); `messages` every rank again, for point-to-point messages;
// one per collective group, so that groups may complete in any order.
//
//===----------------------------------------------------------------------===//
#pragma once

// MPI's C API only: Open MPI's (deprecated) C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace graphc {

struct MpiSession {
  unsigned rank = 0, size = 1, ps = 0;
  unsigned numWorkers() const { return size - ps; }

  std::mutex mutex;
  MPI_Comm control = MPI_COMM_NULL;
  MPI_Comm training = MPI_COMM_NULL, trainingControl = MPI_COMM_NULL;
  MPI_Comm messages = MPI_COMM_NULL;
  std::map<std::string, MPI_Comm, std::less<>> groups;

  /// The agreements and gathers of the training ranks.
  MPI_Comm workers() const { return trainingControl != MPI_COMM_NULL ? trainingControl : control; }
  /// The parent of the groups' communicators.
  MPI_Comm groupParent() const { return training != MPI_COMM_NULL ? training : MPI_COMM_WORLD; }
};

/// MPI's text for an error code.
std::string mpiErrorText(int code);

} // namespace graphc
