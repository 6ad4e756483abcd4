//===- FuzzCluster.cpp - Cluster files ------------------------------------===//
//
// A cluster description (ir/Cluster.h) through parseClusterJson. A
// cluster it accepts must write out (clusterToJson) and read back.

#include "ir/Cluster.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto c = parseClusterJson(fuzz::bytesOf(data, size));
  if (!fuzz::accepted(c))
    return 0;
  auto again = parseClusterJson(clusterToJson(*c));
  if (!again)
    fuzz::broken("an accepted cluster does not read back from its JSON", again.takeError());
  return 0;
}
