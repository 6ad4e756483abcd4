//===- StopFlags.h - What a stop signal says to the waits -------*- C++ -*-===//
//
// `graphrun train` stops cleanly after the step on SIGINT or SIGTERM
// (tools/driver/Interrupt.h). Under mpirun the same SIGTERM also means
// "the job is over": mpirun, or its daemon on this host, sends it to every
// rank it started when a rank died or a host was lost (a daemon that stopped
// answering), and SIGKILL one second later (Open MPI's
// odls_base_sigkill_timeout). The handlers record which, and when: a wait
// across workers still silent a short grace after the launcher's signal
// (counted from the signal, so that a rank busy computing when it came does
// not wait longer) will never complete, and fails naming itself (MpiWait.h),
// so that every rank's last words say which collective it was in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace graphc {

struct StopFlags {
  /// The first stop signal (SIGINT or SIGTERM), 0 while none came.
  std::atomic<int> signal{0};
  /// When it came, on the steady clock (nanoseconds since its epoch), if the process that
  /// started this one (mpirun or its daemon) sent it; 0 otherwise.
  std::atomic<int64_t> byLauncherAt{0};

  std::chrono::steady_clock::time_point launcherSignal() const {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(byLauncherAt.load()));
  }
};

} // namespace graphc
