//===- CudaStreams.cpp - A CUDA device's streams ---------------------------===//

#include "executor/cuda/CudaStreams.h"

namespace graphc {

llvm::StringRef cudaStreamName(CudaStream s) {
  switch (s) {
  case CudaStream::Compute:
    return "compute";
  case CudaStream::CopyIn:
    return "copy-in";
  case CudaStream::Collective:
    return "collective";
  case CudaStream::Marker:
    return "marker";
  case CudaStream::CopyOut:
    return "copy-out";
  case CudaStream::Prefetch:
    return "prefetch";
  }
  return "compute";
}

CudaStream streamForReceive(CopySource from) {
  // A copy from the device itself is ordered with the kernels around it for
  // free on the compute stream; everything else overlaps compute.
  return from == CopySource::SameDevice ? CudaStream::Compute : CudaStream::CopyIn;
}

std::vector<std::string> cudaTraceStreams() {
  return {"compute", "copy-in", "collective"};
}

int cudaTraceStreamIndex(CudaStream s) {
  switch (s) {
  case CudaStream::Compute:
    return 0;
  case CudaStream::CopyIn:
    return 1;
  case CudaStream::Collective:
    return 2;
  default:
    return -1;
  }
}

} // namespace graphc
