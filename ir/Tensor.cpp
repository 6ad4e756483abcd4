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
    return halfToFloat(data<uint16_t>()[i]);
  case DType::BF16:
    return bf16ToFloat(data<uint16_t>()[i]);
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
    data<uint16_t>()[i] = floatToHalf((float)v);
    return;
  case DType::BF16:
    data<uint16_t>()[i] = floatToBf16((float)v);
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

float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) // inf or nan
    return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31)
    return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half; // round to nearest even; a carry into the exponent is correct
  return (uint16_t)half;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f))
    return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

} // namespace graphc
