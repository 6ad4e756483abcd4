//===- StepCounter.h - The kernels that move a device's step counter -*- C++ -*-===//
//
// The two one-thread kernels of StepCounterSync.h's protocol, issued by
// CudaDevice on its compute stream.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/DeviceStep.h"

#include <cuda_runtime_api.h>

namespace graphc {

/// *counter = value.
cudaError_t launchSetStep(DeviceStep *counter, DeviceStep value, cudaStream_t stream);
/// counter->step += 1 (the micro-step stays).
cudaError_t launchAdvanceStep(DeviceStep *counter, cudaStream_t stream);

} // namespace graphc
