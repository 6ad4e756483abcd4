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

/// 2^26 pixels (64 megapixels, 8192 × 8192), checked against the header
/// before anything is decoded. Training images are resized to a few hundred
/// pixels a side (ImageNet's average is about 0.2 megapixels), so this is far
/// beyond any real one, while a small file cannot make a loader thread hold
/// more than about 0.5 GB (the decoded pixels and one float channel) or spend
/// more than a second or two on it: a 249 KB PNG of 16000 × 16000 (1 GB of
/// RGBA) is skipped as corrupt with this reason before it is decoded.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 26;

struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels; // height × width × 3, row-major
};

llvm::Expected<RgbImage> decodeImage(llvm::ArrayRef<uint8_t> bytes);

} // namespace graphc
