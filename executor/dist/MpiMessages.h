//===- MpiMessages.h - Point-to-point messages over MPI ----------*- C++ -*-===//
//
// Internal to executor/dist: MessageChannel on the world's `messages`
// communicator (every rank, workers and ps tasks), which exists once
// setPsTasks() split the world. Receives are posted before sends, so that a
// peer's reply always finds one; every exchange is waited for by MpiWait.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/MessageChannel.h"
#include "executor/dist/MpiWait.h"

namespace graphc {

class MpiMessages final : public MessageChannel {
public:
  MpiMessages(MpiSession &mpi, MpiWait &wait) : mpi_(mpi), wait_(wait) {}

  unsigned rank() const override { return mpi_.rank; }
  unsigned numWorkers() const override { return mpi_.numWorkers(); }
  std::chrono::milliseconds timeout() const override { return wait_.timeout(); }
  void setStep(int64_t step) override { wait_.setStep(step); }
  llvm::Error exchange(llvm::ArrayRef<Message> sends, llvm::MutableArrayRef<Message> receives,
                       llvm::StringRef what) override;
  llvm::Error receiveAny(Message &into, std::chrono::steady_clock::time_point deadline,
                         llvm::StringRef what) override;

private:
  MpiSession &mpi_;
  MpiWait &wait_;
};

} // namespace graphc
