#pragma once

/// `Result`: what a reconcile returns. A positive `requeue_after` reconciles the
/// object again after that delay (the newest schedule wins); zero means no requeue.
///
/// A plain value: copyable, thread-compatible.

#include <chrono>

namespace beehive {

struct Result {
  std::chrono::milliseconds requeue_after{0};
};

}  // namespace beehive
