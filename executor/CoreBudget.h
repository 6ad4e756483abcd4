//===- CoreBudget.h - CPU cores shared by CPU devices ------------*- C++ -*-===//
//
// A counting semaphore of cores. A CPU device takes its share of threads for
// the time a kernel runs, so several emulated devices on a small machine run
// side by side without oversubscribing it (each kernel's OpenMP team gets
// exactly the threads the device holds).
//
// The kernels' scratch comes with the cores: a lease holds one of as many
// scratch buffers as leases can be held at once, so N CPU devices on fewer
// cores hold fewer buffers than devices (four emulated GPUs on one thread,
// one). A kernel's scratch (oneDNN's scratchpad, layout staging) can be
// hundreds of MiB a device at large batches.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cassert>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace graphc {

class CoreBudget {
public:
  explicit CoreBudget(int cores)
      : free_(std::max(1, cores)), total_(std::max(1, cores)), held_(total_, false) {}

  /// How many leases of `n` cores can be held at once.
  int leasesAtOnce(int n) const { return total_ / clamp(n); }
  /// The scratch buffers the leases hand out: as many as leases of the
  /// devices' share can be held at once.
  void shareScratch(std::vector<void *> buffers) { scratch_ = std::move(buffers); }
  const std::vector<void *> &scratch() const { return scratch_; }

  class Lease {
  public:
    Lease(CoreBudget &b, int n) : b_(b), n_(b.clamp(n)), slot_(b_.acquire(n_)) {}
    ~Lease() { b_.release(n_, slot_); }
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;
    /// This lease's scratch (null when none was shared).
    void *scratch() const {
      if (b_.scratch_.empty())
        return nullptr;
      assert(slot_ < b_.scratch_.size() && "more leases at once than scratch buffers");
      return b_.scratch_[slot_];
    }

  private:
    CoreBudget &b_;
    int n_;
    unsigned slot_;
  };

private:
  int clamp(int n) const { return std::min(std::max(1, n), total_); }
  /// Waits for `n` cores; returns the lowest slot not held.
  unsigned acquire(int n) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return free_ >= n; });
    free_ -= n;
    unsigned slot = (unsigned)(std::find(held_.begin(), held_.end(), false) - held_.begin());
    held_[slot] = true;
    return slot;
  }
  void release(int n, unsigned slot) {
    {
      std::lock_guard<std::mutex> lock(m_);
      free_ += n;
      held_[slot] = false;
    }
    cv_.notify_all();
  }

  std::mutex m_;
  std::condition_variable cv_;
  int free_, total_;
  std::vector<bool> held_; ///< by slot; at most total_ leases at once
  std::vector<void *> scratch_;
};

} // namespace graphc
