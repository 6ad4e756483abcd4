//===- DropoutKey.h - Which random stream a dropout mask draws from -*- C++ -*-===//
//
// The CPU and CUDA DropoutTrain kernels draw the same mask bits, so both derive
// their streams here: a node's key from its name without the tower prefix, its
// tower and its `seed` attribute (each tower draws its own masks; the same node
// draws the same masks under another tower count's renaming, and a graph
// without towers draws tower 0's, so a single-device plan spread over devices
// by --strategy model-parallel trains as one tower does), then one key per
// step and micro-batch. An element drops when 32 random bits fall below ratio * 2^32 and is
// scaled by 1 / (1 - ratio) otherwise.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "ir/Random.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>

namespace graphc {

/// The name without a leading "tower<N>/" or "tower_<N>/" component.
inline llvm::StringRef withoutTowerPrefix(llvm::StringRef name) {
  llvm::StringRef rest = name;
  if (!rest.consume_front("tower"))
    return name;
  rest.consume_front("_");
  size_t digits = 0;
  while (digits < rest.size() && llvm::isDigit(rest[digits]))
    ++digits;
  if (digits == 0 || digits >= rest.size() || rest[digits] != '/')
    return name;
  return rest.drop_front(digits + 1);
}

/// splitmix64 of a value (not of a running state).
inline uint64_t mixedKey(uint64_t x) {
  return splitmix64(x);
}

/// A DropoutTrain node's key, the same for every step. A copy that recomputes
/// a node for the backward pass (`recompute_of`, passes/Recompute.h) draws
/// that node's masks.
inline uint64_t dropoutNodeKey(const Node &n) {
  std::string name = n.attrs().getString("recompute_of", n.name());
  uint64_t key = stableHash(withoutTowerPrefix(name));
  // A graph without towers (tower -1) draws as tower 0: one tower and none are one run.
  key = mixedKey(key ^ ((uint64_t)(std::max(n.tower(), 0) + 1) * 0x9e3779b97f4a7c15ull));
  return mixedKey(key ^ (uint64_t)n.attrs().getInt("seed"));
}

/// The key of the node's mask at `step` (and, under gradient accumulation,
/// micro-batch `microStep` of its update: 0 is the step's key without it).
inline uint64_t dropoutStepKey(uint64_t nodeKey, uint64_t step, uint64_t microStep = 0) {
  return mixedKey(nodeKey ^ (step * 0xbf58476d1ce4e5b9ull) ^ (microStep * 0x94d049bb133111ebull));
}

/// Elements whose 32 random bits fall below this drop.
inline uint64_t dropoutThreshold(double ratio) {
  return (uint64_t)std::ldexp(std::clamp(ratio, 0.0, 1.0), 32);
}

/// What a kept element is multiplied by.
inline float dropoutScale(double ratio) {
  return ratio < 1 ? (float)(1.0 / (1.0 - ratio)) : 0.0f;
}

} // namespace graphc
