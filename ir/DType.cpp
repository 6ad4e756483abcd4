#include "ir/DType.h"

#include "llvm/Support/ErrorHandling.h"

namespace graphc {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  llvm_unreachable("unknown dtype");
}

llvm::StringRef dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "bool";
  }
  llvm_unreachable("unknown dtype");
}

std::optional<DType> parseDType(llvm::StringRef s) {
  for (DType t : kAllDTypes)
    if (dtypeName(t) == s)
      return t;
  return std::nullopt;
}

bool isFloat(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

} // namespace graphc
