#pragma once

// SIGINT/SIGTERM as a request to stop: `watch` ends its loop and exits with status 0.
// The handler only sets a flag (nothing else is async-signal-safe); the loop polls it.

#include <chrono>

namespace beehive::ctl {

void install_stop_handlers();
bool stop_requested();
/// Sleeps for `d`, returning early when a stop signal arrives.
void sleep_unless_stopped(std::chrono::milliseconds d);

}  // namespace beehive::ctl
