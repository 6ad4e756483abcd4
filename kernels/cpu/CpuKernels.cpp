//===- CpuKernels.cpp - Every CPU kernel family, registered once -----------===//

#include "kernels/Kernel.h"

namespace graphc {

void registerCpuStructuralKernels(KernelRegistry &r);
// oneDNN families.
void registerCpuConvKernels(KernelRegistry &r);
void registerCpuPoolKernels(KernelRegistry &r);
void registerCpuBatchNormKernels(KernelRegistry &r);
void registerCpuMatMulKernels(KernelRegistry &r);

void registerCpuKernels(KernelRegistry &r) {
  registerCpuStructuralKernels(r);
  registerCpuConvKernels(r);
  registerCpuPoolKernels(r);
  registerCpuBatchNormKernels(r);
  registerCpuMatMulKernels(r);
}

} // namespace graphc
