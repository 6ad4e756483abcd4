//===- StepCounter.cu - Setting and advancing a device's step counter -----===//

#include "executor/cuda/StepCounter.h"

namespace graphc {
namespace {

__global__ void setStepKernel(DeviceStep *counter, DeviceStep value) {
  counter->step = value.step;
  counter->microStep = value.microStep;
}

__global__ void advanceStepKernel(DeviceStep *counter) {
  counter->step += 1;
}

} // namespace

cudaError_t launchSetStep(DeviceStep *counter, DeviceStep value, cudaStream_t stream) {
  setStepKernel<<<1, 1, 0, stream>>>(counter, value);
  return cudaGetLastError();
}

cudaError_t launchAdvanceStep(DeviceStep *counter, cudaStream_t stream) {
  advanceStepKernel<<<1, 1, 0, stream>>>(counter);
  return cudaGetLastError();
}

} // namespace graphc
