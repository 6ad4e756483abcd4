#include "ir/Npy.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/OutputFile.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

static const char kMagic[] = "\x93NUMPY";

static std::optional<DType> dtypeFromDescr(llvm::StringRef d) {
  if (d == "<f4")
    return DType::F32;
  if (d == "<f2")
    return DType::F16;
  if (d == "<i8")
    return DType::I64;
  if (d == "<i4")
    return DType::I32;
  if (d == "|b1")
    return DType::Bool;
  return std::nullopt;
}

static const char *descrOf(DType t) {
  switch (t) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::Bool:
    return "|b1";
  case DType::BF16:
    return nullptr;
  }
  return nullptr;
}

/// The value of `'key': value` in the header dict, up to the next top-level comma or brace.
static llvm::StringRef headerField(llvm::StringRef header, llvm::StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == llvm::StringRef::npos)
    return {};
  llvm::StringRef rest = header.substr(at + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return {};
  rest = rest.ltrim();
  if (rest.startswith("(")) {
    size_t close = rest.find(')');
    return close == llvm::StringRef::npos ? llvm::StringRef() : rest.substr(0, close + 1);
  }
  size_t end = rest.find_first_of(",}");
  return rest.substr(0, end).trim();
}

llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef name) {
  auto bad = [&](const llvm::Twine &why) {
    return makeError("'" + name + "' is not a usable .npy file: " + why);
  };
  if (!bytes.startswith(llvm::StringRef(kMagic, 6)) || bytes.size() < 10)
    return bad("missing the NumPy magic");
  unsigned major = (unsigned char)bytes[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8) |
                ((unsigned char)bytes[10] << 16) | ((size_t)(unsigned char)bytes[11] << 24);
    offset = 12;
  } else {
    return bad("unsupported version " + llvm::Twine(major));
  }
  if (bytes.size() < offset + headerLen)
    return bad("truncated header");
  llvm::StringRef header = bytes.substr(offset, headerLen);
  llvm::StringRef descr = headerField(header, "descr").trim("'\"");
  auto dtype = dtypeFromDescr(descr);
  if (!dtype)
    return bad("unsupported dtype '" + printable(descr) +
               "' (use float32, float16, int64, int32 or bool)");
  if (headerField(header, "fortran_order") != "False")
    return bad("Fortran order is not supported; save a C-contiguous array");
  llvm::StringRef shapeText = headerField(header, "shape");
  if (!shapeText.startswith("("))
    return bad("no shape in the header");
  Dims dims;
  llvm::SmallVector<llvm::StringRef, 6> parts;
  shapeText.drop_front().drop_back().split(parts, ',', -1, false);
  for (llvm::StringRef p : parts) {
    int64_t d;
    if (p.trim().getAsInteger(10, d) || d < 0)
      return bad("malformed shape " + printable(shapeText));
    dims.push_back(d);
  }
  TensorType type(*dtype, dims);
  if (auto e = checkTensorSize(type, "the array"))
    return bad(llvm::toString(std::move(e)));
  size_t dataAt = offset + headerLen;
  if (bytes.size() - dataAt != (size_t)type.bytes())
    return bad("expected " + llvm::Twine(type.bytes()) + " bytes of data for " + toString(type) +
               ", found " + llvm::Twine(bytes.size() - dataAt));
  Tensor t(type);
  std::memcpy(t.raw(), bytes.data() + dataAt, t.bytes());
  return t;
}

llvm::Expected<Tensor> readNpy(llvm::StringRef path) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  return parseNpy((*buf)->getBuffer(), path);
}

llvm::Expected<std::string> encodeNpy(const Tensor &t) {
  const char *descr = descrOf(t.dtype());
  if (!descr)
    return makeError("bf16 tensors have no NumPy dtype; cast to f32 first");
  std::string shape = "(";
  for (int64_t d : t.shape())
    shape += std::to_string(d) + ",";
  if (t.shape().size() > 1)
    shape.pop_back();
  shape += ")";
  std::string header =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back((char)(header.size() & 0xff));
  out.push_back((char)(header.size() >> 8));
  out += header;
  out.append(static_cast<const char *>(t.raw()), t.bytes());
  return out;
}

llvm::Error writeNpy(llvm::StringRef path, const Tensor &t) {
  auto bytes = encodeNpy(t);
  if (!bytes)
    return bytes.takeError();
  return writeOutputFile(path, *bytes);
}

} // namespace graphc
