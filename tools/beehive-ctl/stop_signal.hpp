#pragma once

// SIGINT/SIGTERM as a request to stop: `watch` ends its loop and exits with status 0.
// The handler only sets a flag and writes a byte to a pipe (both async-signal-safe); the
// polling sleep waits on that pipe, so a signal that arrives just before the sleep
// starts still ends it at once (the self-pipe trick).

#include <chrono>

namespace beehive::ctl {

void install_stop_handlers();
bool stop_requested();
/// Sleeps for `d`, returning early when a stop signal arrives.
void sleep_unless_stopped(std::chrono::milliseconds d);

}  // namespace beehive::ctl
