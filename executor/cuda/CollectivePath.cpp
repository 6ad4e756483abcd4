//===- CollectivePath.cpp - How a GPU collective group reduces ------------===//

#include "executor/cuda/CollectivePath.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <climits>

namespace graphc {

CollectivePath chooseCollectivePath(llvm::ArrayRef<int> ordinalByRank, unsigned workers) {
  if (workers > 1)
    return CollectivePath::NcclAcrossWorkers;
  llvm::SmallVector<int, 8> sorted(ordinalByRank.begin(), ordinalByRank.end());
  llvm::sort(sorted);
  bool allSame = sorted.empty() || sorted.front() == sorted.back();
  if (allSame)
    return CollectivePath::SharedGpu;
  bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  return distinct ? CollectivePath::Nccl : CollectivePath::PeerKernel;
}

llvm::StringRef collectivePathName(CollectivePath p) {
  switch (p) {
  case CollectivePath::Nccl:
    return "NCCL";
  case CollectivePath::SharedGpu:
    return "own reduction on one GPU";
  case CollectivePath::PeerKernel:
    return "own reduction across GPUs (peer access)";
  case CollectivePath::NcclAcrossWorkers:
    return "NCCL across workers";
  }
  return "NCCL";
}

std::string acrossWorkersRefusal(llvm::StringRef group, llvm::ArrayRef<int> ordinalByRank) {
  llvm::SmallVector<int, 8> sorted(ordinalByRank.begin(), ordinalByRank.end());
  llvm::sort(sorted);
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end())
    return "";
  return "collective '" + group.str() + "' spans workers, so it sums with NCCL, which takes one " +
         "rank per physical GPU, but this worker's ranks share GPUs (physical GPUs " +
         llvm::join(llvm::map_range(ordinalByRank, [](int o) { return std::to_string(o); }), ", ") +
         "); give each of the worker's GPUs its own physical GPU (not --emulate onto fewer)";
}

llvm::Expected<NcclRankLayout> ncclRankLayout(llvm::StringRef group,
                                              llvm::ArrayRef<uint64_t> perWorker, unsigned worker) {
  assert(worker < perWorker.size() && "a worker of the group");
  NcclRankLayout l;
  l.worker = worker;
  uint64_t total = 0;
  for (size_t w = 0; w < perWorker.size(); ++w) {
    if (perWorker[w] == 0)
      return makeError("collective '" + group + "': worker " + llvm::Twine(w) +
                       " has none of its GPUs (the workers' plans differ)");
    if (w == worker)
      l.firstRank = (unsigned)total;
    total += perWorker[w];
    if (total > (uint64_t)INT_MAX)
      return makeError("collective '" + group + "' would have " + llvm::Twine(total) +
                       " NCCL ranks or more; NCCL takes at most " + llvm::Twine(INT_MAX));
    l.perWorker.push_back((unsigned)perWorker[w]);
  }
  l.localRanks = l.perWorker[worker];
  l.nranks = (unsigned)total;
  return l;
}

} // namespace graphc
