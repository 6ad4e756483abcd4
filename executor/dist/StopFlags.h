//===- StopFlags.h - What a stop signal says to the waits -------*- C++ -*-===//
//
// `graphrun train` stops cleanly after the step on SIGINT or SIGTERM
// (tools/driver/Interrupt.h). Under mpirun the same SIGTERM also means
// "the job is over": mpirun, or its daemon on this host, sends it to every
// rank it started when a rank died or a host was lost (a daemon that stopped
// answering), and SIGKILL one second later (Open MPI's
// odls_base_sigkill_timeout). The handlers record which: after the
// launcher's signal no wait across workers will complete, and each fails at
// once naming itself (MpiWait.h), so that every rank's last words say which
// collective it was in. (So an interrupted mpirun no longer lets the ranks
// finish their step: it kills them a second later anyway.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>

namespace graphc {

struct StopFlags {
  /// The first stop signal (SIGINT or SIGTERM), 0 while none came.
  std::atomic<int> signal{0};
  /// The process that started this one (mpirun or its daemon) sent it.
  std::atomic<bool> byLauncher{false};
};

} // namespace graphc
