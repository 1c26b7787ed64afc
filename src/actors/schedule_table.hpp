#pragma once

// ScheduleTable: when each object of a kind is due to be reconciled next (backoff,
// requeue_after, or queued now), as `get_schedule` and schedule watches report it.
// Written by the kind's controller; read from any thread without a message.
//
// Thread-safety: every member function may be called from any thread.

#include <memory>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>

#include <beehive/detail/stream_core.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/schedule.hpp>
#include <beehive/time.hpp>

#include "actors/timer_clock.hpp"

namespace beehive::detail {

/// Per-object next-reconcile times, written by the kind's controller, readable from any
/// thread without a message, and streamed to schedule watches on every change.
class ScheduleTable : public std::enable_shared_from_this<ScheduleTable> {
 public:
  /// Converts the due times it holds (on the timers' time line) to the Beehive's clock
  /// as they are read: the kind's controller gives its own at spawn.
  void use(std::shared_ptr<const TimerClock> timers);
  /// `id`'s next reconcile, on the Beehive's clock as it reads now.
  Schedule get(ObjectID id) const;
  /// `due` on the timers' time line (TimerClock::now()).
  void set(ObjectID id, Time due);
  void clear(ObjectID id);
  /// Clears every object's entry (each watch hears the zero Schedule): nothing is
  /// scheduled any more, as on a controller that stopped leading.
  void clear_all();

  /// Streams `id`'s schedule: the current value, then every change (conflated).
  void watch(ObjectID id, const std::shared_ptr<StreamCore<Schedule>>& core);
  /// Sends `subscriber` a schedule_change now and on every change of `id`, until it
  /// exits or unwatches. Asking again for the same id replaces the earlier watch (one
  /// message per change, the current value again now). Only on a table owned by a
  /// shared_ptr.
  void watch_actor(ObjectID id, caf::actor subscriber);
  /// Ends `subscriber`'s watch of `id` (none: nothing happens).
  void unwatch_actor(ObjectID id, const caf::actor_addr& subscriber);
  /// Watches held: live ones, and ended streams not swept yet (at most as many again).
  std::size_t watch_count() const;
  /// Ends every schedule watch with `why`, and every one opened later (a watch racing
  /// the beehive's stop).
  void finish_all(std::error_code why);

 private:
  void publish_locked(ObjectID id, Schedule s);
  /// `due` as shown: on the Beehive's clock (under mu_).
  Schedule shown(Time due) const;
  /// Ends every watch of `subscriber` (it exited).
  void forget_actor(const caf::actor_addr& subscriber);

  mutable std::mutex mu_;
  std::shared_ptr<const TimerClock> timers_;
  std::unordered_map<ObjectID, Time> next_;  // on the timers' time line
  std::unordered_multimap<ObjectID, std::weak_ptr<StreamCore<Schedule>>> watches_;
  std::unordered_multimap<ObjectID, caf::actor> actor_watches_;
  std::unordered_set<caf::actor_addr> attached_;  // subscribers told to forget us on exit
  std::size_t swept_at_ = 0;                      // watches_.size() after the last sweep
  std::error_code finished_;                      // set by finish_all
};

}  // namespace beehive::detail
