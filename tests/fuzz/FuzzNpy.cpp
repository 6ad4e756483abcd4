//===- FuzzNpy.cpp - NumPy .npy files -------------------------------------===//
//
// A .npy file (graphrun infer's inputs) through parseNpy. A tensor it accepts
// must encode and read back.

#include "ir/Npy.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto t = parseNpy(fuzz::bytesOf(data, size), "fuzz.npy");
  if (!fuzz::accepted(t))
    return 0;
  auto bytes = encodeNpy(*t);
  if (!bytes)
    fuzz::broken("an accepted .npy tensor does not encode", bytes.takeError());
  auto again = parseNpy(*bytes, "encoded.npy");
  if (!again)
    fuzz::broken("an encoded .npy tensor does not read back", again.takeError());
  return 0;
}
