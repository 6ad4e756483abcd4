//===- CheckpointDir.cpp - Step files, `latest`, keeping K, resuming ------===//
//
// The order of a save is what makes a crash harmless: the step file is
// written (temporary file, fsync, rename), then `latest` is pointed at it the
// same way, and only then are old step files removed. A kill at any moment
// leaves `latest` naming a complete file; a temporary file left by a killed
// process is removed by the next save.
//
//===----------------------------------------------------------------------===//
#include "executor/Checkpoint.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/OutputFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <csignal>
#include <unistd.h>

namespace graphc {

namespace {

constexpr llvm::StringLiteral kLatest = "latest";

std::string join(llvm::StringRef dir, llvm::StringRef file) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, file);
  return p.str().str();
}

std::string stepFileName(uint64_t step) {
  char name[40];
  snprintf(name, sizeof(name), "step-%08llu.gck", (unsigned long long)step);
  return name;
}

/// "step-00000042.gck" -> 42.
std::optional<uint64_t> stepOf(llvm::StringRef file) {
  uint64_t step;
  if (!file.consume_front("step-") || !file.consume_back(".gck") || file.empty() ||
      file.getAsInteger(10, step))
    return std::nullopt;
  return step;
}

/// The step files of `dir`, newest first.
std::vector<std::pair<uint64_t, std::string>> stepFiles(llvm::StringRef dir) {
  std::vector<std::pair<uint64_t, std::string>> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (auto step = stepOf(llvm::sys::path::filename(it->path())))
      files.emplace_back(*step, it->path());
  llvm::sort(files, [](auto &a, auto &b) { return a.first > b.first; });
  return files;
}

/// Bytes from a file, shown on one line.
std::string shown(llvm::StringRef bytes) {
  std::string out;
  for (char c : bytes.take_front(60)) {
    if (c == '\n')
      out += "\\n";
    else if (llvm::isPrint(c))
      out += c;
    else
      out += "\\x" + llvm::utohexstr((unsigned char)c, /*LowerCase=*/true, /*Width=*/2);
  }
  return bytes.size() > 60 ? out + "..." : out;
}

/// The file name `latest` holds, or std::nullopt when there is no `latest`.
llvm::Expected<std::optional<std::string>> readLatest(llvm::StringRef dir) {
  std::string latest = join(dir, kLatest);
  if (!llvm::sys::fs::exists(latest))
    return std::nullopt;
  auto buf = readInputFile(latest);
  if (!buf)
    return buf.takeError();
  llvm::StringRef name = (*buf)->getBuffer();
  name.consume_back("\n");
  bool plain = !name.empty() && name != "." && name != ".." &&
               llvm::all_of(name, [](char c) { return llvm::isPrint(c) && c != ' ' && c != '/'; });
  if (!plain)
    return makeError("'" + latest +
                     "' must hold one checkpoint file name and a newline; it holds '" +
                     shown((*buf)->getBuffer()) + "'");
  return std::optional<std::string>(name.str());
}

/// "; older checkpoints there: step-00000011.gck" when `dir` has some.
std::string olderOnes(llvm::StringRef dir, llvm::StringRef except) {
  std::vector<std::string> names;
  for (auto &[step, path] : stepFiles(dir))
    if (path != except)
      names.push_back(llvm::sys::path::filename(path).str());
  if (names.empty())
    return "";
  return "; other checkpoints there: " + llvm::join(names, ", ");
}

/// Temporary files (and write probes) of writers that no longer run: killed
/// mid-write.
void removeStaleTemporaries(llvm::StringRef dir) {
  std::error_code ec;
  std::vector<std::string> stale;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    size_t at = name.rfind(".tmp.");
    at = at != llvm::StringRef::npos ? at + 5 : name.startswith(".write-test.") ? 12 : at;
    int pid = 0;
    if (at == llvm::StringRef::npos || name.substr(at).getAsInteger(10, pid) || pid <= 0)
      continue;
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH)
      stale.push_back(it->path());
  }
  for (const std::string &p : stale)
    llvm::sys::fs::remove(p);
}

} // namespace

llvm::Error checkWritableDir(llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError("cannot create checkpoint directory '" + dir + "': " + ec.message());
  std::string probe = join(dir, ".write-test." + std::to_string(::getpid()));
  if (auto e = writeOutputFile(probe, "ok"))
    return makeError("checkpoint directory '" + dir +
                     "' is not writable: " + llvm::toString(std::move(e)));
  llvm::sys::fs::remove(probe);
  return llvm::Error::success();
}

