#include "ir/Npy.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/OutputFile.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

static const char kMagic[] = "\x93NUMPY";

/// A stored NumPy dtype and the dtype it is read as: our own, or the nearest
/// one that holds its values (float64 rounds to f32; 8- and 16-bit integers
/// widen to i32, uint32 to i64).
struct StoredDType {
  DType dtype;
  unsigned bytes;
  enum Kind { Same, F64, U8, I8, I16, U16, U32 } kind;
};

static std::optional<StoredDType> dtypeFromDescr(llvm::StringRef d) {
  static const std::pair<const char *, StoredDType> kKnown[] = {
      {"<f4", {DType::F32, 4, StoredDType::Same}}, {"<f2", {DType::F16, 2, StoredDType::Same}},
      {"<i8", {DType::I64, 8, StoredDType::Same}}, {"<i4", {DType::I32, 4, StoredDType::Same}},
      {"|b1", {DType::Bool, 1, StoredDType::Same}}, {"<f8", {DType::F32, 8, StoredDType::F64}},
      {"|u1", {DType::I32, 1, StoredDType::U8}},   {"|i1", {DType::I32, 1, StoredDType::I8}},
      {"<i2", {DType::I32, 2, StoredDType::I16}},  {"<u2", {DType::I32, 2, StoredDType::U16}},
      {"<u4", {DType::I64, 4, StoredDType::U32}}};
  for (const auto &[descr, stored] : kKnown)
    if (d == descr)
      return stored;
  return std::nullopt;
}

/// Reads `n` stored values into `out` (of `s.dtype`).
template <typename From, typename To> static void widen(const char *in, To *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, in + i * sizeof(From), sizeof(From));
    out[i] = (To)v;
  }
}

static void convertStored(const StoredDType &s, const char *in, Tensor &t) {
  const int64_t n = t.numElements();
  switch (s.kind) {
  case StoredDType::Same:
    std::memcpy(t.raw(), in, t.bytes());
    return;
  case StoredDType::F64:
    return widen<double>(in, t.data<float>(), n);
  case StoredDType::U8:
    return widen<uint8_t>(in, t.data<int32_t>(), n);
  case StoredDType::I8:
    return widen<int8_t>(in, t.data<int32_t>(), n);
  case StoredDType::I16:
    return widen<int16_t>(in, t.data<int32_t>(), n);
  case StoredDType::U16:
    return widen<uint16_t>(in, t.data<int32_t>(), n);
  case StoredDType::U32:
    return widen<uint32_t>(in, t.data<int64_t>(), n);
  }
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
  auto stored = dtypeFromDescr(descr);
  if (!stored)
    return bad("unsupported dtype '" + printable(descr) +
               "' (use float32, float64, float16, an integer type or bool)");
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
  TensorType type(stored->dtype, dims);
  if (auto e = checkTensorSize(type, "the array"))
    return bad(llvm::toString(std::move(e)));
  size_t dataAt = offset + headerLen;
  const size_t want = (size_t)type.numElements() * stored->bytes;
  if (bytes.size() - dataAt != want)
    return bad("expected " + llvm::Twine(want) + " bytes of data for " + printable(descr) + " " +
               shapeToString(type.shape) + ", found " + llvm::Twine(bytes.size() - dataAt));
  Tensor t(type);
  convertStored(*stored, bytes.data() + dataAt, t);
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
