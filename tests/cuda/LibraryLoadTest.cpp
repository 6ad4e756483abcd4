//===- LibraryLoadTest.cpp - Finding NCCL at run time ---------------------===//
//
// Where NCCL is looked for, in which order, and what the error says when it
// is missing or is not NCCL. The real library may be on this machine's
// loader path, so a missing library is simulated with candidates that do not
// exist and a stand-in libnccl.so.2 that lacks NCCL's functions.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/NcclLibrary.h"
#include "kernels/cuda/CudaLibraries.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {
std::string tempDir(const char *name) {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory(name, dir));
  return std::string(dir);
}
} // namespace

TEST(NcclSearch, LibraryPathFirstThenTheLoaderThenPipWheels) {
  std::string venv = tempDir("graphc-venv");
  std::string wheelLib = venv + "/lib/python3.12/site-packages/nvidia/nccl/lib";
  ASSERT_FALSE(llvm::sys::fs::create_directories(wheelLib));
  LibrarySearchEnv env;
  env.libraryPath = "/opt/a:/opt/b/";
  env.virtualEnv = venv;
  std::vector<std::string> c = librarySearchCandidates("libnccl.so.2", env);
  ASSERT_GE(c.size(), 4u);
  EXPECT_EQ(c[0], "/opt/a/libnccl.so.2");
  EXPECT_EQ(c[1], "/opt/b/libnccl.so.2");
  EXPECT_EQ(c[2], "libnccl.so.2") << "the bare soname: the loader's own search";
  EXPECT_EQ(c[3], wheelLib + "/libnccl.so.2");
  llvm::sys::fs::remove_directories(venv);
}

TEST(NcclSearch, AMissingLibraryNamesEveryPlaceTried) {
  std::string empty = tempDir("graphc-empty");
  std::string soname = "libgraphc-no-such-library.so.7";
  std::string foundAt;
  auto h = openFirstLibrary("NCCL", soname, {empty + "/" + soname, soname}, false, foundAt);
  ASSERT_FALSE(bool(h));
  std::string msg = llvm::toString(h.takeError());
  EXPECT_NE(msg.find("cannot load NCCL (" + soname + ")"), std::string::npos) << msg;
  EXPECT_NE(msg.find(empty + "/" + soname), std::string::npos) << msg;
  EXPECT_NE(msg.find("the loader search path ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("GRAPHC_CUDA_LIBRARY_PATH is unset"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Set GRAPHC_CUDA_LIBRARY_PATH"), std::string::npos) << msg;
  llvm::sys::fs::remove_directories(empty);
}

TEST(NcclSearch, TheLibraryPathWinsAndALibraryWithoutNcclIsNamed) {
  // The stand-in in GRAPHC_CUDA_LIBRARY_PATH is found before any real NCCL
  // on the loader path; it lacks ncclGetErrorString.
  LibrarySearchEnv env;
  env.libraryPath = FAKE_NCCL_DIR;
  auto api = openNccl(env);
  ASSERT_FALSE(bool(api));
  std::string msg = llvm::toString(api.takeError());
  // Appended, not "+": GCC 12 warns wrongly about std::string&& + a literal.
  std::string expected = FAKE_NCCL_DIR;
  expected.append("/libnccl.so.2 has no symbol 'ncclGetErrorString'");
  EXPECT_NE(msg.find(expected), std::string::npos) << msg;
}

TEST(NcclSearch, TheInstalledNcclLoadsWhereThereIsOne) {
  auto api = openNccl(LibrarySearchEnv{});
  if (!api) {
    std::string msg = llvm::toString(api.takeError());
    ASSERT_NE(msg.find("cannot load NCCL"), std::string::npos) << msg;
    GTEST_SKIP() << "NCCL is not installed here: " << msg;
  }
  EXPECT_EQ((*api)->version / 10000, NCCL_MAJOR);
  EXPECT_NE((*api)->ncclAllReduce, nullptr);
  EXPECT_NE((*api)->ncclCommInitAll, nullptr);
  EXPECT_FALSE((*api)->path.empty());
}
