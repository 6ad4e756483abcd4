#include "tools/driver/Interrupt.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace graphc {

namespace {

StopFlags stopFlags;

void say(const char *msg) {
  // write() is async-signal-safe; a short write to stderr is no matter.
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
}

void onStop(int sig, siginfo_t *info, void *) {
  // The interrupted thread may be between a call and its read of errno,
  // which write() below can change.
  const int savedErrno = errno;
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
  errno = savedErrno;
}

} // namespace

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
