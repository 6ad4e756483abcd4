//===- CudaCheck.h - One checking macro per CUDA library ---------*- C++ -*-===//
//
// Every CUDA runtime, cuDNN and cuBLAS call in the kernels goes through one of
// these macros. A failure returns (from the enclosing function, which returns
// llvm::Error or llvm::Expected) an error that names the call, the library's
// status string and the file and line; callers add the node with
// withContext. Nothing here aborts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/CudaLibraries.h"

#include <cuda_runtime_api.h>

namespace graphc {

llvm::Error cudaCallError(cudaError_t status, const char *call, const char *file, int line);
llvm::Error cudnnCallError(const CudnnApi &api, cudnnStatus_t status, const char *call,
                           const char *file, int line);
llvm::Error cublasCallError(const CublasApi &api, cublasStatus_t status, const char *call,
                            const char *file, int line);

} // namespace graphc

#define GRAPHC_CUDA_TRY(call)                                                                      \
  do {                                                                                             \
    cudaError_t graphc_status_ = (call);                                                           \
    if (graphc_status_ != cudaSuccess)                                                             \
      return ::graphc::cudaCallError(graphc_status_, #call, __FILE__, __LINE__);                   \
  } while (0)

/// `api` is the CudnnApi table; `call` uses its function pointers.
#define GRAPHC_CUDNN_TRY(api, call)                                                                \
  do {                                                                                             \
    cudnnStatus_t graphc_status_ = (call);                                                         \
    if (graphc_status_ != CUDNN_STATUS_SUCCESS)                                                    \
      return ::graphc::cudnnCallError(api, graphc_status_, #call, __FILE__, __LINE__);             \
  } while (0)

#define GRAPHC_CUBLAS_TRY(api, call)                                                               \
  do {                                                                                             \
    cublasStatus_t graphc_status_ = (call);                                                        \
    if (graphc_status_ != CUBLAS_STATUS_SUCCESS)                                                   \
      return ::graphc::cublasCallError(api, graphc_status_, #call, __FILE__, __LINE__);            \
  } while (0)
