//===- JsonFields.h - Reading the JSON files of placement ---------*- C++ -*-===//
//
// What the readers of cluster descriptions (Cluster.h) and clusters of tasks
// (Tasks.h) share: a view of one JSON object whose every error names the
// object ("devices[2] ('gpu:1'): missing field 'kind'"), and a bound on
// nesting checked before llvm::json parses (it recurses once per level, so
// a file of 100,000 brackets would exhaust the stack).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace graphc {

/// Reads the fields of one JSON object, naming it in every error.
class JsonFields {
public:
  JsonFields(const llvm::json::Object &o, std::string where) : o_(o), where_(std::move(where)) {}

  llvm::Expected<std::string> string(llvm::StringRef key) const;
  llvm::Expected<double> number(llvm::StringRef key) const;
  /// A whole number in [0, limit).
  llvm::Expected<unsigned> count(llvm::StringRef key, unsigned limit) const;
  llvm::Expected<const llvm::json::Array *> array(llvm::StringRef key) const;
  llvm::Expected<const llvm::json::Object *> object(llvm::StringRef key) const;
  /// An error naming the first key (in byte order) not in `known`.
  llvm::Error unknownKeys(llvm::ArrayRef<llvm::StringRef> known) const;
  const std::string &where() const { return where_; }

private:
  llvm::Expected<const llvm::json::Value *> get(llvm::StringRef key) const;
  llvm::Error wrongType(llvm::StringRef key, llvm::StringRef expected) const;

  const llvm::json::Object &o_;
  std::string where_;
};

/// Moves a value out of `v` into `out`, or passes its error on.
template <typename T> llvm::Error into(llvm::Expected<T> v, T &out) {
  if (!v)
    return v.takeError();
  out = std::move(*v);
  return llvm::Error::success();
}

/// Parses `text`, a `what` ("cluster file") in a format (`format`: "a
/// cluster description") that nests `formatDepth` deep. Deeper than
/// kMaxJsonDepth is refused before parsing.
inline constexpr size_t kMaxJsonDepth = 16;
llvm::Expected<llvm::json::Value> parseBoundedJson(llvm::StringRef text, llvm::StringRef what,
                                                   llvm::StringRef format, size_t formatDepth);

} // namespace graphc
