#include "executor/StepTimes.h"

#include <cassert>
#include <chrono>

namespace graphc {

double StepClock::steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void StepClock::advance() {
  double now = now_();
  unsigned part = 0;
  for (unsigned p = active_.size(); p-- > 1;)
    if (active_[p]) {
      part = p;
      break;
    }
  seconds_[part] += now - last_;
  last_ = now;
}

void StepClock::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  active_.fill(0);
  seconds_.fill(0);
  last_ = now_();
}

void StepClock::enter(StepPart p) {
  assert(p != StepPart::Compute && "compute is what no thread is in");
  std::lock_guard<std::mutex> lock(mutex_);
  advance();
  ++active_[(unsigned)p];
}

void StepClock::leave(StepPart p) {
  std::lock_guard<std::mutex> lock(mutex_);
  assert(active_[(unsigned)p] > 0 && "leaving a part no thread entered");
  advance();
  --active_[(unsigned)p];
}

StepTimes StepClock::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  advance();
  StepTimes t;
  t.compute = seconds_[(unsigned)StepPart::Compute];
  t.input = seconds_[(unsigned)StepPart::Input];
  t.intraWorker = seconds_[(unsigned)StepPart::IntraWorker];
  t.interWorker = seconds_[(unsigned)StepPart::InterWorker];
  return t;
}

} // namespace graphc
