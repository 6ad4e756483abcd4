//===- OnnxTensor.h - ONNX element types and tensors ------------*- C++ -*-===//
//
// The one place that maps ONNX element types to ours and converts
// TensorProto <-> Tensor (raw little-endian data or the typed fields; external
// data files relative to a base directory). Errors name the tensor and what
// is wrong with it; an element type we do not handle is named by its ONNX
// spelling (DOUBLE, UINT8, ...).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <optional>

namespace graphc::onnxfe {

/// Our dtype for an ONNX TensorProto::DataType, if we handle it.
std::optional<DType> fromOnnxDType(int32_t onnxType);
int32_t toOnnxDType(DType t);
/// "FLOAT", "DOUBLE", ... (or the number when unknown).
std::string onnxDTypeName(int32_t onnxType);

/// Whether a TensorProto carries no element data (a graph-only model). An
/// external reference counts as data.
bool hasNoData(const onnx::TensorProto &t);

/// Converts a TensorProto; `what` names it in errors ("initializer 'w'").
/// External data is read from `baseDir` (an error when empty).
llvm::Expected<Tensor> fromOnnxTensor(const onnx::TensorProto &t, llvm::StringRef what,
                                      llvm::StringRef baseDir = "");

/// The element count of `type`, or an error when a dimension is negative or
/// the tensor is larger than kMaxTensorBytes (ir/MemoryLimit.h): a corrupted
/// dimension must not become a wrapped count or a terabyte allocation.
llvm::Expected<int64_t> checkedElements(const TensorType &type, llvm::StringRef what);

/// The values of a tensor of a numeric element type we do not handle
/// (DOUBLE, INT8, UINT8, INT16, UINT16, UINT32), exactly, as doubles.
llvm::Expected<std::vector<double>> foreignValues(const onnx::TensorProto &t, llvm::StringRef what);

/// The shape and type of a TensorProto without reading its data.
llvm::Expected<TensorType> onnxTensorType(const onnx::TensorProto &t, llvm::StringRef what);

/// Fills `out` (name left to the caller) with raw little-endian data.
void toOnnxTensor(const Tensor &t, onnx::TensorProto &out);

} // namespace graphc::onnxfe
