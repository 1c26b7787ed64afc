#pragma once

/// Internal: time arithmetic that saturates instead of overflowing, so that a huge
/// duration (`milliseconds::max()`, a timeout of centuries) means "never" rather than
/// wrapping into the past. Not part of the public API.

#include <chrono>
#include <optional>

namespace beehive::detail {

/// `t + d`, clamped to the time point's range.
template <class TimePoint>
TimePoint saturating_add(TimePoint t, std::chrono::milliseconds d) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  if (d.count() >= 0) {
    if (d >= duration_cast<milliseconds>(TimePoint::max() - t)) return TimePoint::max();
  } else if (d <= -duration_cast<milliseconds>(t - TimePoint::min())) {
    return TimePoint::min();
  }
  return t + duration_cast<typename TimePoint::duration>(d);
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
