//===- WorkerCollectives.h - Collectives across the workers ------*- C++ -*-===//
//
// Everything a run does together with the other processes, besides the
// parameter-server messages (MessageChannel.h): the executor's two
// interfaces (executor/Collectives.h: sums of host tensors, the gathers and
// broadcasts that build NCCL communicators over GPUs of several workers) and
// the driver's agreements (the plan's hash, whether to stop, which samples
// failed to load). Each call is collective over the training ranks (agree():
// over every rank, ps tasks too) and bounded by timeout(): a rank that died
// or stalled makes the others fail with an error that names the call and
// the step, never wait forever.
//
// MpiCollectives.h implements it over MPI; WorldOfOne.h for a process that
// runs alone, where every call is its own answer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Collectives.h"

namespace graphc {

class WorkerCollectives : public CrossWorkerReducer, public CrossWorkerExchange {
public:
  /// Every rank passes its `value`; an error on every rank when they differ,
  /// listing each rank's value. `what` names the value. The first agreement
  /// is the run's rendezvous: failures after it end the whole job.
  virtual llvm::Error agree(uint64_t value, llvm::StringRef what) = 0;
  /// A rendezvous has succeeded.
  virtual bool rendezvousDone() const = 0;
  /// Whether any rank passes true (e.g. a stop signal), so that every rank
  /// stops after the same step.
  virtual llvm::Expected<bool> any(bool flag, llvm::StringRef what) = 0;
  /// Every training rank waits here for the others, without a deadline:
  /// after work that one rank does alone (the chief's evaluation), whose
  /// length is no sign of a stall. A rank that dies still ends the job
  /// (mpirun's stop signal ends the wait).
  virtual llvm::Error meet(llvm::StringRef what) = 0;
  /// Elementwise logical or of every rank's flags, in place (the same length
  /// on every rank): which samples of a batch failed to load anywhere.
  virtual llvm::Error orFlags(llvm::MutableArrayRef<uint8_t> flags, llvm::StringRef what) = 0;
};

} // namespace graphc
