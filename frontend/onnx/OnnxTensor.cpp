//===- OnnxTensor.cpp - TensorProto <-> Tensor ----------------------------===//
//
// Sizes are checked against the declared shape before anything is allocated,
// so a corrupted dimension is an error, not a huge allocation.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxTensor.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"

#include "llvm/Support/Path.h"

#include <bit>

namespace graphc::onnxfe {

static_assert(std::endian::native == std::endian::little,
              "ONNX raw_data is little-endian; this code copies it as is");

using onnx::TensorProto;

std::optional<DType> fromOnnxDType(int32_t onnxType) {
  switch (onnxType) {
  case TensorProto::FLOAT:
    return DType::F32;
  case TensorProto::FLOAT16:
    return DType::F16;
  case TensorProto::BFLOAT16:
    return DType::BF16;
  case TensorProto::INT64:
    return DType::I64;
  case TensorProto::INT32:
    return DType::I32;
  case TensorProto::BOOL:
    return DType::Bool;
  default:
    return std::nullopt;
  }
}

int32_t toOnnxDType(DType t) {
  switch (t) {
  case DType::F32:
    return TensorProto::FLOAT;
  case DType::F16:
    return TensorProto::FLOAT16;
  case DType::BF16:
    return TensorProto::BFLOAT16;
  case DType::I64:
    return TensorProto::INT64;
  case DType::I32:
    return TensorProto::INT32;
  case DType::Bool:
    return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}

std::string onnxDTypeName(int32_t onnxType) {
  if (TensorProto::DataType_IsValid(onnxType))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(onnxType));
  return "type " + std::to_string(onnxType);
}

bool hasNoData(const TensorProto &t) {
  return !t.has_raw_data() && t.float_data_size() == 0 && t.int32_data_size() == 0 &&
         t.int64_data_size() == 0 && t.double_data_size() == 0 && t.uint64_data_size() == 0 &&
         t.string_data_size() == 0 && t.data_location() != TensorProto::EXTERNAL;
}

llvm::Expected<int64_t> checkedElements(const TensorType &type, llvm::StringRef what) {
  // Checked here: -1 would otherwise read as the batch symbol.
  if (llvm::any_of(type.shape, [](int64_t d) { return d < 0; }))
    return makeError(what + " has a negative dimension");
  if (auto e = checkTensorSize(type, what))
    return e;
  return type.numElements();
}

llvm::Expected<TensorType> onnxTensorType(const TensorProto &t, llvm::StringRef what) {
  auto dt = fromOnnxDType(t.data_type());
  if (!dt)
    return makeError(what + " has element type " + onnxDTypeName(t.data_type()) +
                     ", which graphc does not handle (it handles FLOAT, FLOAT16, BFLOAT16, "
                     "INT64, INT32, BOOL)");
  TensorType type;
  type.dtype = *dt;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return makeError(what + " has a negative dimension (" + llvm::Twine(d) + ")");
    type.shape.push_back(d);
  }
  if (auto e = checkTensorSize(type, what))
    return e;
  return type;
}

/// Reads `location` (offset, length) from the external data file.
static llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readExternal(const TensorProto &t, llvm::StringRef what, llvm::StringRef baseDir) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      uint64_t v = 0;
      if (llvm::StringRef(kv.value()).getAsInteger(10, v))
        return makeError(what + ": external data " + kv.key() + " '" + kv.value() +
                         "' is not a number");
      if (kv.key() == "offset") {
        offset = v;
      } else {
        length = v;
        hasLength = true;
      }
    }
  }
  if (baseDir.empty())
    return makeError(what + " keeps its data in an external file; import the model from its "
                            "file so the data can be found");
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::StringRef(location).contains(".."))
    return makeError(what + ": external data location '" + location +
                     "' must be a relative path inside the model's directory");
  llvm::SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  auto in = openInput(path.str(), InputKind::File, (what + ": external data file").str());
  if (!in)
    return in.takeError();
  const uint64_t fileSize = in->size();
  if (!hasLength)
    length = fileSize > offset ? fileSize - offset : 0;
  if (offset > fileSize || length > fileSize - offset)
    return makeError(what + ": external data file '" + path.str() + "' is shorter than offset " +
                     llvm::Twine(offset) + " + length " + llvm::Twine(length));
  return in->read(offset, length);
}

