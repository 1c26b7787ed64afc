#pragma once

// What the gc and the event_log share: the store_writer that runs their work and a
// periodic wake from the scheduler (on the TimerClock).

#include <chrono>
#include <memory>

#include <beehive/actors.hpp>
#include <beehive/detail/saturate.hpp>
#include <beehive/logger.hpp>
#include <beehive/time.hpp>

#include "actors/scheduler.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

struct Periodic {
  store_writer_actor writer;
  scheduler_impl scheduler;
  std::shared_ptr<const TimerClock> clock;
  std::chrono::milliseconds cadence{0};  // <= 0: no periodic wake
  Logger logger;
  /// The store, asked whether this process leads (null: it does).
  std::shared_ptr<store::Backend> backend;

  /// Periodic work is the leader's: a standby's cadence does nothing.
  bool leads() const { return !backend || backend->leads(); }

  /// Has the scheduler wake `self` one cadence from now. Callers arm before starting
  /// their work, so that the next wake is timed from its start: a test that advances a
  /// manual clock once it sees the work's effect finds the next one due.
  /// Returns the due time (Time::max() without a cadence), which settling compares with
  /// the timers' now.
  template <class Self>
  Time arm(Self* self) const {
    return arm(self, cadence);
  }
  /// The same `delay` from now: a retry sooner than the cadence. The scheduler keeps one
  /// wake per actor, so this one replaces the cadence's; the wake re-arms the cadence.
  template <class Self>
  Time arm(Self* self, std::chrono::milliseconds delay) const {
    if (delay.count() <= 0) return Time::max();
    auto due = saturating_add(clock->now(), delay);
    if (due == Time::max()) return due;  // never
    self->send(scheduler, timer_at_atom::value, caf::actor_cast<caf::actor>(self), due);
    return due;
  }

  /// Hands an application's request `r` on to the writer. While the writer restarts
  /// (this actor was spawned in between: no writer yet) it is refused with errc::store,
  /// to be asked again; CAF cannot delegate to no actor.
  template <class Result, class Self, class Request>
  caf::result<Result> delegate(Self* self, Request&& r) const {
    if (!writer) return make_error(errc::store, "the store writer is restarting; ask again");
    return self->delegate(writer, std::forward<Request>(r));
  }

  /// Whether a wake armed for `due` has fallen due.
  bool due(Time next) const { return fallen_due(next, clock->now()); }

  void log_failure(const std::string& what, const caf::error& err) const {
    if (logger) logger(LogLevel::error, what, {{"reason", error_message(err)}});
  }
};

}  // namespace beehive::detail
