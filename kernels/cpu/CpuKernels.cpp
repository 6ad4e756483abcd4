//===- CpuKernels.cpp - Every CPU kernel family, registered once -----------===//

#include "kernels/Kernel.h"

namespace graphc {

void registerCpuStructuralKernels(KernelRegistry &r);

void registerCpuKernels(KernelRegistry &r) { registerCpuStructuralKernels(r); }

} // namespace graphc
