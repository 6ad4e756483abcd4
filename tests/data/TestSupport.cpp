//===- TestSupport.cpp - Shared helpers of the input pipeline tests -------===//
#include "TestSupport.h"

#include "ir/Npy.h"
#include "ir/Random.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace graphc::testing {

std::string referenceDir() {
  std::string script = GRAPHC_SOURCE_DIR "/tests/data/make_reference.py";
  auto text = llvm::MemoryBuffer::getFile(script);
  if (!text) {
    ADD_FAILURE() << "cannot read " << script;
    return "";
  }
  std::string dir = std::string(GRAPHC_BINARY_DIR "/tests/data/reference-") +
                    llvm::utohexstr(stableHash((*text)->getBuffer()));
  if (llvm::sys::fs::exists(dir + "/DONE"))
    return dir;
  std::string tmp = dir + ".tmp" + std::to_string(llvm::sys::Process::getProcessId());
  llvm::sys::fs::remove_directories(tmp);
  std::string cmd = "/usr/bin/python3 " + script + " " + tmp + " > " + tmp + ".log 2>&1";
  llvm::sys::fs::create_directories(GRAPHC_BINARY_DIR "/tests/data");
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "failed: " << cmd << " (see " << tmp << ".log)";
    return "";
  }
  writeFile(tmp + "/DONE", "");
  // Another test process may have won the race; its copy is as good as ours.
  if (llvm::sys::fs::rename(tmp, dir))
    llvm::sys::fs::remove_directories(tmp);
  llvm::sys::fs::remove(tmp + ".log");
  return dir;
}

std::string freshDir(llvm::StringRef name) {
  std::string dir = (llvm::Twine(GRAPHC_BINARY_DIR "/tests/data/scratch/") + name + "-" +
                     llvm::Twine(llvm::sys::Process::getProcessId()))
                        .str();
  llvm::sys::fs::remove_directories(dir);
  EXPECT_FALSE(llvm::sys::fs::create_directories(dir)) << dir;
  return dir;
}

void writeFile(llvm::StringRef path, llvm::StringRef bytes) {
  std::ofstream f(path.str(), std::ios::binary);
  f.write(bytes.data(), (std::streamsize)bytes.size());
  EXPECT_TRUE(f.good()) << path.str();
}

Tensor loadNpy(llvm::StringRef path) {
  auto t = readNpy(path);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    return Tensor();
  }
  return *t;
}

} // namespace graphc::testing

// The ctest fixture `data_reference` runs this alone before the other tests.
TEST(Reference, Generate) {
  EXPECT_FALSE(graphc::testing::referenceDir().empty());
}
