#include "ir/Initializers.h"

#include "ir/Diagnostics.h"
#include "ir/Random.h"

#include "llvm/ADT/StringSwitch.h"

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
} // namespace

llvm::Error checkInitializer(const Variable &v) {
  if (!v.data.empty())
    return llvm::Error::success();
  if (v.init.fn == "elided")
    return makeError("variable '" + v.name +
                     "' has elided data (a text dump without weights); load the model or a "
                     "checkpoint that has its values");
  int n = arity(v.init.fn);
  if (n < 0)
    return makeError("variable '" + v.name + "': unknown initializer '" + v.init.fn + "'");
  if ((int)v.init.args.size() != n)
    return makeError("variable '" + v.name + "': initializer " + v.init.fn + " takes " +
                     llvm::Twine(n) + " arguments");
  return llvm::Error::success();
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
  auto fill = [&](auto draw) {
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.set(i, draw());
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
  return t;
}

} // namespace graphc
