#pragma once

// The time beehive's timers run on: backoff, requeue_after, resync and the GC and
// event-log cadence. On a ManualClock it is that clock (tests move time by hand); on
// any other clock it is the steady clock, so that a wall clock stepping back or forth
// (NTP, an operator) neither stalls the timers nor fires them early. The Beehive's
// clock still stamps everything stored and shown; `to_wall` converts a due time for
// schedules shown to users. Immutable after construction; safe from any thread.

#include <memory>

#include <beehive/time.hpp>

namespace beehive::detail {

class TimerClock {
 public:
  explicit TimerClock(std::shared_ptr<Clock> wall);

  /// Now, on the timers' time line.
  Time now() const;
  /// Whether time moves only when a ManualClock is advanced.
  bool manual() const { return manual_; }
  /// `due` (on the timers' time line) as the Beehive's clock reads it now.
  Time to_wall(Time due) const;
  /// Now, on the Beehive's clock.
  Time wall_now() const { return wall_->now(); }

 private:
  std::shared_ptr<Clock> wall_;
  bool manual_;
};

}  // namespace beehive::detail
