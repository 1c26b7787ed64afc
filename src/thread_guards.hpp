#pragma once

// What the calling thread is inside of, so that a call that would wait for itself is
// refused instead of deadlocking: a write outside the within block open on this thread,
// a stop from a reconcile or a within block. Each counter belongs to its thread.

#include <cstdint>
#include <vector>

namespace beehive::detail {

/// The runtime of each within block open on this thread, outermost first
/// (blocking_write.cpp). Only a write to the same runtime waits for its block.
extern thread_local std::vector<const void*> open_sessions;
/// Reconciles running on this thread (reconcile_pass.cpp).
extern thread_local int in_reconcile;
/// The leadership term the reconcile running on this thread began in (Backend::term).
extern thread_local std::int64_t reconcile_term;

}  // namespace beehive::detail
