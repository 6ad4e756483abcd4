//===- SyncBatchNorm.h - BatchNorm statistics across towers ------*- C++ -*-===//
//
// The cross-tower form of one BatchNorm layer (`--bn sync`), applied by
// replicate-towers to the layer's copies in the non-empty towers. With M the
// elements per channel over all towers (the global batch times the spatial
// size) and rank r among R towers, each tower's
//
//   BatchNormTrain(x, scale, bias) -> (y, mean, var)
//
// becomes, under `<copy>/sync/`:
//
//   mean = AllReduce(ReduceSum(x)) / M                       {group <layer>/sync/sum}
//   var  = AllReduce(ReduceSum((x - mean)²)) / M  (biased)   {group <layer>/sync/sq}
//   y    = BatchNorm(x, scale, bias, mean, var) {epsilon}    (named like the copy)
//
// (two passes over x rather than E[x²] - mean², which cancels badly), and each
// BatchNormTrainGrad(x, scale, mean, var, dy) -> (dx, dscale, dbias) that reads
// those statistics becomes, with x̂ = (x - mean)/sqrt(var + eps):
//
//   dbias_r  = ReduceSum(dy),  dscale_r = ReduceSum(dy·x̂)   (this tower's part)
//   Σdy, Σdy·x̂ = AllReduce(dbias_r, dscale_r)               {group <layer>/sync/grad}
//   dx = scale/sqrt(var + eps) · (dy - Σdy/M - x̂·Σdy·x̂/M)
//
// The parameter gradients stay the tower's part (dbias_r, dscale_r): the
// towers' parts add up in gradient aggregation like every other gradient. So N
// towers compute what one tower computes on the global batch, up to float
// rounding. With one tower the AllReduces are left out. New nodes take the
// copy's tower and requested device and sit where the replaced node sat.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

/// Rewrites `copies` (one BatchNormTrain per participating tower, in rank
/// order) and the BatchNormTrainGrad nodes that read their statistics.
/// `layer` names the collective groups (the layer's name without tower
/// prefix).
llvm::Error synchronizeBatchNorm(llvm::ArrayRef<Node *> copies, llvm::StringRef layer);

} // namespace graphc
