//===- FuzzCheckpoint.cpp - The checkpoint reader -------------------------===//
//
// A checkpoint file (executor/Checkpoint.h) through loadCheckpointFile: the
// archive, the run's position in its header module, the forward model's text
// and the strict checks of tensors against it. As for module files, each
// input is read as it is and with its checksums made to match.

#include "executor/Checkpoint.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz::archiveTarget(data, size, ".gck", loadCheckpointFile);
}
