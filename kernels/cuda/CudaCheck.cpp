//===- CudaCheck.cpp - Messages for failed CUDA library calls -------------===//

#include "kernels/cuda/CudaCheck.h"

#include "ir/Diagnostics.h"

#include "llvm/Support/Path.h"

#include <string>

namespace graphc {

static llvm::Error callError(const char *call, const llvm::Twine &status, const char *file,
                             int line) {
  return makeError(llvm::Twine(call) + " failed: " + status + " (" +
                   llvm::sys::path::filename(file) + ":" + llvm::Twine(line) + ")");
}

llvm::Error cudaCallError(cudaError_t status, const char *call, const char *file, int line) {
  return callError(call, llvm::Twine(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status),
                   file, line);
}

llvm::Error cudnnCallError(const CudnnApi &api, cudnnStatus_t status, const char *call,
                           const char *file, int line) {
  const char *text = api.cudnnGetErrorString ? api.cudnnGetErrorString(status) : nullptr;
  std::string s = text ? std::string(text) : "cuDNN status " + std::to_string((int)status);
  return callError(call, s, file, line);
}

llvm::Error cublasCallError(const CublasApi &api, cublasStatus_t status, const char *call,
                            const char *file, int line) {
  const char *text = api.cublasGetStatusString ? api.cublasGetStatusString(status) : nullptr;
  std::string s = text ? std::string(text) : "cuBLAS status " + std::to_string((int)status);
  return callError(call, s, file, line);
}

} // namespace graphc
