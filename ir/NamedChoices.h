//===- NamedChoices.h - A flag's words for an enum, both ways ----*- C++ -*-===//
//
// Options whose values are words (--precision, --loss, --strategy,
// --bn-mode, --conv-algorithm, --cpu-layout, ...) name their values by one
// table each: the name of a value is its row's, parsing looks the word up,
// and an unknown word is one error that lists every known one, in the
// table's order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>

namespace graphc {

template <typename E> using NamedChoice = std::pair<E, const char *>;

/// The word of `value` in `table` (the first row's where none matches).
template <typename E> llvm::StringRef choiceName(llvm::ArrayRef<NamedChoice<E>> table, E value) {
  for (const NamedChoice<E> &row : table)
    if (row.first == value)
      return row.second;
  return table.front().second;
}

/// The value `word` names in `table`; otherwise "unknown <what> '<word>';
/// known: a, b, c".
template <typename E>
llvm::Expected<E> parseChoice(llvm::ArrayRef<NamedChoice<E>> table, llvm::StringRef word,
                              llvm::StringRef what) {
  std::string known;
  for (const NamedChoice<E> &row : table) {
    if (word == row.second)
      return row.first;
    known += (known.empty() ? "" : ", ") + std::string(row.second);
  }
  return makeError("unknown " + what + " '" + printable(word) + "'; known: " + known);
}

} // namespace graphc
