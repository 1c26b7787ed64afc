#pragma once

// The scheduler actor: the one place that watches the clock. A controller asks to be
// woken at its earliest due time (each request replaces that target's previous one);
// when the time comes the scheduler sends it `wake_atom` and the controller fires
// whatever fell due. On a ManualClock, time moves only on advance/set, which ticks the
// scheduler; on the system clock it ticks itself with delayed messages.

#include <memory>
#include <vector>

#include <beehive/actors.hpp>
#include <beehive/time.hpp>

namespace beehive::detail {

using wake_atom = caf::atom_constant<caf::atom("wake")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;

using scheduler_impl = scheduler_actor::extend<caf::reacts_to<tick_atom>>;

struct SchedulerState {
  std::shared_ptr<Clock> clock;
  std::vector<std::pair<caf::actor, Time>> wakes;  // one per target, few targets
  bool manual = false;
  Time armed{Time::max()};  // earliest delayed tick in flight (system clock)
  static inline const char* name = "beehive.scheduler";
};

scheduler_impl::behavior_type scheduler(scheduler_impl::stateful_pointer<SchedulerState> self,
                                        std::shared_ptr<Clock> clock);

}  // namespace beehive::detail
