#pragma once

/// `Schedule`: when an object is next due to reconcile, as a gauge. It reflects only
/// per-object timers (a pending backoff retry or requeue_after, or now if already
/// queued); the epoch means nothing is scheduled. Observability, not a promise.
///
/// A plain value: copyable, thread-compatible.

#include <beehive/time.hpp>

namespace beehive {

struct Schedule {
  Time next_requeue_at{};

  friend bool operator==(const Schedule&, const Schedule&) = default;
};

}  // namespace beehive
