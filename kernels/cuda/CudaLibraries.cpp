//===- CudaLibraries.cpp - Opening cuDNN and cuBLAS at run time -----------===//
//
// One attempt per process: the first caller opens both libraries under a
// mutex and every later caller gets the same tables or the same message.
// Handles are never closed (the tables live as long as the process).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaLibraries.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cudnn_version.h>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace graphc {

namespace {

std::string envOr(const char *name) {
  const char *v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool isDirectory(const llvm::Twine &p) {
  return llvm::sys::fs::is_directory(p);
}

/// Sub-directories of `dir` whose names start with `prefix`, sorted.
std::vector<std::string> subdirs(const std::string &dir, llvm::StringRef prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.startswith(prefix) && isDirectory(it->path()))
      out.push_back(it->path());
  }
  llvm::sort(out);
  return out;
}

/// Directories that may hold pip wheels' nvidia/ packages.
std::vector<std::string> sitePackageDirs(const LibrarySearchEnv &env) {
  std::vector<std::string> roots;
  if (!env.virtualEnv.empty())
    roots.push_back(env.virtualEnv + "/lib");
  if (!env.condaPrefix.empty())
    roots.push_back(env.condaPrefix + "/lib");
  if (!env.home.empty())
    roots.push_back(env.home + "/.local/lib");
  roots.push_back("/usr/local/lib");
  roots.push_back("/usr/lib");
  std::vector<std::string> dirs;
  for (const std::string &root : roots) {
    std::vector<std::string> pythons = subdirs(root, "python3");
    for (const std::string &py : pythons)
      for (const char *leaf : {"site-packages", "dist-packages"})
        if (isDirectory(py + "/" + leaf))
          dirs.push_back(py + "/" + leaf);
  }
  return dirs;
}

template <typename F>
llvm::Error resolve(void *handle, const std::string &path, const char *name, F &slot) {
  void *p = dlsym(handle, name);
  if (!p)
    return makeError(llvm::Twine(path) + " has no symbol '" + name +
                     "'; the kernels need the functions of the version they were built with");
  slot = reinterpret_cast<F>(p);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<void *> openCudaLibrary(llvm::StringRef what, const std::string &soname,
                                       std::string &foundAt) {
  LibrarySearchEnv env = LibrarySearchEnv::fromProcess();
  std::vector<std::string> tried;
  for (const std::string &candidate : librarySearchCandidates(soname, env)) {
    dlerror();
    if (void *h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      foundAt = candidate == soname ? soname + " (loader search path)" : candidate;
      return h;
    }
    const char *why = dlerror();
    tried.push_back(candidate == soname
                        ? "the loader search path (" + std::string(why ? why : "") + ")"
                        : candidate);
  }
  return makeError("cannot load " + what + " (" + soname + "); tried " + llvm::join(tried, ", ") +
                   (env.libraryPath.empty() ? "; GRAPHC_CUDA_LIBRARY_PATH is unset" : "") +
                   ". Set GRAPHC_CUDA_LIBRARY_PATH to the directory that holds " + soname);
}

namespace {

#define GRAPHC_RESOLVE(table, handle, path, name)                                                  \
  if (auto e = resolve(handle, path, #name, table.name))                                           \
    return e;

llvm::Error loadCudnn(CudaLibraries &libs) {
  std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  auto h = openCudaLibrary("cuDNN", soname, libs.cudnnPath);
  if (!h)
    return h.takeError();
  CudnnApi &t = libs.cudnn;
  const std::string &p = libs.cudnnPath;
  GRAPHC_RESOLVE(t, *h, p, cudnnGetVersion)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetErrorString)
  GRAPHC_RESOLVE(t, *h, p, cudnnCreate)
  GRAPHC_RESOLVE(t, *h, p, cudnnDestroy)
  GRAPHC_RESOLVE(t, *h, p, cudnnSetStream)
  GRAPHC_RESOLVE(t, *h, p, cudnnCreateTensorDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnSetTensor4dDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnDestroyTensorDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnCreateFilterDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnSetFilter4dDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnDestroyFilterDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnCreateConvolutionDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnSetConvolution2dDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnSetConvolutionGroupCount)
  GRAPHC_RESOLVE(t, *h, p, cudnnSetConvolutionMathType)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolution2dForwardOutputDim)
  GRAPHC_RESOLVE(t, *h, p, cudnnDestroyConvolutionDescriptor)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolutionForwardAlgorithm_v7)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolutionBackwardDataAlgorithm_v7)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolutionBackwardFilterAlgorithm_v7)
  GRAPHC_RESOLVE(t, *h, p, cudnnFindConvolutionForwardAlgorithm)
  GRAPHC_RESOLVE(t, *h, p, cudnnFindConvolutionBackwardDataAlgorithm)
  GRAPHC_RESOLVE(t, *h, p, cudnnFindConvolutionBackwardFilterAlgorithm)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolutionForwardWorkspaceSize)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolutionBackwardDataWorkspaceSize)
  GRAPHC_RESOLVE(t, *h, p, cudnnGetConvolutionBackwardFilterWorkspaceSize)
  GRAPHC_RESOLVE(t, *h, p, cudnnConvolutionForward)
  GRAPHC_RESOLVE(t, *h, p, cudnnConvolutionBackwardData)
  GRAPHC_RESOLVE(t, *h, p, cudnnConvolutionBackwardFilter)
  GRAPHC_RESOLVE(t, *h, p, cudnnSoftmaxForward)
  GRAPHC_RESOLVE(t, *h, p, cudnnSoftmaxBackward)
  libs.cudnnVersion = t.cudnnGetVersion();
  if (libs.cudnnVersion / 10000 != CUDNN_MAJOR)
    return makeError("cuDNN at " + p + " is version " + llvm::Twine(libs.cudnnVersion) +
                     "; the kernels were built against major version " + llvm::Twine(CUDNN_MAJOR));
  return llvm::Error::success();
}

