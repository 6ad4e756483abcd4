//===- CollectivePath.cpp - How a GPU collective group reduces ------------===//

#include "executor/cuda/CollectivePath.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace graphc {

CollectivePath chooseCollectivePath(llvm::ArrayRef<int> ordinalByRank) {
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
  }
  return "NCCL";
}

} // namespace graphc
