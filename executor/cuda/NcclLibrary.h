//===- NcclLibrary.h - NCCL through dlopen -----------------------*- C++ -*-===//
//
// Executables link only static cudart, so NCCL is opened at run time, once
// per process, the first time a collective group spans distinct physical GPUs
// or several workers (a run of one process on one GPU never needs it). It is looked for where cuDNN and cuBLAS
// are (kernels/cuda/CudaLibraries.h: GRAPHC_CUDA_LIBRARY_PATH, the loader's
// search, pip wheels' nvidia/nccl/lib); a missing library or symbol is an
// error naming it and every path tried. Only NCCL 2 is accepted, from 2.14
// on (non-blocking communicators: ncclCommInitRankConfig, ncclCommFinalize).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <nccl.h>

#include <memory>
#include <string>

namespace graphc {

#define GRAPHC_FN(name) decltype(&::name) name = nullptr

struct NcclApi {
  GRAPHC_FN(ncclGetVersion);
  GRAPHC_FN(ncclGetErrorString);
  GRAPHC_FN(ncclGetLastError);
  GRAPHC_FN(ncclCommInitAll);
  GRAPHC_FN(ncclGetUniqueId);
  GRAPHC_FN(ncclCommInitRankConfig);
  GRAPHC_FN(ncclCommFinalize);
  GRAPHC_FN(ncclCommDestroy);
  GRAPHC_FN(ncclCommAbort);
  GRAPHC_FN(ncclCommGetAsyncError);
  GRAPHC_FN(ncclAllReduce);
  GRAPHC_FN(ncclReduceScatter);
  GRAPHC_FN(ncclAllGather);
  GRAPHC_FN(ncclReduce);
  GRAPHC_FN(ncclBroadcast);
  GRAPHC_FN(ncclGroupStart);
  GRAPHC_FN(ncclGroupEnd);
  std::string path; ///< where it was found
  int version = 0;  ///< ncclGetVersion(), e.g. 22809
};

#undef GRAPHC_FN

struct LibrarySearchEnv;

/// Opens NCCL on first call (searching under the process's environment) and
/// returns the same table (or the same error) afterwards. Thread-safe.
llvm::Expected<const NcclApi *> loadNccl();

/// One uncached attempt under `env` (tests).
llvm::Expected<std::unique_ptr<NcclApi>> openNccl(const LibrarySearchEnv &env);

/// dlopens the first candidate that loads (a bare soname is the loader's own
/// search); the error names `what` and every candidate tried.
llvm::Expected<void *> openFirstLibrary(llvm::StringRef what, const std::string &soname,
                                        llvm::ArrayRef<std::string> candidates, bool libraryPathSet,
                                        std::string &foundAt);

/// An error for a failed NCCL call: the call, NCCL's status and last-error
/// text, file and line.
llvm::Error ncclCallError(const NcclApi &api, ncclResult_t status, ncclComm_t comm,
                          const char *call, const char *file, int line);

} // namespace graphc

#define GRAPHC_NCCL_TRY(api, comm, call)                                                           \
  do {                                                                                             \
    ncclResult_t graphc_status_ = (call);                                                          \
    if (graphc_status_ != ncclSuccess)                                                             \
      return ::graphc::ncclCallError(api, graphc_status_, comm, #call, __FILE__, __LINE__);        \
  } while (0)
