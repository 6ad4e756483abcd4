//===- DType.h - Element types ----------------------------------*- C++ -*-===//
//
// The element types a tensor can hold. Sizes and names live here once; the
// text form spells them as below (f32, f16, bf16, i64, i32, bool).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <optional>

namespace graphc {

enum class DType : unsigned char { F32, F16, BF16, I64, I32, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16,  DType::BF16,
                                       DType::I64, DType::I32, DType::Bool};

/// Bytes per element.
size_t dtypeSize(DType t);
/// The text spelling: "f32", "f16", "bf16", "i64", "i32", "bool".
llvm::StringRef dtypeName(DType t);
std::optional<DType> parseDType(llvm::StringRef s);
bool isFloat(DType t);

} // namespace graphc
