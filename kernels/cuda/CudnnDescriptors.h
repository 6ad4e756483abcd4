//===- CudnnDescriptors.h - Owning wrappers of cuDNN descriptors -*- C++ -*-===//
//
// Tensor, filter and convolution descriptors that destroy themselves, made
// through the dlopen'ed table. NCHW or NHWC (then an NHWC filter is KRSC),
// f32, f16 or bf16 data (f32 compute); every size must fit cuDNN's int, which
// create() checks.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "kernels/cuda/CudaCheck.h"

#include "llvm/ADT/ArrayRef.h"

namespace graphc {

/// cuDNN's data type for f32, f16 and bf16; an error naming any other.
llvm::Expected<cudnnDataType_t> cudnnDataTypeOf(DType t);

/// Whether every value fits a (positive) int and so does their product.
bool fitsCudnnInt(llvm::ArrayRef<int64_t> dims);

class CudnnTensor {
public:
  CudnnTensor() = default;
  CudnnTensor(const CudnnTensor &) = delete;
  CudnnTensor &operator=(const CudnnTensor &) = delete;
  ~CudnnTensor();
  /// A packed tensor of dims [n, c, h, w], stored NCHW or NHWC (`format`).
  llvm::Error create(const CudnnApi &api, llvm::ArrayRef<int64_t> nchw,
                     cudnnDataType_t type = CUDNN_DATA_FLOAT,
                     cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
  cudnnTensorDescriptor_t get() const { return desc_; }

private:
  const CudnnApi *api_ = nullptr;
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class CudnnFilter {
public:
  CudnnFilter() = default;
  CudnnFilter(const CudnnFilter &) = delete;
  CudnnFilter &operator=(const CudnnFilter &) = delete;
  ~CudnnFilter();
  /// A filter of dims [k, c, r, s] (OIHW), stored KCRS or (`format` NHWC) KRSC.
  llvm::Error create(const CudnnApi &api, llvm::ArrayRef<int64_t> oihw,
                     cudnnDataType_t type = CUDNN_DATA_FLOAT,
                     cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
  cudnnFilterDescriptor_t get() const { return desc_; }

private:
  const CudnnApi *api_ = nullptr;
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class CudnnConvolution {
public:
  CudnnConvolution() = default;
  CudnnConvolution(const CudnnConvolution &) = delete;
  CudnnConvolution &operator=(const CudnnConvolution &) = delete;
  ~CudnnConvolution();
  /// Cross-correlation with f32 compute; pads are symmetric (per axis).
  llvm::Error create(const CudnnApi &api, llvm::ArrayRef<int64_t> pads,
                     llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> dilations,
                     int64_t groups);
  llvm::Error setMath(cudnnMathType_t math);
  cudnnConvolutionDescriptor_t get() const { return desc_; }

private:
  const CudnnApi *api_ = nullptr;
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

} // namespace graphc
