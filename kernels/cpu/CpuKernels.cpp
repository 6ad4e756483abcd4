//===- CpuKernels.cpp - Every CPU kernel family, registered once -----------===//

#include "kernels/Kernel.h"

namespace graphc {

void registerCpuStructuralKernels(KernelRegistry &r);
// oneDNN families.
void registerCpuConvKernels(KernelRegistry &r);
void registerCpuPoolKernels(KernelRegistry &r);
void registerCpuBatchNormKernels(KernelRegistry &r);
void registerCpuMatMulKernels(KernelRegistry &r);
// Plain C++ families (a later registration of the same key wins).
void registerCpuElementwiseKernels(KernelRegistry &r);
void registerCpuCastKernels(KernelRegistry &r);
void registerCpuSelectKernels(KernelRegistry &r);
void registerCpuDropoutKernels(KernelRegistry &r);
void registerCpuSoftmaxKernels(KernelRegistry &r);
void registerCpuLayerNormKernels(KernelRegistry &r);
void registerCpuShapeKernels(KernelRegistry &r);
void registerCpuGatherKernels(KernelRegistry &r);
void registerCpuReduceKernels(KernelRegistry &r);
void registerCpuLossKernels(KernelRegistry &r);
void registerCpuOptimizerKernels(KernelRegistry &r);
void registerCpuLossScaleKernels(KernelRegistry &r);
// f16 layers through the f32 kernels (CPUs have no f16 oneDNN here).
void registerCpuF16ViaF32Kernels(KernelRegistry &r);

void registerCpuKernels(KernelRegistry &r) {
  registerCpuStructuralKernels(r);
  registerCpuConvKernels(r);
  registerCpuPoolKernels(r);
  registerCpuBatchNormKernels(r);
  registerCpuMatMulKernels(r);
  registerCpuElementwiseKernels(r);
  registerCpuCastKernels(r);
  registerCpuSelectKernels(r);
  registerCpuDropoutKernels(r);
  registerCpuSoftmaxKernels(r);
  registerCpuLayerNormKernels(r);
  registerCpuShapeKernels(r);
  registerCpuGatherKernels(r);
  registerCpuReduceKernels(r);
  registerCpuLossKernels(r);
  registerCpuOptimizerKernels(r);
  registerCpuLossScaleKernels(r);
  registerCpuF16ViaF32Kernels(r);
}

} // namespace graphc
