//===- CollectivePath.h - How a GPU collective group reduces -----*- C++ -*-===//
//
// A group's ranks are logical GPU devices; what matters is the physical GPU
// behind each:
//   - every rank on its own physical GPU: NCCL (one communicator set per
//     ordered list of GPUs, ncclCommInitAll);
//   - every rank on one physical GPU (--emulate on fewer GPUs, or a single
//     rank): the project's own reduction kernel, because NCCL refuses two
//     ranks on one GPU;
//   - a mix (4 logical devices on 2 GPUs): the own kernel too, reading and
//     writing the other GPU's buffers through peer access, which must be
//     available between every pair (checked when the group is bound).
// A group that spans workers (processes) takes NCCL across them: one
// communicator over every GPU of every worker (NcclAcrossWorkers.h), which
// needs this worker's ranks on distinct GPUs as well; its ranks are laid out
// worker by worker, then in each worker's device order (ncclRankLayout).
// Pure, so the choice and the layout are tested without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace graphc {

enum class CollectivePath { Nccl, SharedGpu, PeerKernel, NcclAcrossWorkers };

/// `ordinalByRank[r]`: the physical GPU of rank r; `workers`: the workers the
/// group spans. Across workers, NCCL whatever the ordinals:
/// acrossWorkersRefusal says when that cannot work.
CollectivePath chooseCollectivePath(llvm::ArrayRef<int> ordinalByRank, unsigned workers = 1);
llvm::StringRef collectivePathName(CollectivePath p);

/// Why a group that spans workers cannot take NCCL (two of this worker's
/// ranks on one physical GPU, which NCCL refuses), or "".
std::string acrossWorkersRefusal(llvm::StringRef group, llvm::ArrayRef<int> ordinalByRank);

/// Where one worker's GPUs sit among the ranks of a communicator over every
/// GPU of every worker: worker 0's first, then worker 1's, ... each worker's
/// in its own rank order. Every worker computes the same layout from the same
/// counts, so rank numbers need no further agreement.
struct NcclRankLayout {
  unsigned worker = 0;    ///< this one
  unsigned firstRank = 0; ///< the NCCL rank of this worker's local rank 0
  unsigned localRanks = 0;
  unsigned nranks = 0;             ///< in all
  std::vector<unsigned> perWorker; ///< each worker's GPUs in the group
};
/// `perWorker[w]`: the group's GPUs on worker w (gathered from every worker).
/// An error names the group when a worker has none or the count overflows
/// NCCL's int ranks.
llvm::Expected<NcclRankLayout> ncclRankLayout(llvm::StringRef group,
                                              llvm::ArrayRef<uint64_t> perWorker, unsigned worker);

} // namespace graphc
