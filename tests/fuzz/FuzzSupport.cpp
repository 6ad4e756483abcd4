//===- FuzzSupport.cpp ----------------------------------------------------===//

#include "tests/fuzz/FuzzSupport.h"

#include "ir/Archive.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <unistd.h>

namespace graphc::fuzz {

namespace {

/// The scratch files this process wrote, removed when it exits (a fuzzing
/// run that ends by its time limit exits normally).
struct ScratchFiles {
  std::set<std::string> paths;
  ~ScratchFiles() {
    for (const std::string &p : paths)
      std::remove(p.c_str());
  }
} scratchFiles;

} // namespace

std::string scratchFile(llvm::StringRef bytes, llvm::StringRef extension) {
  const char *dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/graphc-fuzz-" +
                     std::to_string(getpid()) + extension.str();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f)) {
    std::perror(path.c_str());
    std::abort();
  }
  scratchFiles.paths.insert(path);
  return path;
}

void readArchiveBothWays(llvm::StringRef raw, llvm::StringRef extension,
                         llvm::function_ref<void(const std::string &path)> read) {
  read(scratchFile(raw, extension));
  read(scratchFile(withValidChecksums(raw), extension));
}

void broken(llvm::StringRef what, llvm::Error why) {
  llvm::errs() << "fuzz: broken promise: " << what;
  if (why)
    llvm::errs() << ": " << llvm::toString(std::move(why));
  else
    llvm::consumeError(std::move(why));
  llvm::errs() << "\n";
  std::abort();
}

} // namespace graphc::fuzz
