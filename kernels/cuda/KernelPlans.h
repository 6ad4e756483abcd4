//===- KernelPlans.h - From a node to device parameters ----------*- C++ -*-===//
//
// The host-side decisions of the CUDA kernels as plain functions of a node:
// the parameters their device code reads. The kernels call them at creation;
// the host tests call them too and run the device bodies (the GRAPHC_HD
// functions of the *Device.h headers) on the host against the CPU kernels,
// so the index arithmetic is checked on machines without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "kernels/cuda/DeviceCommon.h"
#include "kernels/cuda/DropoutDevice.h"
#include "kernels/cuda/OptimizerDevice.h"
#include "kernels/cuda/PoolDevice.h"
#include "kernels/cuda/ShapeDevice.h"

#include "llvm/Support/Error.h"

namespace graphc {
namespace cuda {

/// Transpose, Slice, Expand: out[i] = in[offset of i].
llvm::Expected<StridedIndex<1>> stridedCopyIndex(const Node &n);
/// Pad.
llvm::Expected<PadParams> padParams(const Node &n);
/// Gather (data shape from operand 0) and GatherGrad (from the result);
/// no error site.
GatherParams gatherParams(const Node &n);
/// MaxPool, AveragePool (x, y shapes from operand 0 and the result),
/// MaxPoolGrad (operands 0 and 1), AveragePoolGrad (result and operand 0).
llvm::Expected<PoolParams> poolParams(const Node &n);
/// Softmax family: the [outer, L, inner, 1] NCHW view cuDNN normalizes over
/// its channels (L: the axis).
Dims softmaxView(const Node &n);
/// DropoutTrain at `step` of a run seeded `seed` (the CPU kernel's keys),
/// with the step as an argument (no counter).
DropoutParams dropoutParams(const Node &n, uint64_t seed, uint64_t step, uint64_t microStep = 0);
/// The update rule of an Apply* op (ApplySGD and anything else: SGD).
UpdateRule updateRuleOf(Op op);

} // namespace cuda
} // namespace graphc
