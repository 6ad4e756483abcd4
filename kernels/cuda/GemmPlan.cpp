//===- GemmPlan.cpp - MatMul and Gemm as cuBLAS calls ---------------------===//

#include "kernels/cuda/GemmPlan.h"

#include "ir/Diagnostics.h"
#include "kernels/LoopNest.h"

#include <climits>

namespace graphc {
namespace cuda {

static llvm::Error checkInts(const Node &n, const GemmPlan &p) {
  for (int64_t v : {p.m, p.n, p.k, p.batch, p.lda, p.ldb, p.ldc})
    if (v > INT_MAX)
      return nodeError(n, "a matrix size exceeds cuBLAS's int range");
  return llvm::Error::success();
}

llvm::Expected<GemmPlan> planMatMul(const Node &n) {
  Dims a(n.operand(0)->type().shape), b(n.operand(1)->type().shape);
  if (a.empty() || b.empty())
    return nodeError(n, "operands must not be scalars");
  if (a.size() == 1)
    a.insert(a.begin(), 1);
  if (b.size() == 1)
    b.push_back(1);
  GemmPlan p;
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  if (b[b.size() - 2] != p.k)
    return nodeError(n, "inner dimensions of " + shapeToString(a) + " and " + shapeToString(b) +
                            " differ");
  p.lda = p.k;
  p.ldb = p.n;
  p.ldc = p.n;
  Dims batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  size_t rank = std::max(batchA.size(), batchB.size());
  Dims batchC(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i + batchA.size() < rank ? 1 : batchA[i + batchA.size() - rank];
    int64_t y = i + batchB.size() < rank ? 1 : batchB[i + batchB.size() - rank];
    if (x != y && x != 1 && y != 1)
      return nodeError(n, "batch dimensions " + shapeToString(batchA) + " and " +
                              shapeToString(batchB) + " do not broadcast");
    batchC[i] = x == 1 ? y : x; // numpy's rule: 1 stretches, so 0 against 1 is 0
  }
  p.batch = plain::product(batchC, 0, batchC.size());
  // Batch strides in matrices, then in elements.
  plain::LoopNest nest = plain::broadcastNest(batchC, {batchA, batchB});
  int64_t sizeA = p.m * p.k, sizeB = p.k * p.n;
  for (int64_t &s : nest.strides[0])
    s *= sizeA;
  for (int64_t &s : nest.strides[1])
    s *= sizeB;
  p.strideC = p.m * p.n;
  if (nest.dims.size() == 1) {
    p.strideA = nest.strides[0][0];
    p.strideB = nest.strides[1][0];
    p.form = p.batch == 1 ? GemmForm::Single : GemmForm::Strided;
    if (p.form == GemmForm::Strided && p.strideB == 0 && p.strideA == sizeA) {
      // Every batch multiplies the same B: one GEMM with the batches as rows.
      p.m *= p.batch;
      p.batch = 1;
      p.form = GemmForm::Single;
    }
  } else {
    if (nest.dims.size() > (size_t)kMaxRank)
      return nodeError(n,
                       "batch dimensions do not merge into " + llvm::Twine(kMaxRank) + " or fewer");
    p.form = GemmForm::PointerArray;
    p.batchIndex.rank = (int)nest.dims.size();
    for (size_t d = 0; d < nest.dims.size(); ++d) {
      p.batchIndex.dims[d] = nest.dims[d];
      p.batchIndex.strides[0][d] = nest.strides[0][d];
      p.batchIndex.strides[1][d] = nest.strides[1][d];
    }
  }
  if (auto e = checkInts(n, p))
    return e;
  return p;
}

llvm::Expected<GemmPlan> planGemm(const Node &n) {
  const Dims &a = n.operand(0)->type().shape, &b = n.operand(1)->type().shape;
  if (a.size() != 2 || b.size() != 2)
    return nodeError(n, "needs 2-d A and B");
  GemmPlan p;
  p.transA = n.attrs().getInt("transA") != 0;
  p.transB = n.attrs().getInt("transB") != 0;
  p.m = p.transA ? a[1] : a[0];
  p.k = p.transA ? a[0] : a[1];
  p.n = p.transB ? b[0] : b[1];
  if ((p.transB ? b[1] : b[0]) != p.k)
    return nodeError(n, "inner dimensions of A and B differ");
  p.lda = a[1];
  p.ldb = b[1];
  p.ldc = p.n;
  p.alpha = (float)n.attrs().getFloat("alpha", 1.0);
  if (auto e = checkInts(n, p))
    return e;
  return p;
}

} // namespace cuda
} // namespace graphc
