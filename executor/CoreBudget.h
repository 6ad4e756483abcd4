//===- CoreBudget.h - CPU cores shared by CPU devices ------------*- C++ -*-===//
//
// A counting semaphore of cores. A CPU device takes its share of threads for
// the time a kernel runs, so several emulated devices on a small machine run
// side by side without oversubscribing it (each kernel's OpenMP team gets
// exactly the threads the device holds).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace graphc {

class CoreBudget {
public:
  explicit CoreBudget(int cores) : free_(std::max(1, cores)), total_(std::max(1, cores)) {}

  class Lease {
  public:
    Lease(CoreBudget &b, int n) : b_(b), n_(std::min(std::max(1, n), b.total_)) { b_.acquire(n_); }
    ~Lease() { b_.release(n_); }
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;

  private:
    CoreBudget &b_;
    int n_;
  };

private:
  void acquire(int n) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return free_ >= n; });
    free_ -= n;
  }
  void release(int n) {
    {
      std::lock_guard<std::mutex> lock(m_);
      free_ += n;
    }
    cv_.notify_all();
  }

  std::mutex m_;
  std::condition_variable cv_;
  int free_, total_;
};

} // namespace graphc
