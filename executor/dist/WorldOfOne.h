//===- WorldOfOne.h - A process that runs alone ------------------*- C++ -*-===//
//
// The world of a process that mpirun did not start: rank 0 of 1, the chief.
// Its collectives are their own answers (an agreement with itself, a sum
// over one worker), it has no one to send messages to, and it never loads
// MPI. Tests and single-process tools (calibration) create one where they
// need a world.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/Workers.h"

namespace graphc {

class WorldOfOne final : public Workers {
public:
  WorldOfOne();
  ~WorldOfOne() override;

  unsigned rank() const override { return 0; }
  unsigned size() const override { return 1; }
  unsigned numPsTasks() const override { return 0; }
  /// Refuses any ps task: no rank would be left to train.
  llvm::Error setPsTasks(unsigned ps) override;

  WorkerCollectives &collectives() override;
  MessageChannel &messages() override;

  void setTimeout(std::chrono::milliseconds t) override;
  void setStep(int64_t) override {}
  void watchStop(const StopFlags *) override {}
  std::string whoAmI() const override { return ""; }
  void finish() override {}
  [[noreturn]] void abortAll(int code) override;

private:
  class Alone;
  class NoMessages;
  std::unique_ptr<Alone> collectives_;
  std::unique_ptr<NoMessages> messages_;
};

} // namespace graphc