/// Writes a step file with `write`, then `latest`, then keeps `keep`.
static llvm::Expected<std::string>
saveStepFile(llvm::StringRef dir, const CheckpointInfo &info, unsigned keep,
             llvm::function_ref<llvm::Error(llvm::StringRef path)> write) {
  assert(keep >= 1 && "keep at least the checkpoint just written");
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError("cannot create checkpoint directory '" + dir + "': " + ec.message());
  removeStaleTemporaries(dir);
  std::string name = stepFileName(info.step), path = join(dir, name);
  auto intact = [&]() -> std::string {
    auto latest = readLatest(dir);
    if (!latest) {
      llvm::consumeError(latest.takeError());
      return "";
    }
    return *latest ? "; the previous checkpoint '" + join(dir, **latest) + "' is intact" : "";
  };
  auto failed = [&](llvm::Error e) {
    std::string previous = intact();
    return makeError("checkpoint of step " + llvm::Twine(info.step) +
                     " not written: " + llvm::toString(std::move(e)) + previous);
  };
  if (auto e = write(path))
    return failed(std::move(e));
  if (auto e = writeOutputFile(join(dir, kLatest), name + "\n"))
    return failed(std::move(e));
  // Keep this one and the newest keep-1 before it. Newer step files are from
  // a future that resuming passed over (damaged): they go too.
  unsigned kept = 1;
  for (auto &[step, file] : stepFiles(dir)) {
    if (step == info.step)
      continue;
    if (step < info.step && kept < keep) {
      ++kept;
      continue;
    }
    llvm::sys::fs::remove(file);
  }
  return path;
}

llvm::Expected<std::string> saveCheckpointInDir(llvm::StringRef dir, const Module &forward,
                                                const Executor &ex, const Module &compiled,
                                                const CheckpointInfo &info, unsigned keep) {
  return saveStepFile(dir, info, keep, [&](llvm::StringRef path) {
    return saveCheckpoint(path, forward, ex, compiled, info);
  });
}

llvm::Expected<std::string> saveCheckpointInDir(llvm::StringRef dir, const Module &forward,
                                                llvm::ArrayRef<NamedTensor> tensors,
                                                const Module &compiled, const CheckpointInfo &info,
                                                unsigned keep) {
  return saveStepFile(dir, info, keep, [&](llvm::StringRef path) {
    return saveCheckpoint(path, forward, tensors, compiled, info);
  });
}

llvm::Expected<std::string> resolveCheckpoint(llvm::StringRef pathOrDir) {
  if (!llvm::sys::fs::exists(pathOrDir))
    return makeError("no checkpoint at '" + pathOrDir + "'");
  auto isDir = isInputDirectory(pathOrDir);
  if (!isDir)
    return isDir.takeError();
  if (!*isDir)
    return pathOrDir.str();
  auto latest = readLatest(pathOrDir);
  if (!latest)
    return latest.takeError();
  if (!*latest)
    return makeError("checkpoint directory '" + pathOrDir + "' has no 'latest' file" +
                     olderOnes(pathOrDir, ""));
  std::string file = join(pathOrDir, **latest);
  if (!llvm::sys::fs::exists(file)) {
    std::string latestPath = join(pathOrDir, kLatest), others = olderOnes(pathOrDir, "");
    return makeError(llvm::Twine("'") + latestPath + "' names '" + **latest +
                     "', which does not exist" + others);
  }
  return file;
}

llvm::Expected<LoadedCheckpoint> loadCheckpoint(llvm::StringRef pathOrDir) {
  auto path = resolveCheckpoint(pathOrDir);
  if (!path)
    return path.takeError();
  auto c = loadCheckpointFile(*path);
  if (!c && llvm::sys::fs::is_directory(pathOrDir))
    return makeError(llvm::toString(c.takeError()) + olderOnes(pathOrDir, *path));
  return c;
}

llvm::Expected<std::optional<LoadedCheckpoint>> loadForResume(llvm::StringRef dir,
                                                              std::vector<std::string> &notes) {
  if (!llvm::sys::fs::is_directory(dir))
    return std::nullopt;
  auto latest = readLatest(dir);
  if (!latest)
    return latest.takeError();
  auto files = stepFiles(dir);
  std::vector<std::string> candidates;
  if (*latest) {
    std::string named = join(dir, **latest);
    candidates.push_back(named);
    uint64_t newest = stepOf(**latest).value_or(UINT64_MAX);
    for (auto &[step, file] : files)
      if (step < newest && file != named)
        candidates.push_back(file);
  } else {
    if (files.empty())
      return std::nullopt;
    notes.push_back(("'" + dir + "' has no 'latest' file; trying its newest step file").str());
    for (auto &[step, file] : files)
      candidates.push_back(file);
  }
  std::vector<std::string> failures;
  for (const std::string &file : candidates) {
    auto c = llvm::sys::fs::exists(file)
                 ? loadCheckpointFile(file)
                 : llvm::Expected<LoadedCheckpoint>(makeError("'" + file + "' does not exist"));
    if (c) {
      if (!failures.empty())
        notes.push_back("resuming from the previous checkpoint '" + file + "'");
      return std::optional<LoadedCheckpoint>(std::move(*c));
    }
    failures.push_back(llvm::toString(c.takeError()));
    // Out of the rotation (so that keeping K never keeps it in place of a
    // good one), but kept for a person to look at.
    std::string aside = file + ".damaged";
    bool moved = llvm::sys::fs::exists(file) && !llvm::sys::fs::rename(file, aside);
    notes.push_back("passing over a damaged checkpoint" +
                    (moved ? " (renamed to '" + aside + "')" : std::string()) + ": " +
                    failures.back());
  }
  return makeError("no usable checkpoint in '" + dir + "': " + llvm::join(failures, "; "));
}

} // namespace graphc
