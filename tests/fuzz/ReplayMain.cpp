//===- ReplayMain.cpp - Runs a fuzz target over saved inputs --------------===//
//
// The main of a fuzz target in builds without libFuzzer: every file named on
// the command line, or found below a directory named there, is one input.
// A missing path is an error (a test pointed at the wrong folder must fail,
// not pass over nothing); a path list that yields no input at all is one too.
//
//===----------------------------------------------------------------------===//

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!llvm::sys::fs::exists(arg)) {
      llvm::errs() << "replay: no such file or directory: " << arg << "\n";
      return 2;
    }
    if (!llvm::sys::fs::is_directory(arg)) {
      files.push_back(arg);
      continue;
    }
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator it(arg, ec), end; it != end && !ec;
         it.increment(ec))
      if (llvm::sys::fs::is_regular_file(it->path()))
        files.push_back(it->path());
    if (ec) {
      llvm::errs() << "replay: " << arg << ": " << ec.message() << "\n";
      return 2;
    }
  }
  if (files.empty()) {
    llvm::errs() << "replay: no inputs\n";
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const std::string &f : files) {
    auto buffer = llvm::MemoryBuffer::getFile(f, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!buffer) {
      llvm::errs() << "replay: " << f << ": " << buffer.getError().message() << "\n";
      return 2;
    }
    // A copy of exactly the input's size, so that ASan catches a read past it.
    std::vector<uint8_t> bytes((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  llvm::outs() << "replay: " << files.size() << " inputs, no failure\n";
  return 0;
}
