#pragma once

/// `Result`: what a reconcile returns, and `TerminalError`, what it throws when retrying
/// cannot help.
///
/// A positive `requeue_after` reconciles the object again after that delay (the newest
/// schedule wins); zero (or negative) means no requeue. `Result::requeue_now()` asks for
/// another pass right after this one, paced like a retry (the kind's backoff ladder and
/// rate limit) but without an error: nothing is logged as a failure, and the next pass
/// that does not ask again clears the ladder.
///
/// Plain values: copyable, thread-compatible.

#include <chrono>
#include <stdexcept>
#include <string>

namespace beehive {

struct Result {
  std::chrono::milliseconds requeue_after{0};
  /// Another pass as soon as the kind's backoff ladder and rate limit allow (set by
  /// requeue_now()); wins over requeue_after.
  bool requeue = false;

  /// A pass that asks for another one right away, rate-limited like a retry.
  static Result requeue_now() {
    Result r;
    r.requeue = true;
    return r;
  }
};

/// Thrown out of reconcile for a failure that retrying cannot fix (a spec that can never
/// be satisfied, a permission that is missing): the pass ends without a retry, the
/// failure is logged once and recorded as a Warning event on the object (category
/// "reconcile", reason "TerminalError", the message). The object is reconciled again
/// only when its spec changes (or its deletion is requested), it is requeued by hand,
/// the deletion of an object it depends on is requested, or the process restarts (or its controller does: after a crash of beehive's own
/// actors, its successor starts without the marks and backoff ladders, as a process
/// restart does); resync, timers and wakes leave it alone meanwhile. It keeps
/// the object's place on the backoff ladder: a retry after the mark is lifted waits the
/// next step (only a success, or a requeue with reset_backoff, clears the ladder).
/// Thrown from a teardown (deletion requested), it leaves the object, and any owner
/// waiting for it to go, until its spec changes or it is requeued by hand.
class TerminalError : public std::runtime_error {
 public:
  explicit TerminalError(const std::string& what) : std::runtime_error(what) {}
  explicit TerminalError(const char* what) : std::runtime_error(what) {}
};

}  // namespace beehive