llvm::Error loadCublas(CudaLibraries &libs) {
  std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  auto h = openCudaLibrary("cuBLAS", soname, libs.cublasPath);
  if (!h)
    return h.takeError();
  CublasApi &t = libs.cublas;
  const std::string &p = libs.cublasPath;
  GRAPHC_RESOLVE(t, *h, p, cublasCreate_v2)
  GRAPHC_RESOLVE(t, *h, p, cublasDestroy_v2)
  GRAPHC_RESOLVE(t, *h, p, cublasSetStream_v2)
  GRAPHC_RESOLVE(t, *h, p, cublasSetMathMode)
  GRAPHC_RESOLVE(t, *h, p, cublasSetWorkspace_v2)
  GRAPHC_RESOLVE(t, *h, p, cublasGetStatusString)
  GRAPHC_RESOLVE(t, *h, p, cublasSgemm_v2)
  GRAPHC_RESOLVE(t, *h, p, cublasSgemmStridedBatched)
  GRAPHC_RESOLVE(t, *h, p, cublasSgemmBatched)
  return llvm::Error::success();
}

#undef GRAPHC_RESOLVE

} // namespace

LibrarySearchEnv LibrarySearchEnv::fromProcess() {
  LibrarySearchEnv env;
  env.libraryPath = envOr("GRAPHC_CUDA_LIBRARY_PATH");
  env.virtualEnv = envOr("VIRTUAL_ENV");
  env.condaPrefix = envOr("CONDA_PREFIX");
  env.home = envOr("HOME");
  return env;
}

std::string wheelPackageFor(const std::string &soname) {
  llvm::StringRef s(soname);
  s.consume_front("lib");
  // libcublasLt and libcublas share the "cublas" wheel.
  if (s.startswith("cublas"))
    return "cublas";
  return s.take_until([](char c) { return c == '.' || c == '_'; }).str();
}

std::vector<std::string> librarySearchCandidates(const std::string &soname,
                                                 const LibrarySearchEnv &env) {
  std::vector<std::string> out;
  llvm::SmallVector<llvm::StringRef, 4> dirs;
  llvm::StringRef(env.libraryPath).split(dirs, ':', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef d : dirs)
    out.push_back((d.rtrim('/') + "/" + soname).str());
  out.push_back(soname);
  std::string package = wheelPackageFor(soname);
  for (const std::string &site : sitePackageDirs(env)) {
    std::string lib = site + "/nvidia/" + package + "/lib";
    if (isDirectory(lib))
      out.push_back(lib + "/" + soname);
  }
  return out;
}

llvm::Expected<const CudaLibraries *> loadCudaLibraries() {
  static LoadOnce<CudaLibraries> once;
  return once.get([]() -> llvm::Expected<std::unique_ptr<CudaLibraries>> {
    auto fresh = std::make_unique<CudaLibraries>();
    if (auto e = loadCudnn(*fresh))
      return e;
    if (auto e = loadCublas(*fresh))
      return e;
    return fresh;
  });
}

} // namespace graphc
