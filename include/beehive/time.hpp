#pragma once

/// Time as beehive sees it: `Time` is a wall-clock instant stored at millisecond
/// precision; `Clock` is where beehive reads the time for every stored timestamp. Its
/// timers (backoff, requeue_after, resync, GC cadence) run on a `ManualClock` when that
/// is the clock, and on the steady clock for any other.
///
/// `ManualClock` is for tests: its time moves only when told, and every timer that
/// falls due by the new time fires on `advance` / `set`. Both clocks are thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace beehive {

using Time = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time now() const = 0;
};

/// The default clock: `std::chrono::system_clock`.
class SystemClock : public Clock {
 public:
  Time now() const override;
};

class ManualClock : public Clock {
 public:
  /// Starts about 50 years after the epoch, so that "epoch" (nothing scheduled) and
  /// "now" never coincide.
  explicit ManualClock(Time start = Time{} + std::chrono::hours(24 * 365 * 50));

  Time now() const override;

  /// Moves time forward by `d` (negative durations are ignored) and fires every timer
  /// due by the new time. Firing is asynchronous: this returns once the timers were told,
  /// before the work they start has run; `beehive::testing::settle` waits for that work
  /// (`TestBeehive::advance` does both, stepping through each due time in turn).
  void advance(std::chrono::milliseconds d);

  /// Moves time to `t`; a `t` before now is ignored (time never goes backwards). Fires
  /// what fell due, as `advance` does.
  void set(Time t);

  /// Calls `fn` after every move of time, on the thread that moved it (beehive's
  /// scheduler uses it to fire what fell due). Returns a token for `unsubscribe`.
  int subscribe(std::function<void()> fn);
  /// Once this returns, the listener is not running (unless this is called from inside
  /// it) and is never called again.
  void unsubscribe(int token);

 private:
  void notify();

  mutable std::mutex mu_;
  /// Held while listeners run, so that unsubscribe can wait for a running one.
  std::recursive_mutex calling_;
  Time now_;
  int next_token_ = 0;
  std::vector<std::pair<int, std::function<void()>>> listeners_;
};

/// Milliseconds since the epoch, the precision beehive stores.
std::int64_t to_millis(Time t) noexcept;
Time from_millis(std::int64_t ms) noexcept;

}  // namespace beehive
