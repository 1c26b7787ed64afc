#include "actors/timer_clock.hpp"

#include <beehive/detail/saturate.hpp>

namespace beehive::detail {

TimerClock::TimerClock(std::shared_ptr<Clock> wall)
    : wall_(std::move(wall)), manual_(dynamic_cast<ManualClock*>(wall_.get()) != nullptr) {}

Time TimerClock::now() const {
  if (manual_) return wall_->now();
  return Time{std::chrono::duration_cast<Time::duration>(
      std::chrono::steady_clock::now().time_since_epoch())};
}

Time TimerClock::to_wall(Time due) const {
  if (manual_ || due == Time::max()) return due;
  // In milliseconds, which cannot overflow for any Time (nanoseconds could).
  std::chrono::milliseconds left(to_millis(due) - to_millis(now()));
  return saturating_add(wall_->now(), left);
}

}  // namespace beehive::detail
