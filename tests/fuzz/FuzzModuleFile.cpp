//===- FuzzModuleFile.cpp - Module files (the archive reader) -------------===//
//
// A placed module file (ir/Archive.h) through readModuleFile: the archive's
// layout and checksums, then the module text and the variables' data. Each
// input is read twice: as it is, and with its checksums made to match
// (withValidChecksums), so that mutations reach what the checksums guard.

#include "ir/Archive.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz::archiveTarget(data, size, ".gm", readModuleFile);
}
