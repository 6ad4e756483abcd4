#include "ir/Initializers.h"

#include "ir/AttributeText.h"
#include "ir/Diagnostics.h"
#include "ir/Random.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>

namespace graphc {

namespace {
struct Fans {
  double in = 1, out = 1;
};

Fans fans(const TensorType &t) {
  Fans f;
  if (t.rank() == 0)
    return f;
  if (t.rank() == 1) {
    f.in = f.out = (double)t.shape[0];
    return f;
  }
  double receptive = 1;
  for (size_t i = 2; i < t.rank(); ++i)
    receptive *= (double)t.shape[i];
  f.in = (double)t.shape[1] * receptive;
  f.out = (double)t.shape[0] * receptive;
  return f;
}

int arity(llvm::StringRef fn) {
  return llvm::StringSwitch<int>(fn)
      .Cases("zeros", "ones", 0)
      .Cases("constant", "kaiming_uniform", "xavier_uniform", 1)
      .Cases("normal", "uniform", "kaiming_normal", 2)
      .Case("trunc_normal", 4)
      .Default(-1);
}

/// "uniform(-0.0625, 0.0625)".
std::string describeCall(const Initializer &init) {
  std::string call = init.fn + "(";
  for (size_t i = 0; i < init.args.size(); ++i)
    call += (i ? ", " : "") + formatDouble(init.args[i]);
  return call + ")";
}

/// "6.7e-14%", "95%".
std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2g%%", 100 * share);
  return buf;
}

/// The normal distribution's mass in [lo, hi].
double normalMass(double mean, double std, double lo, double hi) {
  auto cdf = [&](double x) { return 0.5 * std::erfc((mean - x) / (std * std::sqrt(2.0))); };
  return cdf(hi) - cdf(lo);
}

} // namespace

llvm::Error checkInitializerArgs(const Initializer &init) {
  int n = arity(init.fn);
  if (n < 0)
    return makeError("unknown initializer '" + printable(init.fn) + "'");
  if ((int)init.args.size() != n)
    return makeError("initializer " + init.fn + " takes " + llvm::Twine(n) + " arguments, not " +
                     llvm::Twine(init.args.size()));
  const std::vector<double> &a = init.args;
  std::string call = describeCall(init);
  // A NaN or infinite parameter gives a model that computes nothing but NaN.
  for (double x : a)
    if (!std::isfinite(x))
      return makeError("initializer " + call + ": its arguments must be finite numbers");
  auto bad = [&](const llvm::Twine &why) { return makeError("initializer " + call + ": " + why); };
  if ((init.fn == "normal" || init.fn == "trunc_normal") && a[1] < 0)
    return bad("the standard deviation must not be negative");
  if (init.fn == "uniform" && a[0] > a[1])
    return bad("the lower bound must not exceed the upper");
  if (init.fn == "kaiming_normal" && a[1] != 0 && a[1] != 1)
    return bad("the mode must be 0 (fan_in) or 1 (fan_out)");
  if (init.fn == "trunc_normal") {
    // Values are redrawn until they fall in [lo, hi]: an interval the
    // distribution (almost) never reaches would draw forever.
    if (a[2] > a[3])
      return bad("the lower bound must not exceed the upper");
    double kept =
        a[1] == 0 ? (a[0] >= a[2] && a[0] <= a[3] ? 1.0 : 0.0) : normalMass(a[0], a[1], a[2], a[3]);
    if (!(kept >= kMinTruncatedMass))
      return bad("[lo, hi] keeps " + percent(kept) + " of the draws; at least " +
                 percent(kMinTruncatedMass) + " must fall inside");
  }
  return llvm::Error::success();
}

llvm::Error checkInitializer(const Variable &v) {
  if (!v.data.empty())
    return llvm::Error::success();
  if (v.init.fn == "elided")
    return makeError("variable '" + v.name +
                     "' has elided data (a text dump without weights); load the model or a "
                     "checkpoint that has its values");
  return withContext(checkInitializerArgs(v.init), "variable '" + printable(v.name) + "'");
}

llvm::Expected<Tensor> initialValue(const Variable &v, uint64_t seed) {
  if (!v.data.empty())
    return v.data;
  if (auto e = checkInitializer(v))
    return e;
  Tensor t(v.type);
  RandomStream rng(seed, stableHash(v.name));
  const std::string &fn = v.init.fn;
  const std::vector<double> &a = v.init.args;
  Fans f = fans(v.type);
  // Finite arguments can still overflow the dtype (constant(1e39) in f32,
  // uniform(-1e308, 1e308)): such a variable is refused like a NaN one.
  const bool floating = isFloat(v.type.dtype);
  bool finite = true;
  auto fill = [&](auto draw) {
    for (int64_t i = 0; i < t.numElements(); ++i) {
      t.set(i, draw());
      finite = finite && (!floating || std::isfinite(t.at(i)));
    }
  };
  if (fn == "zeros") {
    // Already zero.
  } else if (fn == "ones" || fn == "constant") {
    double c = fn == "ones" ? 1.0 : a[0];
    fill([&] { return c; });
  } else if (fn == "normal") {
    fill([&] { return a[0] + a[1] * rng.normal(); });
  } else if (fn == "uniform") {
    fill([&] { return a[0] + (a[1] - a[0]) * rng.uniform(); });
  } else if (fn == "trunc_normal") {
    fill([&] {
      for (;;) {
        double x = a[0] + a[1] * rng.normal();
        if (x >= a[2] && x <= a[3])
          return x;
      }
    });
  } else if (fn == "kaiming_normal") {
    double std = a[0] / std::sqrt(a[1] == 1 ? f.out : f.in);
    fill([&] { return std * rng.normal(); });
  } else if (fn == "kaiming_uniform") {
    double bound = std::sqrt(6.0 / ((1 + a[0] * a[0]) * f.in));
    fill([&] { return bound * (2 * rng.uniform() - 1); });
  } else if (fn == "xavier_uniform") {
    double bound = a[0] * std::sqrt(6.0 / (f.in + f.out));
    fill([&] { return bound * (2 * rng.uniform() - 1); });
  }
  if (!finite)
    return makeError("variable '" + printable(v.name) + "': initializer " + describeCall(v.init) +
                     " gives values that are not finite in " + dtypeName(v.type.dtype));
  return t;
}

} // namespace graphc
