//===- ImageDecode.h - JPEG and PNG files to 8-bit RGB -----------*- C++ -*-===//
//
// Decodes a whole file held in memory into interleaved 8-bit RGB, whatever
// the file stores: JPEG through libturbojpeg (grey and YCbCr; CMYK is
// refused), PNG through libpng's simplified API (grey, grey+alpha, RGB, RGBA,
// palette, any bit depth, interlaced). Alpha is dropped, not composited, as
// PIL's convert("RGB") does. The format is chosen by the file's signature,
// never by its name.
//
// Anything wrong with the bytes is an llvm::Error, never a crash: a bad
// signature, a header libjpeg or libpng rejects, a truncated stream (libjpeg's
// "premature end" warning counts as an error: the rest of such an image is
// made up), or an image larger than kMaxImagePixels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace graphc {

/// 2^28 pixels (16384 × 16384): far beyond any training image, and a bound on
/// what a hostile header can make us allocate.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels; // height × width × 3, row-major
};

llvm::Expected<RgbImage> decodeImage(llvm::ArrayRef<uint8_t> bytes);

} // namespace graphc
