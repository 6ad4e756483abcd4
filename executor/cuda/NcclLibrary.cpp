//===- NcclLibrary.cpp - Opening NCCL at run time -------------------------===//
//
// One attempt per process, under a mutex; the handle is never closed.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/NcclLibrary.h"

#include "ir/Diagnostics.h"
#include "kernels/cuda/CudaLibraries.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <dlfcn.h>
#include <mutex>

namespace graphc {

namespace {

template <typename F>
llvm::Error resolve(void *handle, const std::string &path, const char *name, F &slot) {
  void *p = dlsym(handle, name);
  if (!p)
    return makeError(llvm::Twine(path) + " has no symbol '" + name + "' (NCCL " +
                     llvm::Twine(NCCL_MAJOR) + ".14 or newer is needed)");
  slot = reinterpret_cast<F>(p);
  return llvm::Error::success();
}

llvm::Error open(NcclApi &t, const LibrarySearchEnv &env) {
  const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
  auto opened = openFirstLibrary("NCCL", soname, librarySearchCandidates(soname, env),
                                 !env.libraryPath.empty(), t.path);
  if (!opened)
    return withContext(opened.takeError(), "collectives across GPUs need NCCL");
  void *h = *opened;
#define GRAPHC_RESOLVE(name)                                                                       \
  if (auto e = resolve(h, t.path, #name, t.name))                                                  \
    return e;
  GRAPHC_RESOLVE(ncclGetVersion)
  GRAPHC_RESOLVE(ncclGetErrorString)
  GRAPHC_RESOLVE(ncclGetLastError)
  GRAPHC_RESOLVE(ncclCommInitAll)
  GRAPHC_RESOLVE(ncclGetUniqueId)
  GRAPHC_RESOLVE(ncclCommInitRankConfig)
  GRAPHC_RESOLVE(ncclCommFinalize)
  GRAPHC_RESOLVE(ncclCommDestroy)
  GRAPHC_RESOLVE(ncclCommAbort)
  GRAPHC_RESOLVE(ncclCommGetAsyncError)
  GRAPHC_RESOLVE(ncclAllReduce)
  GRAPHC_RESOLVE(ncclReduceScatter)
  GRAPHC_RESOLVE(ncclAllGather)
  GRAPHC_RESOLVE(ncclReduce)
  GRAPHC_RESOLVE(ncclBroadcast)
  GRAPHC_RESOLVE(ncclGroupStart)
  GRAPHC_RESOLVE(ncclGroupEnd)
#undef GRAPHC_RESOLVE
  if (t.ncclGetVersion(&t.version) != ncclSuccess || t.version / 10000 != NCCL_MAJOR)
    return makeError("NCCL at " + t.path + " reports version " + llvm::Twine(t.version) +
                     "; NCCL " + llvm::Twine(NCCL_MAJOR) + " is needed");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<void *> openFirstLibrary(llvm::StringRef what, const std::string &soname,
                                        llvm::ArrayRef<std::string> candidates, bool libraryPathSet,
                                        std::string &foundAt) {
  std::vector<std::string> tried;
  for (const std::string &candidate : candidates) {
    dlerror();
    if (void *h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      foundAt = candidate == soname ? soname + " (loader search path)" : candidate;
      return h;
    }
    const char *why = dlerror();
    tried.push_back(candidate == soname
                        ? "the loader search path (" + std::string(why ? why : "not found") + ")"
                        : candidate);
  }
  return makeError("cannot load " + what + " (" + soname + "); tried " + llvm::join(tried, ", ") +
                   (libraryPathSet ? "" : "; GRAPHC_CUDA_LIBRARY_PATH is unset") +
                   ". Set GRAPHC_CUDA_LIBRARY_PATH to the directory that holds " + soname);
}

llvm::Expected<std::unique_ptr<NcclApi>> openNccl(const LibrarySearchEnv &env) {
  auto api = std::make_unique<NcclApi>();
  if (auto e = open(*api, env))
    return e;
  return api;
}

llvm::Expected<const NcclApi *> loadNccl() {
  static LoadOnce<NcclApi> once;
  return once.get([] { return openNccl(LibrarySearchEnv::fromProcess()); });
}

llvm::Error ncclCallError(const NcclApi &api, ncclResult_t status, ncclComm_t comm,
                          const char *call, const char *file, int line) {
  std::string text = api.ncclGetErrorString ? api.ncclGetErrorString(status) : "";
  const char *last = api.ncclGetLastError ? api.ncclGetLastError(comm) : nullptr;
  if (last && *last)
    text += std::string(" (") + last + ")";
  return makeError(llvm::Twine(call) + " failed: NCCL status " + llvm::Twine((int)status) + ": " +
                   text + " (" + llvm::sys::path::filename(file) + ":" + llvm::Twine(line) + ")");
}

} // namespace graphc
