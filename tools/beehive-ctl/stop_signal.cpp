#include "stop_signal.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>

namespace beehive::ctl {

namespace {

volatile std::sig_atomic_t stop_flag = 0;
int wake_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int) {
  int saved = errno;
  stop_flag = 1;
  if (wake_pipe[1] >= 0) (void)!::write(wake_pipe[1], "x", 1);
  errno = saved;
}

}  // namespace

void install_stop_handlers() {
  if (wake_pipe[0] < 0 && ::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    wake_pipe[0] = wake_pipe[1] = -1;  // the flag alone still works, with a delay
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  // A write blocked on a full pipe (a paused pager) resumes after the signal, so the row
  // it was printing ends whole and the watch stops cleanly after it; poll is never
  // restarted, so a sleeping watch still wakes at once. A second signal ends the process
  // as the default action does (a reader that never reads again cannot hold it).
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return stop_flag != 0; }

void sleep_unless_stopped(std::chrono::milliseconds d) {
  // Counted from the start, not towards `now + d`, which overflows for a --interval of
  // centuries; poll's timeout is an int of milliseconds.
  const auto started = std::chrono::steady_clock::now();
  while (!stop_requested()) {
    auto left = d - std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started);
    if (left <= std::chrono::milliseconds::zero()) return;
    pollfd p{wake_pipe[0], POLLIN, 0};
    // A negative fd is ignored by poll, which then just sleeps.
    ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), INT_MAX)));
  }
}

}  // namespace beehive::ctl
