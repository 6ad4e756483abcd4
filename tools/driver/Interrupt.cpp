#include "tools/driver/Interrupt.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace graphc {

namespace {

std::atomic<int> stopSignal{0};

void say(const char *msg) {
  // write() is async-signal-safe; a short write to stderr is no matter.
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
}

void onStop(int sig) {
  int expected = 0;
  if (!stopSignal.compare_exchange_strong(expected, sig)) {
    say("\ngraphrun: second interrupt: exiting at once\n");
    ::_exit(128 + expected);
  }
  say(sig == SIGINT ? "\ngraphrun: SIGINT: stopping after this step (and writing a checkpoint "
                      "with --checkpoint); interrupt again to exit at once\n"
                    : "\ngraphrun: SIGTERM: stopping after this step (and writing a checkpoint "
                      "with --checkpoint); a second signal exits at once\n");
}

} // namespace

const std::atomic<int> &installStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onStop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  return stopSignal;
}

} // namespace graphc
