//===- Attribute.h - Node attributes ----------------------------*- C++ -*-===//
//
// An attribute is an integer, a float, a string, a dtype, an integer or float
// list, a string list, or a (small) tensor. A node's attributes are kept sorted
// by name so printing and comparison are deterministic.
//
// Which kind each op's attribute has is written once, in ir/OpAttrs.def, and
// the verifier holds every node to it before a pass or kernel reads it. The
// getters therefore expect that kind: an integer reads as a float, an integer
// list as a float list, and an empty list `[]` as any list; asked for another
// kind they assert (a bug: a node that skipped verification), and in a
// release build return the default. They never throw.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include "llvm/ADT/StringRef.h"

#include <string>
#include <variant>
#include <vector>

namespace graphc {

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;
using Strings = std::vector<std::string>;

using Attribute = std::variant<int64_t, double, std::string, DType, Ints, Floats, Strings, Tensor>;

class Attrs {
public:
  using Entry = std::pair<std::string, Attribute>;

  void set(llvm::StringRef name, Attribute value);
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  void erase(llvm::StringRef name);
  const Attribute *find(llvm::StringRef name) const;

  int64_t getInt(llvm::StringRef name, int64_t dflt = 0) const;
  double getFloat(llvm::StringRef name, double dflt = 0) const;
  std::string getString(llvm::StringRef name, llvm::StringRef dflt = "") const;
  DType getDType(llvm::StringRef name, DType dflt = DType::F32) const;
  Ints getInts(llvm::StringRef name, const Ints &dflt = {}) const;
  Floats getFloats(llvm::StringRef name, const Floats &dflt = {}) const;
  Strings getStrings(llvm::StringRef name) const;
  const Tensor *getTensor(llvm::StringRef name) const;

  const std::vector<Entry> &entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  bool operator==(const Attrs &o) const { return entries_ == o.entries_; }

private:
  std::vector<Entry> entries_;
};

} // namespace graphc
