#include "ir/Type.h"

#include "ir/MemoryLimit.h"

#include "llvm/ADT/STLExtras.h"

namespace graphc {

bool TensorType::isStatic() const {
  for (int64_t d : shape)
    if (d == kBatchDim)
      return false;
  return true;
}

int64_t TensorType::numElements(int64_t batch) const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d == kBatchDim ? batch : d;
  return n;
}

std::optional<int64_t> checkedBytes(const TensorType &t) {
  // n stays within the limit, so n * d > limit is n > limit / d without the
  // division (an overflowing product is past the limit too).
  const int64_t limit = tensorByteLimit();
  int64_t n = (int64_t)dtypeSize(t.dtype);
  for (int64_t d : t.shape) {
    if (d == kBatchDim)
      continue;
    if (d < 0)
      return std::nullopt;
    int64_t product;
    if (__builtin_mul_overflow(n, d, &product) || product > limit)
      return std::nullopt;
    n = product;
  }
  return n;
}

llvm::Error checkTensorSize(const TensorType &t, const llvm::Twine &what) {
  if (checkedBytes(t))
    return llvm::Error::success();
  bool negative = llvm::any_of(t.shape, [](int64_t d) { return d < 0 && d != kBatchDim; });
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      what + " " + toString(t) +
          (negative ? " has a negative dimension" : " is larger than " + tensorLimitText()));
}

TensorType TensorType::bound(int64_t batch) const {
  TensorType t = *this;
  for (int64_t &d : t.shape)
    if (d == kBatchDim)
      d = batch;
  return t;
}

std::string shapeToString(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ",";
    s += dims[i] == kBatchDim ? std::string("N") : std::to_string(dims[i]);
  }
  return s + "]";
}

std::string toString(const TensorType &t) { return dtypeName(t.dtype).str() + shapeToString(t.shape); }

} // namespace graphc
