//===- FuzzIdx.cpp - IDX files (Fashion-MNIST) ----------------------------===//
//
// An IDX file, plain or gzip-compressed, through readIdxFile as images (three
// dimensions) and as labels (one).

#include "executor/data/IdxDataset.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = fuzz::scratchFile(fuzz::bytesOf(data, size), ".idx");
  for (unsigned rank : {1u, 3u}) {
    auto a = readIdxFile(path, rank);
    fuzz::accepted(a);
  }
  return 0;
}
