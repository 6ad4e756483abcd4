//===- FuzzImage.cpp - JPEG and PNG decoding ------------------------------===//
//
// An image file of an image-folder data set through decodeImage (libjpeg-turbo
// or libpng, chosen by signature). An accepted image has the pixels its size
// says.

#include "executor/data/ImageDecode.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto image = decodeImage(llvm::ArrayRef<uint8_t>(data, size));
  if (!fuzz::accepted(image))
    return 0;
  if (image->height <= 0 || image->width <= 0 ||
      int64_t(image->pixels.size()) != image->height * image->width * 3)
    fuzz::broken("a decoded image's pixels do not match its size");
  return 0;
}
