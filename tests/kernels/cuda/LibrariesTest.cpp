//===- LibrariesTest.cpp - Finding and opening cuDNN and cuBLAS -----------===//
//
// Runs on any machine: the search order, the error that names every path,
// the function tables (when the libraries are installed, which needs no
// GPU), and CudaBackend::create failing cleanly without a device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cuda/CudaLibraries.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cudnn_version.h>
#include <dlfcn.h>

namespace graphc {
namespace {

/// A fresh directory under the build tree.
std::string tempDir(llvm::StringRef leaf) {
  llvm::SmallString<256> dir(GRAPHC_BINARY_DIR);
  llvm::sys::path::append(dir, "cuda_libraries_test", leaf);
  llvm::sys::fs::remove_directories(dir);
  EXPECT_FALSE(llvm::sys::fs::create_directories(dir));
  return std::string(dir);
}

TEST(CudaLibraries, SearchOrderIsEnvironmentLoaderThenWheels) {
  std::string venv = tempDir("venv");
  std::string wheel = venv + "/lib/python3.11/site-packages/nvidia/cudnn/lib";
  ASSERT_FALSE(llvm::sys::fs::create_directories(wheel));
  LibrarySearchEnv env;
  env.libraryPath = "/opt/a:/opt/b/";
  env.virtualEnv = venv;
  auto c = librarySearchCandidates("libcudnn.so.9", env);
  ASSERT_GE(c.size(), 4u);
  EXPECT_EQ(c[0], "/opt/a/libcudnn.so.9");
  EXPECT_EQ(c[1], "/opt/b/libcudnn.so.9");
  EXPECT_EQ(c[2], "libcudnn.so.9");
  EXPECT_EQ(c[3], wheel + "/libcudnn.so.9");
  // cuBLAS lives in another wheel, which this environment does not have.
  auto b = librarySearchCandidates("libcublas.so.13", env);
  for (const std::string &s : b)
    EXPECT_EQ(s.find(venv), std::string::npos) << s;
  EXPECT_EQ(wheelPackageFor("libcudnn.so.9"), "cudnn");
  EXPECT_EQ(wheelPackageFor("libcublas.so.13"), "cublas");
  EXPECT_EQ(wheelPackageFor("libcublasLt.so.13"), "cublas");
  EXPECT_EQ(wheelPackageFor("libnccl.so.2"), "nccl");
}

TEST(CudaLibraries, AMissingLibraryNamesEverythingTried) {
  std::string found;
  auto h = openCudaLibrary("Nothing", "libgraphc_no_such_library.so.7", found);
  ASSERT_FALSE((bool)h);
  std::string msg = llvm::toString(h.takeError());
  EXPECT_NE(msg.find("cannot load Nothing (libgraphc_no_such_library.so.7)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the loader search path"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GRAPHC_CUDA_LIBRARY_PATH"), std::string::npos) << msg;
}

TEST(CudaLibraries, TablesResolveWhereTheLibrariesAreInstalled) {
  // Without the libraries on this machine there is nothing to resolve; the
  // message of that case is checked above.
  std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  void *probe = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!probe)
    GTEST_SKIP() << soname << " is not on the loader path";
  auto libs = loadCudaLibraries();
  ASSERT_TRUE((bool)libs) << llvm::toString(libs.takeError());
  const CudaLibraries &l = **libs;
  EXPECT_EQ(l.cudnnVersion / 10000, (size_t)CUDNN_MAJOR);
  EXPECT_NE(l.cudnn.cudnnConvolutionBackwardFilter, nullptr);
  EXPECT_NE(l.cudnn.cudnnSoftmaxBackward, nullptr);
  EXPECT_NE(l.cublas.cublasSgemmBatched, nullptr);
  EXPECT_NE(l.cublas.cublasSetWorkspace_v2, nullptr);
  EXPECT_STREQ(l.cudnn.cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
  // The same tables on every call.
  auto again = loadCudaLibraries();
  ASSERT_TRUE((bool)again);
  EXPECT_EQ(*again, *libs);
}

TEST(CudaBackend, CreationFailsCleanlyWithoutADevice) {
  if (cudaDeviceAvailable()) {
    EXPECT_NE(strictBackend(), nullptr);
    auto none = CudaBackend::create(1 << 20);
    ASSERT_FALSE((bool)none);
    EXPECT_NE(llvm::toString(none.takeError()).find("no CUDA device"), std::string::npos);
    return;
  }
  auto b = CudaBackend::create(0);
  ASSERT_FALSE((bool)b);
  std::string msg = llvm::toString(b.takeError());
  EXPECT_FALSE(msg.empty());
}

TEST(CudaBackend, Tf32SwitchFromTheEnvironment) {
  ::setenv("GRAPHC_CUDA_TF32", "0", 1);
  EXPECT_FALSE(cudaBackendOptionsFromEnv().allowTF32);
  ::setenv("GRAPHC_CUDA_TF32", "1", 1);
  EXPECT_TRUE(cudaBackendOptionsFromEnv().allowTF32);
  ::unsetenv("GRAPHC_CUDA_TF32");
  EXPECT_TRUE(cudaBackendOptionsFromEnv().allowTF32);
}

} // namespace
} // namespace graphc
