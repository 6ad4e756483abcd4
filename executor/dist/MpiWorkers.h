//===- MpiWorkers.h - The world mpirun starts --------------------*- C++ -*-===//
//
// Rank r of MPI_COMM_WORLD is rank r of the run. start() initializes MPI
// (MPI_Init_thread, serialized calls; errors returned as codes, each call
// site turning one into a message) and owns the parts every job of the
// world uses: the session (MpiSession.h: communicators and the lock), the
// bounded waits (MpiWait.h), the watch on dead peers (PeerWatch.h), the
// collectives across workers (MpiCollectives.h) and the messages between
// workers and ps tasks (MpiMessages.h). setPsTasks() splits the world so
// that every collective across workers spans the training ranks only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/Workers.h"

namespace graphc {

struct MpiSession;
class MpiWait;
class PeerWatch;
class MpiCollectives;
class MpiMessages;

class MpiWorkers final : public Workers {
public:
  /// Initializes MPI (once per process: a second world fails).
  static llvm::Expected<std::unique_ptr<MpiWorkers>> start();
  ~MpiWorkers() override;

  unsigned rank() const override;
  unsigned size() const override;
  unsigned numPsTasks() const override;
  llvm::Error setPsTasks(unsigned ps) override;

  WorkerCollectives &collectives() override;
  MessageChannel &messages() override;

  void setTimeout(std::chrono::milliseconds t) override;
  void setStep(int64_t step) override;
  void watchStop(const StopFlags *flags) override;
  std::string whoAmI() const override;
  void finish() override;
  [[noreturn]] void abortAll(int code) override;

private:
  MpiWorkers();

  std::unique_ptr<MpiSession> mpi_;
  std::unique_ptr<PeerWatch> peers_;
  std::unique_ptr<MpiWait> wait_;
  std::unique_ptr<MpiCollectives> collectives_;
  std::unique_ptr<MpiMessages> messages_;
  bool finished_ = false;
};

} // namespace graphc
