//===- PeerWatch.h - Which ranks of this host are gone -----------*- C++ -*-===//
//
// mpirun notices a rank killed (kill -9, the OOM killer) and ends the others
// with SIGTERM, then SIGKILL. The ranks learn each other's host and pid at
// the plan's rendezvous; a rank that waits in a collective after a stop
// signal asks goneRanks() for the ranks of its host whose process is gone
// and, when there are some, fails the collective at once with an error that
// names them, so its last words say who died, in which collective and at
// which step. Ranks on other hosts cannot be seen from here; their silence
// ends in the timeout.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace graphc {

class PeerWatch {
public:
  /// A hash of this machine's name (stableHash), to tell which ranks share it.
  static uint64_t thisHost();
  /// The process is gone: no /proc entry, or a zombie not yet reaped.
  static bool processGone(uint64_t pid);

  /// Every rank's pid and host (by rank), and which rank this is.
  void learn(unsigned rank, std::vector<uint64_t> pids, std::vector<uint64_t> hosts);
  bool learned() const { return !pids_.empty(); }
  /// "rank 1 (pid 4242)" for each rank of this host whose process is gone,
  /// joined; empty when none is (or before learn()).
  std::string goneRanks() const;

private:
  unsigned rank_ = 0;
  std::vector<uint64_t> pids_, hosts_;
};

} // namespace graphc
