//===- Tensor.h - Host tensors: constants, initial values, I/O --*- C++ -*-===//
//
// A Tensor is a static TensorType plus a reference-counted, 64-byte aligned
// host buffer. Copies share the buffer (like a view); clone() copies bytes.
// It carries constants and variable values through the compiler, and inputs
// and outputs through the executor's API.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Float16.h"
#include "ir/Type.h"

#include <cassert>
#include <cstring>
#include <memory>

namespace graphc {

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor of a static type.
  explicit Tensor(TensorType type);

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  llvm::ArrayRef<int64_t> shape() const { return type_.shape; }
  int64_t numElements() const { return type_.numElements(); }
  size_t bytes() const { return (size_t)type_.bytes(); }
  bool empty() const { return !buffer_; }

  void *raw() { return buffer_.get(); }
  const void *raw() const { return buffer_.get(); }
  template <typename T> T *data() { return static_cast<T *>(raw()); }
  template <typename T> const T *data() const { return static_cast<const T *>(raw()); }

  /// Element i converted to double (any dtype); for printing and comparisons.
  double at(int64_t i) const;
  void set(int64_t i, double v);

  Tensor clone() const;
  /// Same bytes, other shape (element counts must agree).
  Tensor reshaped(llvm::ArrayRef<int64_t> dims) const;
  /// Byte-wise equality of type and contents.
  bool operator==(const Tensor &o) const;
  bool operator!=(const Tensor &o) const { return !(*this == o); }

  static Tensor scalar(float v);
  static Tensor fromFloats(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<float> values);
  static Tensor fromInts(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> values);

private:
  TensorType type_;
  std::shared_ptr<unsigned char> buffer_;
};

} // namespace graphc
