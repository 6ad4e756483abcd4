//===- CudaKernels.cpp - Every CUDA kernel family, registered once ---------===//
//
// Called from KernelRegistry::global() when the CUDA kernels are built in.
// Registering needs no GPU and no CUDA library: kernels open cuDNN and
// cuBLAS through their CudaBackend when they are created.
//
//===----------------------------------------------------------------------===//

#include "kernels/Kernel.h"

namespace graphc {

void registerCudaElementwiseKernels(KernelRegistry &r);

void registerCudaKernels(KernelRegistry &r) {
  registerCudaElementwiseKernels(r);
}

} // namespace graphc
