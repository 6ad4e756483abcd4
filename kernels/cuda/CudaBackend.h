//===- CudaBackend.h - Per-device state the CUDA kernels share ---*- C++ -*-===//
//
// One CudaBackend per (logical) CUDA device, created by the executor and
// handed to every kernel through KernelEnv::backend. It owns:
//   - the device ordinal (the physical GPU),
//   - the cuDNN and cuBLAS handles, created on that device, and the function
//     tables of the dlopen'ed libraries (CudaLibraries.h): executables link
//     only static cudart, so graphc and the CPU path start without cuDNN,
//   - the TF32 switch (convolutions and GEMMs; our own kernels never use it),
//   - the device error word (DeviceCommon.h): kernels that meet bad data (a
//     label out of range) must not fault the GPU, so they record the first
//     such event in a small device buffer and the executor turns it into an
//     llvm::Error with takeDeviceError() after a step's streams are
//     synchronized.
//
// Threading: the handles are bound to a stream per call (cudnnSetStream),
// under handleMutex(); kernels assume the calling thread's current device is
// ordinal() (the executor sets it before launching on this device).
//
// This header needs no CUDA headers (handles are forward-declared), so the
// executor can include it anywhere.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"
#include "kernels/cuda/ComputeCapability.h"
#include "kernels/cuda/DeviceCommon.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct cudnnContext;
struct cublasContext;

namespace graphc {

struct CudaLibraries;

struct CudaBackendOptions {
  /// TF32 tensor-core math for f32 convolutions and GEMMs (10-bit mantissa
  /// products, f32 accumulation). Off: strict FP32 everywhere.
  bool allowTF32 = true;
  /// Only deterministic cuDNN convolution algorithms where the shape has one
  /// (bitwise-repeatable steps). Off: cuDNN's first answer that fits, as
  /// PyTorch's default (torch.backends.cudnn.deterministic = False) allows.
  bool deterministic = true;
  /// Rank convolution algorithms by cudnnFind* (each timed once per shape,
  /// device model and library versions, then kept in the choice file:
  /// ConvAlgorithmFile.h) instead of cuDNN's heuristics, as PyTorch's
  /// torch.backends.cudnn.benchmark = True, but repeatable given the file.
  bool measureAlgorithms = true;
};

/// The defaults with the environment applied: GRAPHC_CUDA_TF32=0 turns TF32
/// off, GRAPHC_CUDNN_DETERMINISTIC=0 allows non-deterministic convolution
/// algorithms, GRAPHC_CUDNN_BENCHMARK=0 takes cuDNN's heuristics instead of
/// measuring (any other value, or none, keeps the default). The executor may
/// override the result from its own options before create().
CudaBackendOptions cudaBackendOptionsFromEnv();

class CudaBackend {
public:
  /// Opens cuDNN and cuBLAS (once per process), selects device `ordinal` on
  /// the calling thread and creates the handles there. Errors name the
  /// library, the paths searched, or the failing CUDA call.
  static llvm::Expected<std::unique_ptr<CudaBackend>>
  create(int ordinal, CudaBackendOptions options = cudaBackendOptionsFromEnv());
  ~CudaBackend();
  CudaBackend(const CudaBackend &) = delete;
  CudaBackend &operator=(const CudaBackend &) = delete;

  int ordinal() const { return ordinal_; }
  bool allowTF32() const { return options_.allowTF32; }
  bool deterministic() const { return options_.deterministic; }
  bool measureAlgorithms() const { return options_.measureAlgorithms; }
  /// The GPU model, compute capability and library versions that convolution
  /// choices are kept under (deviceContextKey).
  const std::string &deviceContext() const { return context_; }
  /// The workspace a convolution algorithm may take on this device
  /// (convWorkspaceBudget of the memory free at create()).
  size_t convWorkspaceBudget() const { return workspaceBudget_; }
  const CudaLibraries &libraries() const { return *libs_; }
  cudnnContext *cudnn() const { return cudnn_; }
  cublasContext *cublas() const { return cublas_; }
  /// Held while a handle is bound to a stream and used.
  std::mutex &handleMutex() { return handleMutex_; }
  /// Streaming multiprocessors of the device (launch sizing).
  int multiprocessors() const { return multiprocessors_; }
  /// Why this GPU cannot compute in `dtype` (bf16 before compute capability
  /// 8.0: cuda::dtypeRefusal); empty where it can.
  std::string dtypeRefusal(DType dtype) const;

  /// A kernel that can flag bad data registers what it would report, once at
  /// creation ("node 'loss' (SoftmaxCrossEntropy): label out of range [0, 10)");
  /// the id (>= 1) is what its device code writes into the error word.
  int32_t registerErrorSite(std::string what);
  /// The error word as device code addresses it.
  DeviceErrorWord *deviceErrorWord() const { return deviceWord_; }
  /// After the device's streams are synchronized (it copies the word back
  /// with a blocking cudaMemcpy): the first recorded bad-data event as an
  /// error ("node 'loss' (SoftmaxCrossEntropy): label out of
  /// range [0, 10): value 12 at index 3 (2 elements in all)"), and clears the
  /// word. Success when nothing was recorded.
  llvm::Error takeDeviceError();

private:
  CudaBackend() = default;

  int ordinal_ = 0;
  CudaBackendOptions options_;
  const CudaLibraries *libs_ = nullptr;
  cudnnContext *cudnn_ = nullptr;
  cublasContext *cublas_ = nullptr;
  int multiprocessors_ = 1;
  cuda::ComputeCapability capability_;
  std::string gpuName_;
  std::string context_;
  size_t workspaceBudget_ = 0;
  std::mutex handleMutex_;
  DeviceErrorWord *deviceWord_ = nullptr; ///< cudaMalloc'ed, zeroed
  std::mutex sitesMutex_;
  std::vector<std::string> sites_;
};

/// The backend a CUDA kernel factory was given.
inline CudaBackend &cudaBackend(const KernelEnv &env) {
  return *static_cast<CudaBackend *>(env.backend);
}

} // namespace graphc
