//===- ComputeCapability.h - Which GPUs compute in which dtypes -*- C++ -*-===//
//
// bf16 needs compute capability 8.0 (Ampere) or newer: bf16 tensor cores and
// cuDNN's bf16 convolutions (its PSEUDO_BFLOAT16 configuration) start there.
// f32 and f16 run on every GPU this CUDA supports. A pure rule, so the host
// tests check it; the CUDA kernels (CudaBackend::dtypeRefusal) and the
// device registry's GPU backend (graphrun's refusal before a run) ask it with
// the device's properties.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace graphc {
namespace cuda {

struct ComputeCapability {
  int major = 0, minor = 0;
  bool atLeast(ComputeCapability o) const {
    return major > o.major || (major == o.major && minor >= o.minor);
  }
};

/// The first capability that computes in bf16.
inline constexpr ComputeCapability kBf16Capability{8, 0};

/// Why GPU `ordinal` (named `name`, e.g. "Tesla T4") of capability `cc`
/// cannot compute in `dtype`, naming it "GPU 0 (Tesla T4)"; empty where it
/// can.
std::string dtypeRefusal(DType dtype, int ordinal, llvm::StringRef name, ComputeCapability cc);

} // namespace cuda
} // namespace graphc
