//===- ComputeCapability.cpp - Which GPUs compute in which dtypes ---------===//

#include "kernels/cuda/ComputeCapability.h"

namespace graphc {
namespace cuda {

std::string dtypeRefusal(DType dtype, int ordinal, llvm::StringRef name, ComputeCapability cc) {
  if (dtype != DType::BF16 || cc.atLeast(kBf16Capability))
    return "";
  return "bf16 needs a GPU of compute capability " + std::to_string(kBf16Capability.major) + "." +
         std::to_string(kBf16Capability.minor) +
         " or newer (bf16 tensor cores and cuDNN's bf16 convolutions); GPU " +
         std::to_string(ordinal) + " (" + name.str() + ") has " + std::to_string(cc.major) + "." +
         std::to_string(cc.minor);
}

} // namespace cuda
} // namespace graphc
