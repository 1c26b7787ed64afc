#include "actors/scheduler.hpp"

#include <algorithm>
#include <chrono>

#include <caf/system_messages.hpp>

#include <beehive/detail/saturate.hpp>

namespace beehive::detail {

namespace {

using Self = scheduler_impl::stateful_pointer<SchedulerState>;

/// How often a wake asked at a time of the beehive's clock looks at that clock again
/// while it waits: a step of the clock moves its time, which the timers' clock (steady)
/// does not see. Bounds how late a forward step leaves it.
constexpr auto wall_recheck = std::chrono::seconds(1);

/// How long until `due`, a time of the beehive's clock, from `wall` (its now): whole
/// milliseconds (which cannot overflow for any two Times), rounded up.
std::chrono::milliseconds wall_left(Time due, Time wall) {
  using std::chrono::floor;
  using std::chrono::milliseconds;
  auto below_ms = [](Time::duration d) {
    auto r = d % milliseconds(1);
    return r < r.zero() ? r + milliseconds(1) : r;
  };
  auto at = due.time_since_epoch();
  auto w = wall.time_since_epoch();
  milliseconds left = floor<milliseconds>(at) - floor<milliseconds>(w);
  if (below_ms(at) > below_ms(w)) left += milliseconds(1);
  return left;
}

/// When a wake of the beehive's clock is next looked at: its time, or sooner; never for
/// the end of time (a wake asked "never").
Time wall_wake_due(const TimerClock& clock, Time wall_due) {
  if (wall_due == Time::max()) return Time::max();
  auto left =
      std::min<std::chrono::milliseconds>(wall_left(wall_due, clock.wall_now()), wall_recheck);
  return saturating_add(clock.now(), left);
}

void fire_and_rearm(Self self) {
  auto& st = self->state;
  auto now = st.clock->now();
  Time earliest = Time::max();
  for (auto it = st.wakes.begin(); it != st.wakes.end();) {
    if (fallen_due(it->due, now) && it->wall_due && st.clock->wall_now() < *it->wall_due) {
      it->due = wall_wake_due(*st.clock, *it->wall_due);  // never early
      now = st.clock->now();
    }
    if (fallen_due(it->due, now)) {
      caf::anon_send(it->target, wake_atom::value);
      it = st.wakes.erase(it);
    } else {
      earliest = std::min(earliest, it->due);
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
    std::erase_if(st.wakes, [&](const auto& w) { return w.target.address() == dm.source; });
  });
  auto wake_at = [self](const caf::actor& target, Time due, std::optional<Time> wall_due) {
    if (!target) return;  // nobody to wake
    auto& st = self->state;
    auto& wakes = st.wakes;
    auto it = std::find_if(wakes.begin(), wakes.end(), [&](auto& w) { return w.target == target; });
    if (it == wakes.end()) {
      if (st.monitored.insert(target.address()).second) self->monitor(target);
      wakes.push_back({target, due, wall_due});
    } else {
      it->due = due;
      it->wall_due = wall_due;
    }
    fire_and_rearm(self);
  };
  return {
      [wake_at](timer_at_atom, const caf::actor& target, Time due) {
        wake_at(target, due, std::nullopt);
      },
      [self, wake_at](wake_at_atom, const caf::actor& target, Time due) {
        auto& clock = *self->state.clock;
        if (clock.manual()) return wake_at(target, due, std::nullopt);  // the timers' own
        wake_at(target, wall_wake_due(clock, due), due);
      },
      [self](tick_atom) { fire_and_rearm(self); },  // a ManualClock moved
      [self](tick_atom, Time armed_for) {
        auto& ticks = self->state.ticks;
        if (auto it = ticks.find(armed_for); it != ticks.end()) ticks.erase(it);
        fire_and_rearm(self);
      },
      [self](inspect_atom, tick_atom) { return self->state.ticks_sent; },
      // The earliest wake but those of `skipped`, on the Beehive's clock; Time::max()
      // when none (the testing kit steps past housekeeping: see TestBeehive::advance).
      [self](inspect_atom, const std::vector<caf::actor>& skipped) {
        Time earliest = Time::max();
        for (auto& w : self->state.wakes)
          if (std::find(skipped.begin(), skipped.end(), w.target) == skipped.end())
            earliest =
                std::min(earliest, w.wall_due ? *w.wall_due : self->state.clock->to_wall(w.due));
        return earliest;
      },
      [self](inspect_atom) {
        scheduler_state out;
        out.wakes = self->state.wakes.size();
        for (auto& w : self->state.wakes) {
          auto due = w.wall_due ? *w.wall_due : self->state.clock->to_wall(w.due);
          if (out.earliest == Time{} || due < out.earliest) out.earliest = due;
        }
        return out;
      },
  };
}

}  // namespace beehive::detail
