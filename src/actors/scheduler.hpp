#pragma once

// The scheduler actor: the one place that watches the clock. A controller asks to be
// woken at its earliest due time (each request replaces that target's previous one);
// when the time comes the scheduler sends it `wake_atom` and the controller fires
// whatever fell due. Due times are on the TimerClock: on a ManualClock, time moves only
// on advance/set, which ticks the scheduler; otherwise it ticks itself with delayed
// messages on the steady clock. It monitors each target: the wake of one that exits
// goes with it (an application actor that asked for a wake far off, or never, and quit).

#include <memory>
#include <unordered_set>
#include <vector>

#include <caf/actor_addr.hpp>

#include <beehive/actors.hpp>
#include <beehive/time.hpp>

#include "actors/atoms.hpp"
#include "actors/timer_clock.hpp"

namespace beehive::detail {

using scheduler_impl = scheduler_actor::extend<caf::reacts_to<tick_atom>,
                                               caf::reacts_to<timer_at_atom, caf::actor, Time>>;

struct SchedulerState {
  std::shared_ptr<const TimerClock> clock;
  std::vector<std::pair<caf::actor, Time>> wakes;  // one per target, few targets
  /// Targets monitored (once each): a target's wake goes when it exits.
  std::unordered_set<caf::actor_addr> monitored;
  Time armed{Time::max()};  // earliest delayed tick in flight (system clock)
  static inline const char* name = "beehive.scheduler";
};

scheduler_impl::behavior_type scheduler(scheduler_impl::stateful_pointer<SchedulerState> self,
                                        std::shared_ptr<const TimerClock> clock);

}  // namespace beehive::detail
