#include "ir/Type.h"

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
