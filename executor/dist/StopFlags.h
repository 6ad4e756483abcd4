//===- StopFlags.h - What a stop signal says to the waits -------*- C++ -*-===//
//
// `graphrun train` stops cleanly after the step on SIGINT or SIGTERM
// (tools/driver/Interrupt.h). Under mpirun the same SIGTERM also means
// "the job is over": mpirun, or its daemon on this host, sends it to every
// rank it started when a rank died or a host was lost (a daemon that stopped
// answering), and SIGKILL one second later (Open MPI's
// odls_base_sigkill_timeout). The handlers record which: a wait across
// workers that is still silent half a second after the launcher's signal
// will never complete, and fails at once naming itself (MpiWait.h), so that
// every rank's last words say which collective it was in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>

namespace graphc {

struct StopFlags {
  /// The first stop signal (SIGINT or SIGTERM), 0 while none came.
  std::atomic<int> signal{0};
  /// It came from the process that started this one (mpirun or its daemon).
  std::atomic<bool> byLauncher{false};
};

} // namespace graphc
