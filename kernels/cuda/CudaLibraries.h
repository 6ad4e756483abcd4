//===- CudaLibraries.h - cuDNN and cuBLAS through dlopen ---------*- C++ -*-===//
//
// Executables link only static cudart; cuDNN and cuBLAS are opened at run
// time, once per process, and reached through these tables (only the
// functions the kernels use). A missing library or symbol is an llvm::Error
// that names it and every path that was tried, so graphc and the CPU path
// start on machines without them.
//
// Where a library is looked for, in order:
//   1. every directory of GRAPHC_CUDA_LIBRARY_PATH (colon-separated),
//   2. the loader's own search (LD_LIBRARY_PATH, rpath, the ldconfig cache),
//   3. pip wheels' nvidia/<package>/lib directories under the active virtual
//      or conda environment, the user's site-packages and the system's
//      site-/dist-packages.
// Only the major version the kernels were compiled against is accepted
// (libcudnn.so.9, libcublas.so.13); cuDNN's run-time version is checked too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Error.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <string>

#include <string>
#include <vector>

namespace graphc {

#define GRAPHC_FN(name) decltype(&::name) name = nullptr

struct CudnnApi {
  GRAPHC_FN(cudnnGetVersion);
  GRAPHC_FN(cudnnGetErrorString);
  GRAPHC_FN(cudnnCreate);
  GRAPHC_FN(cudnnDestroy);
  GRAPHC_FN(cudnnSetStream);
  GRAPHC_FN(cudnnCreateTensorDescriptor);
  GRAPHC_FN(cudnnSetTensor4dDescriptor);
  GRAPHC_FN(cudnnDestroyTensorDescriptor);
  GRAPHC_FN(cudnnCreateFilterDescriptor);
  GRAPHC_FN(cudnnSetFilter4dDescriptor);
  GRAPHC_FN(cudnnDestroyFilterDescriptor);
  GRAPHC_FN(cudnnCreateConvolutionDescriptor);
  GRAPHC_FN(cudnnSetConvolution2dDescriptor);
  GRAPHC_FN(cudnnSetConvolutionGroupCount);
  GRAPHC_FN(cudnnSetConvolutionMathType);
  GRAPHC_FN(cudnnGetConvolution2dForwardOutputDim);
  GRAPHC_FN(cudnnDestroyConvolutionDescriptor);
  GRAPHC_FN(cudnnGetConvolutionForwardAlgorithm_v7);
  GRAPHC_FN(cudnnGetConvolutionBackwardDataAlgorithm_v7);
  GRAPHC_FN(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
  GRAPHC_FN(cudnnFindConvolutionForwardAlgorithm);
  GRAPHC_FN(cudnnFindConvolutionBackwardDataAlgorithm);
  GRAPHC_FN(cudnnFindConvolutionBackwardFilterAlgorithm);
  GRAPHC_FN(cudnnGetConvolutionForwardWorkspaceSize);
  GRAPHC_FN(cudnnGetConvolutionBackwardDataWorkspaceSize);
  GRAPHC_FN(cudnnGetConvolutionBackwardFilterWorkspaceSize);
  GRAPHC_FN(cudnnConvolutionForward);
  GRAPHC_FN(cudnnConvolutionBackwardData);
  GRAPHC_FN(cudnnConvolutionBackwardFilter);
  GRAPHC_FN(cudnnSoftmaxForward);
  GRAPHC_FN(cudnnSoftmaxBackward);
};

struct CublasApi {
  GRAPHC_FN(cublasCreate_v2);
  GRAPHC_FN(cublasDestroy_v2);
  GRAPHC_FN(cublasSetStream_v2);
  GRAPHC_FN(cublasSetMathMode);
  GRAPHC_FN(cublasSetWorkspace_v2);
  GRAPHC_FN(cublasGetStatusString);
  GRAPHC_FN(cublasSgemm_v2);
  GRAPHC_FN(cublasSgemmStridedBatched);
  GRAPHC_FN(cublasSgemmBatched);
};

#undef GRAPHC_FN

struct CudaLibraries {
  CudnnApi cudnn;
  CublasApi cublas;
  std::string cudnnPath, cublasPath; ///< where they were found
  size_t cudnnVersion = 0;           ///< cudnnGetVersion()
};

/// A library table loaded once per process: the first get() runs `load`,
/// later ones return the same table, or the same error without trying again.
/// Thread-safe; the table lives until the process ends.
template <typename T> class LoadOnce {
public:
  llvm::Expected<const T *> get(llvm::function_ref<llvm::Expected<std::unique_ptr<T>>()> load) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (table_)
      return table_;
    if (!failure_.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), failure_);
    auto fresh = load();
    if (!fresh) {
      failure_ = llvm::toString(fresh.takeError());
      return llvm::createStringError(llvm::inconvertibleErrorCode(), failure_);
    }
    table_ = fresh->release();
    return table_;
  }

private:
  std::mutex mutex_;
  T *table_ = nullptr;
  std::string failure_;
};

/// Opens both libraries on first call and returns the same tables (or the
/// same error) afterwards. Thread-safe.
llvm::Expected<const CudaLibraries *> loadCudaLibraries();

/// The file names tried for a library soname ("libcudnn.so.9"), in order,
/// under the given environment (the values of GRAPHC_CUDA_LIBRARY_PATH,
/// VIRTUAL_ENV, CONDA_PREFIX and HOME; empty when unset). The bare soname
/// stands for the loader's own search. Pip wheel directories are included
/// only when they exist. Pure apart from reading directories; tested.
struct LibrarySearchEnv {
  std::string libraryPath, virtualEnv, condaPrefix, home;
  static LibrarySearchEnv fromProcess();
};
std::vector<std::string> librarySearchCandidates(const std::string &soname,
                                                 const LibrarySearchEnv &env);

/// The wheel package directory a library lives in ("cudnn", "cublas").
std::string wheelPackageFor(const std::string &soname);

/// dlopens the first candidate of librarySearchCandidates that loads (the
/// process's environment) and says where in `foundAt`; the error names
/// `what`, the soname and every attempt.
llvm::Expected<void *> openCudaLibrary(llvm::StringRef what, const std::string &soname,
                                       std::string &foundAt);

} // namespace graphc
