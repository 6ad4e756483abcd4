#include "tools/driver/Interrupt.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace graphc {

namespace {

StopFlags stopFlags;

void say(const char *msg) {
  // write() is async-signal-safe; a short write to stderr is no matter.
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
}

/// Records the first stop signal (and whether the parent sent it); a second
/// one exits at once. Async-signal-safe: onStop calls it from a handler.
void noteStop(int sig, const siginfo_t *info) {
  int expected = 0;
  // Set before the signal, which the waits read first.
  if (stopFlags.signal.load() == 0 && info && info->si_code == SI_USER &&
      info->si_pid == ::getppid())
    stopFlags.byLauncher.store(true);
  if (!stopFlags.signal.compare_exchange_strong(expected, sig)) {
    say("\ngraphrun: second interrupt: exiting at once\n");
    ::_exit(128 + expected);
  }
  say(sig == SIGINT ? "\ngraphrun: SIGINT: stopping after this step (and writing a checkpoint "
                      "with --checkpoint); interrupt again to exit at once\n"
                    : "\ngraphrun: SIGTERM: stopping after this step (and writing a checkpoint "
                      "with --checkpoint); a second signal exits at once\n");
}

void onStop(int sig, siginfo_t *info, void *) {
  // The interrupted thread may be between a call and its read of errno,
  // which write() in noteStop can change.
  const int savedErrno = errno;
  noteStop(sig, info);
  errno = savedErrno;
}

sigset_t stopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

} // namespace

const StopFlags &watchStopSignals() {
  static const bool started = [] {
    const sigset_t set = stopSignals();
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set] {
      ::pthread_setname_np(::pthread_self(), "graphrun-stop");
      for (;;) {
        siginfo_t info;
        const int sig = ::sigwaitinfo(&set, &info);
        if (sig > 0)
          noteStop(sig, &info);
      }
    }).detach();
    return true;
  }();
  (void)started;
  return stopFlags;
}

const StopFlags &installStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = onStop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  return stopFlags;
}

} // namespace graphc