llvm::Expected<Tensor> fromOnnxTensor(const TensorProto &t, llvm::StringRef what,
                                      llvm::StringRef baseDir) {
  auto type = onnxTensorType(t, what);
  if (!type)
    return type.takeError();
  auto n = checkedElements(*type, what);
  if (!n)
    return n.takeError();
  auto sizeError = [&](llvm::StringRef field, size_t have) {
    return makeError(what + " has " + llvm::Twine(have) + " " + field + " for " + llvm::Twine(*n) +
                     " elements of " + toString(*type));
  };

  std::unique_ptr<llvm::MemoryBuffer> external;
  llvm::StringRef raw;
  bool isRaw = t.has_raw_data();
  if (t.data_location() == TensorProto::EXTERNAL) {
    auto buf = readExternal(t, what, baseDir);
    if (!buf)
      return buf.takeError();
    external = std::move(*buf);
    raw = external->getBuffer();
    isRaw = true;
  } else if (isRaw) {
    raw = t.raw_data();
  }
  if (isRaw) {
    if (raw.size() != (uint64_t)*n * dtypeSize(type->dtype))
      return sizeError("bytes of data", raw.size());
    Tensor out(*type);
    if (!raw.empty())
      std::memcpy(out.raw(), raw.data(), raw.size());
    return out;
  }

  switch (t.data_type()) {
  case TensorProto::FLOAT: {
    if (t.float_data_size() != *n)
      return sizeError("float_data values", t.float_data_size());
    Tensor out(*type);
    if (*n)
      std::memcpy(out.raw(), t.float_data().data(), *n * sizeof(float));
    return out;
  }
  case TensorProto::INT64: {
    if (t.int64_data_size() != *n)
      return sizeError("int64_data values", t.int64_data_size());
    Tensor out(*type);
    if (*n)
      std::memcpy(out.raw(), t.int64_data().data(), *n * sizeof(int64_t));
    return out;
  }
  default:
    break;
  }
  // INT32, BOOL, FLOAT16 and BFLOAT16 use int32_data (16-bit types as bits).
  if (t.int32_data_size() != *n)
    return sizeError("int32_data values", t.int32_data_size());
  Tensor out(*type);
  for (int64_t i = 0; i < *n; ++i) {
    int32_t v = t.int32_data(i);
    switch (out.dtype()) {
    case DType::I32:
      out.data<int32_t>()[i] = v;
      break;
    case DType::Bool:
      out.data<uint8_t>()[i] = v != 0;
      break;
    case DType::F16:
    case DType::BF16:
      out.data<uint16_t>()[i] = (uint16_t)v;
      break;
    default:
      llvm_unreachable("handled above");
    }
  }
  return out;
}

llvm::Expected<std::vector<double>> foreignValues(const TensorProto &t, llvm::StringRef what) {
  TensorType shape(DType::F32, {});
  for (int64_t d : t.dims())
    shape.shape.push_back(d);
  auto n = checkedElements(shape, what);
  if (!n)
    return n.takeError();
  int32_t type = t.data_type();
  size_t size = type == TensorProto::DOUBLE                                 ? 8
                : type == TensorProto::INT8 || type == TensorProto::UINT8   ? 1
                : type == TensorProto::INT16 || type == TensorProto::UINT16 ? 2
                : type == TensorProto::UINT32                               ? 4
                                                                            : 0;
  if (!size)
    return makeError(what + " has element type " + onnxDTypeName(type) +
                     ", which graphc does not handle");
  std::vector<double> out;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != (uint64_t)*n * size)
      return makeError(what + " has " + llvm::Twine(t.raw_data().size()) + " bytes of data for " +
                       llvm::Twine(*n) + " elements of " + onnxDTypeName(type));
    out.resize(*n);
    const char *p = t.raw_data().data();
    for (int64_t i = 0; i < *n; ++i, p += size) {
      switch (type) {
      case TensorProto::DOUBLE: {
        double v;
        std::memcpy(&v, p, 8);
        out[i] = v;
        break;
      }
      case TensorProto::INT8:
        out[i] = (int8_t)*p;
        break;
      case TensorProto::UINT8:
        out[i] = (uint8_t)*p;
        break;
      case TensorProto::INT16:
      case TensorProto::UINT16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        out[i] = type == TensorProto::INT16 ? (double)(int16_t)v : (double)v;
        break;
      }
      default: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        out[i] = v;
      }
      }
    }
    return out;
  }
  auto count = [&](int have) -> llvm::Error {
    if (have == *n) {
      out.resize(*n);
      return llvm::Error::success();
    }
    return makeError(what + " has " + llvm::Twine(have) + " values for " + llvm::Twine(*n) +
                     " elements");
  };
  if (type == TensorProto::DOUBLE) {
    if (auto e = count(t.double_data_size()))
      return e;
    for (int64_t i = 0; i < *n; ++i)
      out[i] = t.double_data(i);
  } else if (type == TensorProto::UINT32) {
    if (auto e = count(t.uint64_data_size()))
      return e;
    for (int64_t i = 0; i < *n; ++i)
      out[i] = (double)t.uint64_data(i);
  } else {
    if (auto e = count(t.int32_data_size()))
      return e;
    for (int64_t i = 0; i < *n; ++i)
      out[i] = t.int32_data(i);
  }
  return out;
}

void toOnnxTensor(const Tensor &t, TensorProto &out) {
  out.set_data_type(toOnnxDType(t.dtype()));
  out.clear_dims();
  for (int64_t d : t.shape())
    out.add_dims(d);
  out.set_raw_data(t.raw(), t.bytes());
}

} // namespace graphc::onnxfe
