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
/// Throws invalid_argument when a within block of `runtime` is open on this thread and a
/// write names another context (`in_block`: it names the block's): it would wait for the
/// block forever. Checked before a converged write is skipped too, so that the misuse
/// is refused whatever the stored data.
void refuse_write_beside_open_block(const void* runtime, bool in_block);
/// A reconcile running on this thread: the runtime it belongs to and the leadership term
/// its pass began in (Backend::term).
struct RunningReconcile {
  const void* runtime;
  std::int64_t term;
};
/// The reconciles running on this thread, innermost last (reconcile_pass.cpp). Keyed by
/// runtime: a reconcile of one beehive that calls another's Client is an ordinary caller
/// there (not fenced by its term, free to stop or settle it).
extern thread_local std::vector<RunningReconcile> running_reconciles;
/// The innermost reconcile of `runtime` running on this thread, or null.
const RunningReconcile* reconcile_on_this_thread(const void* runtime);

}  // namespace beehive::detail
