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
void registerCudaShapeKernels(KernelRegistry &r);
void registerCudaReduceKernels(KernelRegistry &r);
void registerCudaSoftmaxKernels(KernelRegistry &r);
void registerCudaLossKernels(KernelRegistry &r);
void registerCudaDropoutKernels(KernelRegistry &r);
void registerCudaOptimizerKernels(KernelRegistry &r);
void registerCudaLossScaleKernels(KernelRegistry &r);
void registerCudaBatchNormKernels(KernelRegistry &r);
void registerCudaLayerNormKernels(KernelRegistry &r);
void registerCudaPoolKernels(KernelRegistry &r);
void registerCudaConvKernels(KernelRegistry &r);
void registerCudaMatMulKernels(KernelRegistry &r);
void registerCudaFloat16ViaF32Kernels(KernelRegistry &r);

void registerCudaKernels(KernelRegistry &r) {
  registerCudaElementwiseKernels(r);
  registerCudaShapeKernels(r);
  registerCudaReduceKernels(r);
  registerCudaSoftmaxKernels(r);
  registerCudaLossKernels(r);
  registerCudaDropoutKernels(r);
  registerCudaOptimizerKernels(r);
  registerCudaLossScaleKernels(r);
  registerCudaBatchNormKernels(r);
  registerCudaLayerNormKernels(r);
  registerCudaPoolKernels(r);
  registerCudaConvKernels(r);
  registerCudaMatMulKernels(r);
  registerCudaFloat16ViaF32Kernels(r);
}

} // namespace graphc
