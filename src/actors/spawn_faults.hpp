#pragma once

// Fault injection for the tests of a start or an open that cannot spawn its actors: each
// reconcile worker, the reader and the store writer is a thread, and a process at its
// thread limit refuses one (std::system_error, as std::thread does). Off unless a test
// arms it; never armed by the library.

#include <atomic>

namespace beehive::detail::faults {

/// While at 0 or above: that many more reconcile workers spawn, then the next one fails
/// (and it goes back to -1, off).
inline std::atomic<int> worker_spawns_before_failure{-1};

/// While at 0 or above: that many more of the actors a new beehive opens with (the
/// reader, the store writer, the watch hub) spawn, then the next one fails (and it goes
/// back to -1, off).
inline std::atomic<int> open_spawns_before_failure{-1};

/// While true, a restarted store writer's connection waits before it opens: the window
/// a slow server leaves, for the tests of what happens meanwhile.
inline std::atomic<bool> hold_writer_reopen{false};

}  // namespace beehive::detail::faults
