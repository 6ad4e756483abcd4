//===- PeerWatch.cpp - Which ranks of this host are gone ------------------===//

#include "executor/dist/PeerWatch.h"

#include "ir/Random.h"

#include "llvm/ADT/StringExtras.h"

#include <cassert>
#include <fstream>

#include <unistd.h>

namespace graphc {

uint64_t PeerWatch::thisHost() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return stableHash(name);
}

bool PeerWatch::processGone(uint64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return true;
  // "pid (comm) S ...": the state follows the last ')'.
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' ||
         line[paren + 2] == 'X';
}

void PeerWatch::learn(unsigned rank, std::vector<uint64_t> pids, std::vector<uint64_t> hosts) {
  assert(pids.size() == hosts.size() && rank < pids.size());
  rank_ = rank;
  pids_ = std::move(pids);
  hosts_ = std::move(hosts);
}

std::string PeerWatch::goneRanks() const {
  std::vector<std::string> gone;
  for (unsigned r = 0; r < pids_.size(); ++r)
    if (r != rank_ && hosts_[r] == hosts_[rank_] && processGone(pids_[r]))
      gone.push_back("rank " + std::to_string(r) + " (pid " + std::to_string(pids_[r]) + ")");
  return llvm::join(gone, ", ");
}

} // namespace graphc
