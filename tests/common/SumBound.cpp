#include "SumBound.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace graphc::sumbound {

double relativeError(const Tensor &got, const Tensor &want) {
  if (got.type() != want.type())
    return std::numeric_limits<double>::infinity();
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    scale = std::max(scale, std::abs(want.at(i)));
    double d = std::abs(got.at(i) - want.at(i));
    worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
  }
  return worst == 0 ? 0 : worst / std::max(scale, 1e-30);
}

testing::AssertionResult within(const Tensor &got, const Tensor &want, double rel) {
  if (got.type() != want.type())
    return testing::AssertionFailure() << toString(got.type()) << " vs " << toString(want.type());
  double err = relativeError(got, want);
  if (err <= rel)
    return testing::AssertionSuccess();
  double scale = 0, worst = -1;
  int64_t where = 0;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    scale = std::max(scale, std::abs(want.at(i)));
    double d = std::abs(got.at(i) - want.at(i));
    if (std::isnan(d) || d > worst) {
      worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
      where = i;
    }
  }
  return testing::AssertionFailure()
         << "relative error " << err << " exceeds the bound " << rel << "; element " << where
         << ": " << got.at(where) << " vs " << want.at(where) << " (max |want| " << scale << ")";
}

testing::AssertionResult sameBits(const Tensor &got, const Tensor &want) {
  if (got.type() != want.type())
    return testing::AssertionFailure() << toString(got.type()) << " vs " << toString(want.type());
  if (got == want)
    return testing::AssertionSuccess();
  for (int64_t i = 0; i < want.numElements(); ++i)
    if (got.at(i) != want.at(i))
      return testing::AssertionFailure() << "element " << i << ": " << got.at(i) << " vs "
                                         << want.at(i) << " (expected the same bits)";
  return testing::AssertionFailure() << "the same values in other bits (NaN payloads or -0)";
}

void report(const std::string &what, double worst, double rel) {
  std::printf("[ bound    ] %s: worst %.3g = %.3g of the bound %.3g\n", what.c_str(), worst,
              rel > 0 ? worst / rel : 0.0, rel);
}

Tensor convertedTo(const Tensor &t, DType to) {
  Tensor out(TensorType(to, t.type().shape));
  for (int64_t i = 0; i < t.numElements(); ++i)
    out.set(i, t.at(i));
  return out;
}

int windowsPerElement(const Attrs &pool) {
  Ints kernel = pool.getInts("kernel_shape"), strides = pool.getInts("strides");
  Ints dilations = pool.getInts("dilations", Ints(kernel.size(), 1));
  int windows = 1;
  for (size_t i = 0; i < kernel.size(); ++i) {
    int64_t stride = i < strides.size() ? strides[i] : 1;
    int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    windows *= (int)((extent + stride - 1) / stride);
  }
  return windows;
}

} // namespace graphc::sumbound
