//===- InProcessMessages.h - A world of threads for the ps protocol -*- C++ -*-===//
//
// The point-to-point messages of a world whose ranks are threads of this
// process: what a test of the parameter-server protocol passes where a run
// passes MPI's (executor/dist/MpiMessages.h). A send copies its bytes into
// the destination's mailbox and returns; a receive takes the oldest message
// that matches its source and tag (MPI's order between two ranks), waiting
// until the channel's timeout or the caller's deadline. A receive buffer
// smaller than its message is an error, as MPI's truncation is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/MessageChannel.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace graphc::disttest {

class InProcessMessages {
public:
  /// `workers` training ranks and `tasks` ps tasks after them.
  InProcessMessages(unsigned workers, unsigned tasks, std::chrono::milliseconds timeout);
  ~InProcessMessages();

  /// Rank `rank`'s channel (used by that rank's thread).
  MessageChannel &channel(unsigned rank);

private:
  class Channel;
  struct Envelope {
    unsigned from = 0;
    int tag = 0;
    std::vector<char> bytes;
  };
  void post(unsigned from, const Message &m);
  /// The oldest message to `to` of `into.tag` (from `from`, or anyone).
  llvm::Error take(unsigned to, std::optional<unsigned> from, Message &into,
                   std::chrono::steady_clock::time_point deadline, llvm::StringRef what);

  unsigned workers_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::deque<Envelope>> mailboxes_;
  std::vector<std::unique_ptr<Channel>> channels_;
};

} // namespace graphc::disttest
