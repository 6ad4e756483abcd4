//===- CudnnDescriptors.cpp - Owning wrappers of cuDNN descriptors --------===//

#include "kernels/cuda/CudnnDescriptors.h"

#include "ir/Diagnostics.h"

#include <climits>

namespace graphc {

llvm::Expected<cudnnDataType_t> cudnnDataTypeOf(DType t) {
  switch (t) {
  case DType::F32:
    return CUDNN_DATA_FLOAT;
  case DType::F16:
    return CUDNN_DATA_HALF;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    return makeError("cuDNN descriptors here take f32, f16 or bf16, not " + dtypeName(t));
  }
}

bool fitsCudnnInt(llvm::ArrayRef<int64_t> dims) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d <= 0 || d > INT_MAX)
      return false;
    product *= d;
    if (product > INT_MAX)
      return false;
  }
  return true;
}

CudnnTensor::~CudnnTensor() {
  if (desc_)
    api_->cudnnDestroyTensorDescriptor(desc_);
}

llvm::Error CudnnTensor::create(const CudnnApi &api, llvm::ArrayRef<int64_t> nchw,
                                cudnnDataType_t type, cudnnTensorFormat_t format) {
  assert(nchw.size() == 4 && !desc_ && "one 4-D descriptor per wrapper");
  if (!fitsCudnnInt(nchw))
    return makeError("tensor [" + llvm::Twine(nchw[0]) + ", " + llvm::Twine(nchw[1]) + ", " +
                     llvm::Twine(nchw[2]) + ", " + llvm::Twine(nchw[3]) +
                     "] is empty or too large for a cuDNN descriptor");
  api_ = &api;
  GRAPHC_CUDNN_TRY(api, api.cudnnCreateTensorDescriptor(&desc_));
  GRAPHC_CUDNN_TRY(api, api.cudnnSetTensor4dDescriptor(desc_, format, type, (int)nchw[0],
                                                       (int)nchw[1], (int)nchw[2], (int)nchw[3]));
  return llvm::Error::success();
}

CudnnFilter::~CudnnFilter() {
  if (desc_)
    api_->cudnnDestroyFilterDescriptor(desc_);
}

llvm::Error CudnnFilter::create(const CudnnApi &api, llvm::ArrayRef<int64_t> oihw,
                                cudnnDataType_t type, cudnnTensorFormat_t format) {
  assert(oihw.size() == 4 && !desc_ && "one OIHW descriptor per wrapper");
  if (!fitsCudnnInt(oihw))
    return makeError("filter is empty or too large for a cuDNN descriptor");
  api_ = &api;
  GRAPHC_CUDNN_TRY(api, api.cudnnCreateFilterDescriptor(&desc_));
  GRAPHC_CUDNN_TRY(api, api.cudnnSetFilter4dDescriptor(desc_, type, format, (int)oihw[0],
                                                       (int)oihw[1], (int)oihw[2], (int)oihw[3]));
  return llvm::Error::success();
}

CudnnConvolution::~CudnnConvolution() {
  if (desc_)
    api_->cudnnDestroyConvolutionDescriptor(desc_);
}

llvm::Error CudnnConvolution::create(const CudnnApi &api, llvm::ArrayRef<int64_t> pads,
                                     llvm::ArrayRef<int64_t> strides,
                                     llvm::ArrayRef<int64_t> dilations, int64_t groups) {
  assert(pads.size() == 2 && strides.size() == 2 && dilations.size() == 2 && !desc_);
  for (int64_t v : {pads[0], pads[1], strides[0], strides[1], dilations[0], dilations[1], groups})
    if (v < 0 || v > INT_MAX)
      return makeError("convolution parameters do not fit a cuDNN descriptor");
  api_ = &api;
  GRAPHC_CUDNN_TRY(api, api.cudnnCreateConvolutionDescriptor(&desc_));
  GRAPHC_CUDNN_TRY(api, api.cudnnSetConvolution2dDescriptor(
                            desc_, (int)pads[0], (int)pads[1], (int)strides[0], (int)strides[1],
                            (int)dilations[0], (int)dilations[1], CUDNN_CROSS_CORRELATION,
                            CUDNN_DATA_FLOAT));
  GRAPHC_CUDNN_TRY(api, api.cudnnSetConvolutionGroupCount(desc_, (int)groups));
  return llvm::Error::success();
}

llvm::Error CudnnConvolution::setMath(cudnnMathType_t math) {
  GRAPHC_CUDNN_TRY(*api_, api_->cudnnSetConvolutionMathType(desc_, math));
  return llvm::Error::success();
}

} // namespace graphc
