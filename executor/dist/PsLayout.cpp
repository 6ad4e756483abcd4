//===- PsLayout.cpp - Where each task's variables lie in messages ---------===//

#include "executor/dist/PsLayout.h"

#include <cassert>

namespace graphc {

PsLayout::PsLayout(std::vector<PsRoute> routes, unsigned tasks)
    : routes_(std::move(routes)), byTask_(tasks), values_(tasks, 0), stateValues_(tasks, 0) {
  for (const PsRoute &r : routes_) {
    assert(r.task < tasks && "a variable of a task outside the layout");
    byTask_[r.task].push_back(&r);
    values_[r.task] += r.type.numElements();
    stateValues_[r.task] += r.type.numElements() * (int64_t)(1 + r.slots.size());
  }
}

} // namespace graphc
