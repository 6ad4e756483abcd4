//===- MessageChannel.h - Point-to-point messages between ranks --*- C++ -*-===//
//
// What the parameter-server protocol (PsClient.h, PsServer.h) needs from the
// world: messages from one rank to another, told apart by a tag, each
// exchange bounded by a deadline. MpiMessages.h carries them over MPI;
// tests carry them between threads of one process (tests/dist).
//
// Ranks: the training ranks (workers) are 0 .. numWorkers()-1, and ps task p
// is rank numWorkers() + p (ir/Tasks.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace graphc {

/// A point-to-point message: to or from `rank`, `tag` telling kinds apart; a
/// receive takes at most `bytes` and sets `received`.
struct Message {
  unsigned rank = 0;
  int tag = 0;
  void *data = nullptr;
  size_t bytes = 0;
  size_t received = 0;
};

class MessageChannel {
public:
  virtual ~MessageChannel() = default;
  /// This process's rank.
  virtual unsigned rank() const = 0;
  /// The training ranks (ps tasks come after them).
  virtual unsigned numWorkers() const = 0;
  /// How long one exchange may wait (--collective-timeout).
  virtual std::chrono::milliseconds timeout() const = 0;
  /// The training step, for messages.
  virtual void setStep(int64_t step) = 0;
  /// Starts every send and receive, then waits for all of them until the
  /// timeout; `what` names the exchange in errors.
  virtual llvm::Error exchange(llvm::ArrayRef<Message> sends,
                               llvm::MutableArrayRef<Message> receives, llvm::StringRef what) = 0;
  /// Receives one message of `into.tag` from any rank into `into` (its rank
  /// and size set), waiting until `deadline`.
  virtual llvm::Error receiveAny(Message &into, std::chrono::steady_clock::time_point deadline,
                                 llvm::StringRef what) = 0;
};

/// The deadline of a wait that must not time out (far enough to never come,
/// near enough that no clock arithmetic on it overflows).
inline std::chrono::steady_clock::time_point noDeadline() {
  return std::chrono::steady_clock::now() + std::chrono::hours(24 * 365 * 10);
}

/// The error of an exchange in a process that has no channel for one (a
/// world of one, or a run without ps tasks).
inline llvm::Error noExchangeError(llvm::StringRef what) {
  return makeError(what + ": this process runs no parameter-server exchange");
}

} // namespace graphc
