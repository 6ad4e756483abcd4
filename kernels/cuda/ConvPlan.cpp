//===- ConvPlan.cpp - Convolution geometry, lowering and algorithm choice -===//

#include "kernels/cuda/ConvPlan.h"

#include "ir/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace graphc {
namespace cuda {

ConvLowering lowerConv(const ConvGeometry &g) {
  ConvLowering l;
  l.paddedX = g.x;
  for (int i = 0; i < 2; ++i) {
    l.pad[i] = std::min(g.padBegin[i], g.padEnd[i]);
    l.extraBegin[i] = g.padBegin[i] - l.pad[i];
    l.extraEnd[i] = g.padEnd[i] - l.pad[i];
    l.paddedX[2 + i] += l.extraBegin[i] + l.extraEnd[i];
    l.explicitPad |= l.extraBegin[i] || l.extraEnd[i];
  }
  return l;
}

std::optional<size_t> chooseConvAlgorithm(llvm::ArrayRef<AlgoCandidate> candidates,
                                          size_t workspaceLimit, bool allowTF32,
                                          bool deterministic) {
  auto usable = [&](const AlgoCandidate &c) {
    return c.ok && c.memory <= workspaceLimit && (allowTF32 || !c.tensorOps);
  };
  for (const AlgoCandidate &c : candidates)
    if (usable(c) && (c.deterministic || !deterministic))
      return &c - candidates.data();
  for (const AlgoCandidate &c : candidates)
    if (usable(c))
      return &c - candidates.data();
  return std::nullopt;
}

size_t convWorkspaceBudget(size_t freeBytes) {
  return std::clamp(freeBytes / 16, kMinConvWorkspace, kMaxConvWorkspace);
}

ConvMath convQueryMath(const ConvChoicePolicy &policy) {
  if (policy.half)
    return ConvMath::TensorOp;
  return policy.allowTF32 ? ConvMath::Default : ConvMath::Fma;
}

std::string convCacheKey(llvm::StringRef device, const ConvGeometry &g, ConvDirection d,
                         const ConvChoicePolicy &policy) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << device << " | dir" << (int)d << " x" << shapeToString(g.x) << " w" << shapeToString(g.w)
     << " y" << shapeToString(g.y) << " g" << g.group;
  for (int i = 0; i < 2; ++i)
    os << " s" << g.strides[i] << " d" << g.dilations[i] << " p" << g.padBegin[i] << ","
       << g.padEnd[i];
  os << (policy.half        ? " f16"
         : policy.allowTF32 ? " tf32"
                            : " fp32")
     << (policy.deterministic ? "" : " any-algo") << (policy.measured ? " measured" : "");
  return os.str();
}

} // namespace cuda
} // namespace graphc
