#include "stop_signal.hpp"

#include <cerrno>
#include <csignal>
#include <ctime>

namespace beehive::ctl {

namespace {

volatile std::sig_atomic_t stop_flag = 0;

extern "C" void on_stop_signal(int) { stop_flag = 1; }

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the signal interrupts the sleep below
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return stop_flag != 0; }

void sleep_unless_stopped(std::chrono::milliseconds d) {
  // nanosleep, not std::this_thread::sleep_for: the latter resumes after EINTR, which
  // would delay the exit by up to a whole polling interval.
  timespec left{static_cast<std::time_t>(d.count() / 1000),
                static_cast<long>(d.count() % 1000) * 1'000'000L};
  while (!stop_requested() && nanosleep(&left, &left) == -1 && errno == EINTR) {
  }
}

}  // namespace beehive::ctl
