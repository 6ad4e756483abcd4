//===- Random.h - Deterministic random streams -------------------*- C++ -*-===//
//
// Every random number in graphc comes from a stream derived from (seed, a key):
// the key is a variable's name for initial values, and (tower, node) for
// dropout masks, so the same seed gives the same result on any machine, and
// each tower draws differently. splitmix64 to derive, xoshiro256** to draw.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <cstdint>

namespace graphc {

inline uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A stable 64-bit hash of a string (FNV-1a), independent of the platform.
inline uint64_t stableHash(llvm::StringRef s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class RandomStream {
public:
  RandomStream(uint64_t seed, uint64_t key) {
    uint64_t s = seed ^ (key * 0xd1342543de82ef95ull);
    for (uint64_t &w : state_)
      w = splitmix64(s);
  }

  uint64_t next() {
    uint64_t result = rotl(state_[1] * 5, 7) * 9, t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  /// Uniform in [0, 1).
  double uniform() { return (next() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; one value per call for simplicity).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300)
      u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

} // namespace graphc
