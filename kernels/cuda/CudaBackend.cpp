//===- CudaBackend.cpp - Creating a device's handles; the error word ------===//

#include "kernels/cuda/CudaBackend.h"

#include "ir/Diagnostics.h"
#include "kernels/cuda/ConvAlgorithmFile.h"
#include "kernels/cuda/ConvPlan.h"
#include "kernels/cuda/CudaCheck.h"
#include "kernels/cuda/CudaLibraries.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>

namespace graphc {

CudaBackendOptions cudaBackendOptionsFromEnv() {
  CudaBackendOptions o;
  if (const char *v = std::getenv("GRAPHC_CUDA_TF32"))
    o.allowTF32 = std::strcmp(v, "0") != 0;
  if (const char *v = std::getenv("GRAPHC_CUDNN_DETERMINISTIC"))
    o.deterministic = std::strcmp(v, "0") != 0;
  if (const char *v = std::getenv("GRAPHC_CUDNN_BENCHMARK"))
    o.measureAlgorithms = std::strcmp(v, "0") != 0;
  return o;
}

llvm::Expected<std::unique_ptr<CudaBackend>> CudaBackend::create(int ordinal,
                                                                 CudaBackendOptions options) {
  auto libs = loadCudaLibraries();
  if (!libs)
    return libs.takeError();
  int count = 0;
  GRAPHC_CUDA_TRY(cudaGetDeviceCount(&count));
  if (ordinal < 0 || ordinal >= count)
    return makeError("no CUDA device " + llvm::Twine(ordinal) + " (" + llvm::Twine(count) +
                     " visible)");
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->ordinal_ = ordinal;
  b->options_ = options;
  b->libs_ = *libs;
  GRAPHC_CUDA_TRY(cudaSetDevice(ordinal));
  GRAPHC_CUDA_TRY(
      cudaDeviceGetAttribute(&b->multiprocessors_, cudaDevAttrMultiProcessorCount, ordinal));
  cudaDeviceProp prop;
  GRAPHC_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  b->capability_ = {prop.major, prop.minor};
  b->gpuName_ = prop.name;
  int runtime = 0;
  GRAPHC_CUDA_TRY(cudaRuntimeGetVersion(&runtime));
  b->context_ =
      cuda::deviceContextKey(prop.name, prop.major, prop.minor, b->libs_->cudnnVersion, runtime);
  size_t freeBytes = 0, totalBytes = 0;
  GRAPHC_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
  b->workspaceBudget_ = cuda::convWorkspaceBudget(freeBytes);
  const CudnnApi &dnn = b->libs_->cudnn;
  const CublasApi &blas = b->libs_->cublas;
  GRAPHC_CUDNN_TRY(dnn, dnn.cudnnCreate(&b->cudnn_));
  GRAPHC_CUBLAS_TRY(blas, blas.cublasCreate_v2(&b->cublas_));
  // TF32 for f32 GEMMs only when allowed; the default math mode never uses it.
  GRAPHC_CUBLAS_TRY(blas, blas.cublasSetMathMode(b->cublas_, options.allowTF32
                                                                 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                 : CUBLAS_DEFAULT_MATH));
  void *word = nullptr;
  GRAPHC_CUDA_TRY(cudaMalloc(&word, sizeof(DeviceErrorWord)));
  b->deviceWord_ = static_cast<DeviceErrorWord *>(word);
  GRAPHC_CUDA_TRY(cudaMemset(word, 0, sizeof(DeviceErrorWord)));
  return b;
}

std::string CudaBackend::dtypeRefusal(DType dtype) const {
  return cuda::dtypeRefusal(dtype, ordinal_, gpuName_, capability_);
}

CudaBackend::~CudaBackend() {
  // Measured convolution choices go to the file once the kernels that made
  // them are done with; a cache that cannot be written costs the next run a
  // measurement, not this one its result.
  if (auto e = cuda::ConvAlgorithmCache::instance().save())
    llvm::errs() << "note: cuDNN algorithm choices not kept in '"
                 << cuda::ConvAlgorithmCache::instance().path()
                 << "': " << llvm::toString(std::move(e)) << "\n";
  // Teardown errors have nowhere to go; the device may already be gone.
  if (libs_ && cublas_)
    libs_->cublas.cublasDestroy_v2(cublas_);
  if (libs_ && cudnn_)
    libs_->cudnn.cudnnDestroy(cudnn_);
  if (deviceWord_)
    cudaFree(deviceWord_);
}

int32_t CudaBackend::registerErrorSite(std::string what) {
  std::lock_guard<std::mutex> lock(sitesMutex_);
  sites_.push_back(std::move(what));
  return (int32_t)sites_.size();
}

llvm::Error CudaBackend::takeDeviceError() {
  DeviceErrorWord w;
  std::memset(&w, 0, sizeof(w));
  GRAPHC_CUDA_TRY(cudaSetDevice(ordinal_));
  GRAPHC_CUDA_TRY(cudaMemcpy(&w, deviceWord_, sizeof(w), cudaMemcpyDeviceToHost));
  if (w.site == 0)
    return llvm::Error::success();
  GRAPHC_CUDA_TRY(cudaMemset(deviceWord_, 0, sizeof(DeviceErrorWord)));
  std::string what;
  {
    std::lock_guard<std::mutex> lock(sitesMutex_);
    what = w.site >= 1 && (size_t)w.site <= sites_.size() ? sites_[w.site - 1]
                                                          : "an unknown kernel recorded bad data";
  }
  std::string msg =
      what + ": value " + std::to_string(w.value) + " at index " + std::to_string(w.index);
  if (w.count > 1)
    msg += " (" + std::to_string(w.count) + " elements in all)";
  return makeError(msg);
}

} // namespace graphc
