#pragma once

/// Internal: time arithmetic that saturates instead of overflowing, so that a huge
/// duration (`milliseconds::max()`, a timeout of centuries) means "never" rather than
/// wrapping into the past. Not part of the public API.

#include <chrono>
#include <optional>

namespace beehive::detail {

/// `t + d`, clamped to the time point's range (whose unit is a millisecond or finer).
template <class TimePoint>
TimePoint saturating_add(TimePoint t, std::chrono::milliseconds d) {
  using Duration = typename TimePoint::duration;
  using Rep = typename Duration::rep;
  constexpr Rep per_ms = std::chrono::duration_cast<Duration>(std::chrono::milliseconds(1)).count();
  static_assert(per_ms >= 1, "a time point with a unit coarser than a millisecond");
  Rep step, sum;
  if (__builtin_mul_overflow(static_cast<Rep>(d.count()), per_ms, &step) ||
      __builtin_add_overflow(t.time_since_epoch().count(), step, &sum))
    return d.count() > 0 ? TimePoint::max() : TimePoint::min();
  return TimePoint(Duration(sum));
}

/// Whether a timer due at `due` has fallen due at `now`. The range's last point is
/// "never" (where a saturated sum lands): a clock moved all the way to it fires nothing
/// that waits for it, rather than everything, again and again.
template <class TimePoint>
bool fallen_due(TimePoint due, TimePoint now) {
  return due != TimePoint::max() && due <= now;
}

/// The deadline `d` from now; none when it lies beyond the steady clock's range (a huge
/// timeout is no timeout).
inline std::optional<std::chrono::steady_clock::time_point> deadline_after(
    std::chrono::milliseconds d) {
  auto t = saturating_add(std::chrono::steady_clock::now(), d);
  if (t == std::chrono::steady_clock::time_point::max()) return std::nullopt;
  return t;
}

}  // namespace beehive::detail
