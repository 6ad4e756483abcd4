#include "ir/Tensor.h"

#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <cstdlib>

namespace graphc {

static std::shared_ptr<unsigned char> allocate(size_t bytes) {
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0)
    rounded = 64;
  auto *p = static_cast<unsigned char *>(std::aligned_alloc(64, rounded));
  if (!p)
    llvm::report_bad_alloc_error("tensor allocation failed");
  std::memset(p, 0, rounded);
  return std::shared_ptr<unsigned char>(p, [](unsigned char *q) { std::free(q); });
}

Tensor::Tensor(TensorType type) : type_(std::move(type)) {
  assert(type_.isStatic() && "host tensors need a static shape");
  buffer_ = allocate(bytes());
}

double Tensor::at(int64_t i) const {
  switch (dtype()) {
  case DType::F32:
    return data<float>()[i];
  case DType::F16:
    return halfBitsToFloat(data<uint16_t>()[i]);
  case DType::BF16:
    return bf16BitsToFloat(data<uint16_t>()[i]);
  case DType::I64:
    return (double)data<int64_t>()[i];
  case DType::I32:
    return data<int32_t>()[i];
  case DType::Bool:
    return data<uint8_t>()[i] ? 1.0 : 0.0;
  }
  llvm_unreachable("unknown dtype");
}

void Tensor::set(int64_t i, double v) {
  switch (dtype()) {
  case DType::F32:
    data<float>()[i] = (float)v;
    return;
  case DType::F16:
    data<uint16_t>()[i] = floatToHalfBits((float)v);
    return;
  case DType::BF16:
    data<uint16_t>()[i] = floatToBf16Bits((float)v);
    return;
  case DType::I64:
    data<int64_t>()[i] = (int64_t)v;
    return;
  case DType::I32:
    data<int32_t>()[i] = (int32_t)v;
    return;
  case DType::Bool:
    data<uint8_t>()[i] = v != 0;
    return;
  }
  llvm_unreachable("unknown dtype");
}

Tensor Tensor::clone() const {
  if (empty())
    return {};
  Tensor t(type_);
  std::memcpy(t.raw(), raw(), bytes());
  return t;
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> dims) const {
  Tensor t = *this;
  t.type_.shape.assign(dims.begin(), dims.end());
  assert(t.numElements() == numElements() && "reshape changes the element count");
  return t;
}

bool Tensor::operator==(const Tensor &o) const {
  if (type_ != o.type_ || empty() != o.empty())
    return false;
  return empty() || std::memcmp(raw(), o.raw(), bytes()) == 0;
}

Tensor Tensor::scalar(float v) { return fromFloats({}, {v}); }

Tensor Tensor::fromFloats(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<float> values) {
  Tensor t(TensorType(DType::F32, dims));
  assert((int64_t)values.size() == t.numElements());
  std::memcpy(t.raw(), values.data(), t.bytes());
  return t;
}

Tensor Tensor::fromInts(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> values) {
  Tensor t(TensorType(DType::I64, dims));
  assert((int64_t)values.size() == t.numElements());
  std::memcpy(t.raw(), values.data(), t.bytes());
  return t;
}

} // namespace graphc
