#include "actors/scheduler.hpp"

#include <algorithm>
#include <chrono>

#include <caf/system_messages.hpp>

#include <beehive/detail/saturate.hpp>

namespace beehive::detail {

namespace {

using Self = scheduler_impl::stateful_pointer<SchedulerState>;

void fire_and_rearm(Self self) {
  auto& st = self->state;
  auto now = st.clock->now();
  Time earliest = Time::max();
  for (auto it = st.wakes.begin(); it != st.wakes.end();) {
    if (fallen_due(it->second, now)) {
      caf::anon_send(it->first, wake_atom::value);
      it = st.wakes.erase(it);
    } else {
      earliest = std::min(earliest, it->second);
      ++it;
    }
  }
  if (st.clock->manual() || earliest == Time::max()) return;
  if (st.ticks.empty() || earliest < *st.ticks.begin()) {
    st.ticks.insert(earliest);
    ++st.ticks_sent;
    // Rounded up: a tick that came early would find nothing due and arm another.
    auto delay = std::chrono::ceil<std::chrono::microseconds>(earliest - now);
    self->delayed_send(self, delay, tick_atom::value, earliest);
  }
}

}  // namespace

scheduler_impl::behavior_type scheduler(Self self, std::shared_ptr<const TimerClock> clock) {
  self->state.clock = std::move(clock);
  // A target that exits takes its wake with it (a down message comes at once for one
  // that had exited before it asked).
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    st.monitored.erase(dm.source);
    std::erase_if(st.wakes, [&](const auto& w) { return w.first.address() == dm.source; });
  });
  auto wake_at = [self](const caf::actor& target, Time due) {
    if (!target) return;  // nobody to wake
    auto& st = self->state;
    auto& wakes = st.wakes;
    auto it = std::find_if(wakes.begin(), wakes.end(), [&](auto& w) { return w.first == target; });
    if (it == wakes.end()) {
      if (st.monitored.insert(target.address()).second) self->monitor(target);
      wakes.emplace_back(target, due);
    } else {
      it->second = due;
    }
    fire_and_rearm(self);
  };
  return {
      [wake_at](timer_at_atom, const caf::actor& target, Time due) { wake_at(target, due); },
      [self, wake_at](wake_at_atom, const caf::actor& target, Time due) {
        auto& clock = *self->state.clock;
        if (clock.manual()) return wake_at(target, due);  // the timers' own time line
        // In whole milliseconds (which cannot overflow for any two Times), rounded up:
        // a wake is never early.
        using std::chrono::floor;
        using std::chrono::milliseconds;
        auto below_ms = [](Time::duration d) {
          auto r = d % milliseconds(1);
          return r < r.zero() ? r + milliseconds(1) : r;
        };
        auto wall = clock.wall_now().time_since_epoch();
        auto at = due.time_since_epoch();
        milliseconds left = floor<milliseconds>(at) - floor<milliseconds>(wall);
        if (below_ms(at) > below_ms(wall)) left += milliseconds(1);
        wake_at(target, saturating_add(clock.now(), left));
      },
      [self](tick_atom) { fire_and_rearm(self); },  // a ManualClock moved
      [self](tick_atom, Time armed_for) {
        auto& ticks = self->state.ticks;
        if (auto it = ticks.find(armed_for); it != ticks.end()) ticks.erase(it);
        fire_and_rearm(self);
      },
      [self](inspect_atom, tick_atom) { return self->state.ticks_sent; },
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
