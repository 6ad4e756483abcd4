//===- ChannelsLast.cpp - NHWC activations: the policies and axes ---------===//

#include "kernels/ChannelsLast.h"

#include "ir/NamedChoices.h"

#include <cassert>

namespace graphc {

namespace {
constexpr NamedChoice<GpuLayout> kGpuLayouts[] = {
    {GpuLayout::Nchw, "nchw"}, {GpuLayout::Nhwc, "nhwc"}, {GpuLayout::Auto, "auto"}};
constexpr NamedChoice<CpuLayout> kCpuLayouts[] = {
    {CpuLayout::Blocked, "blocked"}, {CpuLayout::Nhwc, "nhwc"}, {CpuLayout::Auto, "auto"}};
} // namespace

llvm::Expected<GpuLayout> parseGpuLayout(llvm::StringRef s) {
  return parseChoice<GpuLayout>(kGpuLayouts, s, "GPU activation layout");
}

llvm::StringRef gpuLayoutName(GpuLayout l) {
  return choiceName<GpuLayout>(kGpuLayouts, l);
}

bool channelsLastFor(GpuLayout policy, DType t) {
  const bool sixteenBit = t == DType::F16 || t == DType::BF16;
  switch (policy) {
  case GpuLayout::Nchw:
    return false;
  case GpuLayout::Nhwc:
    return sixteenBit || t == DType::F32;
  case GpuLayout::Auto:
    break;
  }
  return sixteenBit;
}

std::string describeGpuLayout(GpuLayout policy) {
  switch (policy) {
  case GpuLayout::Nchw:
    return "nchw (every GPU activation row-major)";
  case GpuLayout::Nhwc:
    return "nhwc (channels-last for f32, f16 and bf16 activations)";
  case GpuLayout::Auto:
    break;
  }
  return "auto (channels-last for f16 and bf16 activations, NCHW for f32)";
}

llvm::Expected<CpuLayout> parseCpuLayout(llvm::StringRef s) {
  return parseChoice<CpuLayout>(kCpuLayouts, s, "CPU activation layout");
}

llvm::StringRef cpuLayoutName(CpuLayout l) {
  return choiceName<CpuLayout>(kCpuLayouts, l);
}

bool channelsLastOnCpu(CpuLayout policy, DType t, bool amx) {
  switch (policy) {
  case CpuLayout::Blocked:
    return false;
  case CpuLayout::Nhwc:
    return t == DType::F32 || t == DType::BF16;
  case CpuLayout::Auto:
    break;
  }
  return amx && t == DType::BF16;
}

std::string describeCpuLayout(CpuLayout policy, bool amx) {
  switch (policy) {
  case CpuLayout::Blocked:
    return "blocked (every activation channel-blocked where its channels allow)";
  case CpuLayout::Nhwc:
    return "nhwc (channels-last for f32 and bf16 activations)";
  case CpuLayout::Auto:
    break;
  }
  return std::string("auto (blocked; bf16 activations channels-last where the CPU has AMX: ") +
         (amx ? "this one has" : "this one has none") + ")";
}

bool channelsLastShape(const TensorType &t) {
  return t.rank() == 4 && t.isStatic() && t.numElements() > 0;
}

Dims channelsLastDims(llvm::ArrayRef<int64_t> nchw) {
  assert(nchw.size() == 4 && "a 4-D shape");
  return {nchw[0], nchw[2], nchw[3], nchw[1]};
}

int64_t channelsLastAxis(int64_t axis) {
  assert(axis >= 0 && axis < 4 && "an axis of a 4-D shape");
  static const int64_t kAxis[4] = {0, 3, 1, 2};
  return kAxis[axis];
}

} // namespace graphc
