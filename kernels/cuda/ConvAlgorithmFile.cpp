//===- ConvAlgorithmFile.cpp - Convolution algorithms kept across runs ----===//

#include "kernels/cuda/ConvAlgorithmFile.h"

#include "ir/InputFile.h"
#include "ir/OutputFile.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace graphc {
namespace cuda {
namespace {

constexpr llvm::StringLiteral kHeader =
    "# graphc cuDNN convolution algorithms 1: measured choices by device and shape "
    "(GRAPHC_CUDNN_CACHE; safe to delete)\n";

/// The largest file read back: far beyond any real table (a line per shape,
/// direction and policy), small enough never to matter.
constexpr uint64_t kMaxFileBytes = uint64_t(64) << 20;

std::optional<StoredAlgorithm> parseValue(llvm::StringRef algo, llvm::StringRef math,
                                          llvm::StringRef workspace) {
  StoredAlgorithm s;
  unsigned long long bytes = 0;
  if (algo.getAsInteger(10, s.algo) || s.algo < 0 || math.getAsInteger(10, s.math) || s.math < 0 ||
      workspace.getAsInteger(10, bytes))
    return std::nullopt;
  s.workspace = bytes;
  return s;
}

/// The table the file at `path` holds now; a missing or unreadable file holds
/// none.
AlgorithmTable readTable(const std::string &path) {
  if (path.empty())
    return {};
  auto in = openInput(path);
  if (!in) {
    llvm::consumeError(in.takeError());
    return {};
  }
  if (in->size() > kMaxFileBytes)
    return {};
  auto bytes = in->readAll();
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return {};
  }
  return parseAlgorithmTable((*bytes)->getBuffer());
}

} // namespace

std::string printAlgorithmTable(const AlgorithmTable &table) {
  std::string text(kHeader);
  llvm::raw_string_ostream os(text);
  for (const auto &[key, s] : table)
    os << key << '\t' << s.algo << '\t' << s.math << '\t' << s.workspace << '\n';
  return os.str();
}

AlgorithmTable parseAlgorithmTable(llvm::StringRef text, unsigned *skipped) {
  AlgorithmTable table;
  unsigned bad = 0;
  llvm::SmallVector<llvm::StringRef, 8> lines, fields;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    if (line.startswith("#") || line.trim().empty())
      continue;
    fields.clear();
    line.split(fields, '\t');
    std::optional<StoredAlgorithm> s;
    if (fields.size() == 4 && !fields[0].trim().empty())
      s = parseValue(fields[1], fields[2], fields[3]);
    if (!s) {
      ++bad;
      continue;
    }
    table[fields[0].str()] = *s;
  }
  if (skipped)
    *skipped = bad;
  return table;
}

std::string convAlgorithmFilePath() {
  if (const char *v = std::getenv("GRAPHC_CUDNN_CACHE"))
    return llvm::StringRef(v) == "off" ? std::string() : std::string(v);
  llvm::SmallString<256> p;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    p = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(p, home, ".cache");
  else
    return "";
  llvm::sys::path::append(p, "graphc", "cudnn-algorithms.txt");
  return std::string(p);
}

std::string deviceContextKey(llvm::StringRef gpuName, int major, int minor, size_t cudnnVersion,
                             int cudartVersion) {
  // Tabs would end the key in the file; keep the name on one field.
  std::string name = gpuName.trim().str();
  for (char &c : name)
    if (c == '\t' || c == '\n' || c == '\r')
      c = ' ';
  std::string key;
  llvm::raw_string_ostream os(key);
  os << name << " sm" << major << minor << " cudnn" << cudnnVersion << " cudart" << cudartVersion;
  return os.str();
}

ConvAlgorithmCache &ConvAlgorithmCache::instance() {
  static ConvAlgorithmCache cache(convAlgorithmFilePath());
  return cache;
}

void ConvAlgorithmCache::loadLocked() {
  if (loaded_)
    return;
  loaded_ = true;
  for (const auto &[key, s] : readTable(path_))
    choices_[key] = s;
}

std::optional<StoredAlgorithm> ConvAlgorithmCache::find(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex_);
  loadLocked();
  auto it = choices_.find(key);
  return it == choices_.end() ? std::nullopt : std::optional<StoredAlgorithm>(it->second);
}

StoredAlgorithm ConvAlgorithmCache::add(const std::string &key, StoredAlgorithm choice,
                                        bool persist, uint64_t budget) {
  std::lock_guard<std::mutex> lock(mutex_);
  loadLocked();
  auto [it, inserted] = choices_.try_emplace(key, choice);
  if (!inserted && it->second.workspace <= budget)
    return it->second;
  it->second = choice;
  if (persist && !path_.empty())
    added_[key] = choice;
  return choice;
}

llvm::Error ConvAlgorithmCache::save() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (added_.empty())
    return llvm::Error::success();
  // What other processes wrote since we read it stays; ours wins a clash.
  AlgorithmTable table = readTable(path_);
  for (const auto &[key, s] : added_)
    table[key] = s;
  llvm::StringRef dir = llvm::sys::path::parent_path(path_);
  if (!dir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      return llvm::createStringError(ec, "cannot create '%s': %s", dir.str().c_str(),
                                     ec.message().c_str());
  if (auto e = writeOutputFile(path_, printAlgorithmTable(table)))
    return e;
  added_.clear();
  return llvm::Error::success();
}

} // namespace cuda
} // namespace graphc
