//===- FuzzTasks.cpp - Cluster files of tasks and TF_CONFIG ---------------===//
//
// A cluster of tasks (ir/Tasks.h: the cluster-file form or a
// TF_CONFIG) through parseTasksJson. An accepted cluster must write out
// (tasksToJson) and read back to the same tasks.

#include "ir/Tasks.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto c = parseTasksJson(fuzz::bytesOf(data, size), 1);
  if (!fuzz::accepted(c))
    return 0;
  std::string json = tasksToJson(*c);
  auto again = parseTasksJson(json, 1);
  if (!again)
    fuzz::broken("an accepted cluster of tasks does not read back from its JSON",
                 again.takeError());
  if (tasksToJson(*again) != json)
    fuzz::broken("a cluster of tasks reads back as another cluster");
  return 0;
}
