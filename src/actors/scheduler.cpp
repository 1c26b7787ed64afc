#include "actors/scheduler.hpp"

#include <algorithm>

#include <beehive/detail/saturate.hpp>

namespace beehive::detail {

namespace {

using Self = scheduler_impl::stateful_pointer<SchedulerState>;

void fire_and_rearm(Self self) {
  auto& st = self->state;
  auto now = st.clock->now();
  Time earliest = Time::max();
  for (auto it = st.wakes.begin(); it != st.wakes.end();) {
    if (it->second <= now) {
      caf::anon_send(it->first, wake_atom::value);
      it = st.wakes.erase(it);
    } else {
      earliest = std::min(earliest, it->second);
      ++it;
    }
  }
  if (st.clock->manual() || earliest == Time::max()) return;
  if (earliest < st.armed) {
    st.armed = earliest;
    auto delay = std::chrono::duration_cast<std::chrono::microseconds>(earliest - now);
    self->delayed_send(self, delay, tick_atom::value);
  }
}

}  // namespace

scheduler_impl::behavior_type scheduler(Self self, std::shared_ptr<const TimerClock> clock) {
  self->state.clock = std::move(clock);
  auto wake_at = [self](const caf::actor& target, Time due) {
    auto& wakes = self->state.wakes;
    auto it = std::find_if(wakes.begin(), wakes.end(), [&](auto& w) { return w.first == target; });
    if (it == wakes.end())
      wakes.emplace_back(target, due);
    else
      it->second = due;
    fire_and_rearm(self);
  };
  return {
      [wake_at](timer_at_atom, const caf::actor& target, Time due) { wake_at(target, due); },
      [self, wake_at](wake_at_atom, const caf::actor& target, Time due) {
        auto& clock = *self->state.clock;
        std::chrono::milliseconds left(to_millis(due) - to_millis(clock.wall_now()));
        wake_at(target, saturating_add(clock.now(), left));
      },
      [self](tick_atom) {
        self->state.armed = Time::max();
        fire_and_rearm(self);
      },
      [self](inspect_atom) {
        scheduler_state out;
        out.wakes = self->state.wakes.size();
        for (auto& [target, due] : self->state.wakes)
          if (out.earliest == Time{} || due < out.earliest) out.earliest = due;
        if (out.earliest != Time{}) out.earliest = self->state.clock->to_wall(out.earliest);
        return out;
      },
  };
}

}  // namespace beehive::detail
