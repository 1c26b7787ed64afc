#pragma once

// Retention's age bound as a time: what is older than it may be trimmed.

#include <chrono>

#include <beehive/detail/saturate.hpp>
#include <beehive/time.hpp>

namespace beehive::store {

/// `now - max_age`, saturated: an age bound of centuries (milliseconds::max(), the usual
/// "for ever") is the earliest time, so nothing is old enough, where the subtraction
/// overflowed into an arbitrary time. `max_age` <= 0 (no age bound) is the latest time:
/// everything is old enough, and only a count bound keeps anything.
inline Time age_cutoff(Time now, std::chrono::milliseconds max_age) {
  if (max_age.count() <= 0) return Time::max();
  return detail::saturating_add(now, -max_age);
}

}  // namespace beehive::store
