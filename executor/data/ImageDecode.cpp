//===- ImageDecode.cpp - JPEG and PNG files to 8-bit RGB ------------------===//
//
// libpng's simplified API keeps libpng's setjmp/longjmp inside libpng, so no
// C++ frame is ever jumped over.
//
//===----------------------------------------------------------------------===//
#include "executor/data/ImageDecode.h"

#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>

namespace graphc {

namespace {

bool isJpeg(llvm::ArrayRef<uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

bool isPng(llvm::ArrayRef<uint8_t> b) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), kSignature, 8) == 0;
}

llvm::Error checkSize(int64_t width, int64_t height, llvm::StringRef format) {
  if (width <= 0 || height <= 0)
    return makeError(format + " image of " + llvm::Twine(width) + "x" + llvm::Twine(height) +
                     " pixels");
  if (width * height > kMaxImagePixels)
    return makeError(format + " image of " + llvm::Twine(width) + "x" + llvm::Twine(height) +
                     " pixels is larger than the limit of " + llvm::Twine(kMaxImagePixels >> 20) +
                     " megapixels");
  // Decoding holds up to 4 bytes a pixel (RGBA) before alpha is dropped.
  return checkDeclaredBytes(width * height * 4, format + " image of " + llvm::Twine(width) + "x" +
                                                    llvm::Twine(height) + " pixels");
}

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h)
      tjDestroy(h);
  }
};

llvm::Expected<RgbImage> decodeJpeg(llvm::ArrayRef<uint8_t> bytes) {
  TjHandle tj;
  if (!tj.h)
    return makeError("cannot start the JPEG decoder: " + llvm::Twine(tjGetErrorStr2(nullptr)));
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, bytes.data(), bytes.size(), &width, &height, &subsampling,
                          &colorspace) != 0)
    return makeError("bad JPEG header: " + llvm::Twine(tjGetErrorStr2(tj.h)));
  if (auto err = checkSize(width, height, "JPEG"))
    return err;
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    return makeError("CMYK JPEG images are not supported");
  RgbImage img;
  img.height = height;
  img.width = width;
  img.pixels.resize((size_t)width * height * 3);
  if (tjDecompress2(tj.h, bytes.data(), bytes.size(), img.pixels.data(), width, 0, height, TJPF_RGB,
                    0) != 0)
    return makeError("corrupt JPEG data: " + llvm::Twine(tjGetErrorStr2(tj.h)));
  return img;
}

llvm::Expected<RgbImage> decodePng(llvm::ArrayRef<uint8_t> bytes) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()))
    return makeError("bad PNG header: " + llvm::Twine(png.message));
  if (auto err = checkSize(png.width, png.height, "PNG")) {
    png_image_free(&png);
    return err;
  }
  // 16-bit samples are scaled to 8 bits as they are (the default would take
  // them as linear light and gamma-encode them), and RGBA is read so that alpha
  // can be dropped here: asking libpng for RGB would composite.
  png.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  png.format = PNG_FORMAT_RGBA;
  RgbImage img;
  img.height = png.height;
  img.width = png.width;
  img.pixels.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, img.pixels.data(), 0, nullptr))
    return makeError("corrupt PNG data: " + llvm::Twine(png.message));
  // RGBA to RGB in place: pixel i moves from 4i to 3i, never past a pixel
  // not yet moved.
  size_t n = (size_t)img.height * img.width;
  uint8_t *p = img.pixels.data();
  for (size_t i = 0; i < n; ++i) {
    p[3 * i] = p[4 * i];
    p[3 * i + 1] = p[4 * i + 1];
    p[3 * i + 2] = p[4 * i + 2];
  }
  img.pixels.resize(n * 3);
  return img;
}

} // namespace

llvm::Expected<RgbImage> decodeImage(llvm::ArrayRef<uint8_t> bytes) {
  if (isJpeg(bytes))
    return decodeJpeg(bytes);
  if (isPng(bytes))
    return decodePng(bytes);
  return makeError("not a JPEG or PNG file (unknown signature)");
}

} // namespace graphc
