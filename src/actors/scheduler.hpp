#pragma once

// The scheduler actor: the one place that watches the clock. A controller asks to be
// woken at its earliest due time (each request replaces that target's previous one);
// when the time comes the scheduler sends it `wake_atom` and the controller fires
// whatever fell due. Due times are on the TimerClock: on a ManualClock, time moves only
// on advance/set, which ticks the scheduler; otherwise it ticks itself with delayed
// messages on the steady clock. It monitors each target: the wake of one that exits
// goes with it (an application actor that asked for a wake far off, or never, and quit).

#include <memory>
#include <optional>
#include <set>
#include <unordered_set>
#include <vector>

#include <caf/actor_addr.hpp>

#include <beehive/actors.hpp>
#include <beehive/time.hpp>

#include "actors/atoms.hpp"
#include "actors/timer_clock.hpp"

namespace beehive::detail {

/// Beyond the public interface: a ManualClock's `tick_atom`; the delayed tick for the
/// timers' time it was armed for; `timer_at_atom` (a due time on the timers' time line);
/// and, for tests, how many delayed ticks it has sent.
using scheduler_impl =
    scheduler_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<tick_atom, Time>,
                            caf::reacts_to<timer_at_atom, caf::actor, Time>,
                            caf::replies_to<inspect_atom, tick_atom>::with<std::size_t>,
                            caf::replies_to<inspect_atom, std::vector<caf::actor>>::with<Time>>;

struct SchedulerState {
  std::shared_ptr<const TimerClock> clock;
  struct Wake {
    caf::actor target;
    Time due;  ///< on the timers' clock
    /// For a wake asked at a time of the beehive's own clock (wake_at_atom, system
    /// clock): that time. A wake that falls due before it (the clock was stepped back)
    /// waits on; see wall_recheck.
    std::optional<Time> wall_due;
  };
  std::vector<Wake> wakes;  // one per target, few targets
  /// Targets monitored (once each): a target's wake goes when it exits.
  std::unordered_set<caf::actor_addr> monitored;
  /// The due times of the delayed ticks in flight (steady clock). A tick is sent only
  /// for a wake earlier than all of them, and each one that arrives leaves the set: a
  /// tick that an earlier one overtook does not come back as another.
  std::multiset<Time> ticks;
  std::size_t ticks_sent = 0;
  static inline const char* name = "beehive.scheduler";
};

scheduler_impl::behavior_type scheduler(scheduler_impl::stateful_pointer<SchedulerState> self,
                                        std::shared_ptr<const TimerClock> clock);

}  // namespace beehive::detail
