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

namespace {

bool sixteenBit(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

/// The cache key's word for what cuDNN computes in (f32 and f16 as before bf16 came).
const char *computeTag(const ConvChoicePolicy &policy) {
  switch (policy.data) {
  case DType::F16:
    return " f16";
  case DType::BF16:
    return " bf16";
  default:
    return policy.allowTF32 ? " tf32" : " fp32";
  }
}

/// `t` is `data`, or f32 beside 16-bit data (and then `wide` is set).
llvm::Error dataOrWide(llvm::StringRef what, DType t, DType data, bool &wide) {
  wide = t == DType::F32 && sixteenBit(data);
  if (t == data || wide)
    return llvm::Error::success();
  return makeError("cuDNN convolutions take one dtype (f32 beside 16-bit data for weights, bias "
                   "and filter gradient): the data is " +
                   dtypeName(data) + ", " + what + " " + dtypeName(t));
}

} // namespace

llvm::Expected<ConvTypes> convTypes(Op op, llvm::ArrayRef<DType> operands, DType result) {
  assert(isConvolution(op) && operands.size() >= 2 && "a convolution's operands");
  ConvTypes t;
  t.data = operands[0];
  if (t.data != DType::F32 && !sixteenBit(t.data))
    return makeError("cuDNN convolutions compute in f32, f16 or bf16, not " + dtypeName(t.data));
  switch (op) {
  case Op::ConvGradFilter: // x, dy -> dw
    if (operands[1] != t.data)
      return makeError("cuDNN convolutions take one dtype: x is " + dtypeName(t.data) + ", dy " +
                       dtypeName(operands[1]));
    if (auto e = dataOrWide("the filter gradient", result, t.data, t.wideWeights))
      return e;
    return t;
  default: // Conv: x, w[, b] -> y; ConvGradData: dy, w -> dx
    if (auto e = dataOrWide("the weights", operands[1], t.data, t.wideWeights))
      return e;
    if (operands.size() > 2)
      if (auto e = dataOrWide("the bias", operands[2], t.data, t.wideBias))
        return e;
    if (result != t.data)
      return makeError("cuDNN convolutions take one dtype: the data is " + dtypeName(t.data) +
                       ", the result " + dtypeName(result));
    return t;
  }
}

ConvMath convQueryMath(const ConvChoicePolicy &policy) {
  if (sixteenBit(policy.data))
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
  os << computeTag(policy) << (policy.channelsLast ? " nhwc" : "")
     << (policy.deterministic ? "" : " any-algo") << (policy.measured ? " measured" : "");
  return os.str();
}

} // namespace cuda
} // namespace graphc
