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
// Pure, so the choice is tested without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace graphc {

enum class CollectivePath { Nccl, SharedGpu, PeerKernel };

/// `ordinalByRank[r]`: the physical GPU of rank r.
CollectivePath chooseCollectivePath(llvm::ArrayRef<int> ordinalByRank);
llvm::StringRef collectivePathName(CollectivePath p);

} // namespace graphc
