//===- Initializers.h - First values of variables ----------------*- C++ -*-===//
//
// Turns a variable's Initializer into a tensor. The same (seed, variable name)
// always gives the same values. Fans follow PyTorch: for a weight of shape
// [out, in, k...], fan_in = in * prod(k) and fan_out = out * prod(k).
//
//   zeros | ones | constant(v) | normal(mean, std) | uniform(lo, hi)
//   trunc_normal(mean, std, lo, hi)      redraws outside [lo, hi]
//   kaiming_normal(gain, mode)           std = gain / sqrt(fan), mode 0: fan_in, 1: fan_out
//   kaiming_uniform(a)                   bound = sqrt(6 / ((1 + a^2) fan_in))
//   xavier_uniform(gain)                 bound = gain * sqrt(6 / (fan_in + fan_out))
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

/// The variable's data if attached, else its initializer drawn with `seed`.
llvm::Expected<Tensor> initialValue(const Variable &v, uint64_t seed);

/// trunc_normal must keep at least this share of its draws (it redraws).
inline constexpr double kMinTruncatedMass = 0.01;

/// Checks an initializer: a known function with the right arity, finite
/// arguments (a NaN or infinite one gives a model that computes only NaN),
/// and each function's own rules: standard deviations not negative, bounds in
/// order, kaiming_normal's mode 0 or 1, and a trunc_normal interval that keeps
/// at least 1% of the draws. The error names the call ("initializer
/// constant(nan): ...").
llvm::Error checkInitializerArgs(const Initializer &init);

/// checkInitializerArgs for a variable without data, naming it; elided data
/// (a text dump without weights) is refused here, where values are needed.
llvm::Error checkInitializer(const Variable &v);

} // namespace graphc
