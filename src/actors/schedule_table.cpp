// ScheduleTable (see schedule_table.hpp).

#include "actors/schedule_table.hpp"

#include <algorithm>
#include <utility>

#include <caf/abstract_actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include <beehive/actors.hpp>

namespace beehive::detail {

Schedule ScheduleTable::get(ObjectID id) const {
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  return it == next_.end() ? Schedule{} : shown(it->second);
}

void ScheduleTable::use(std::shared_ptr<const TimerClock> timers) {
  std::lock_guard lk(mu_);
  timers_ = std::move(timers);
}

Schedule ScheduleTable::shown(Time due) const {
  // Converted as it is read: a wall clock stepped since the object was scheduled does
  // not leave the time shown an hour off until the next reschedule.
  return {timers_ ? timers_->to_wall(due) : due};
}

void ScheduleTable::set(ObjectID id, Time t) {
  std::lock_guard lk(mu_);
  auto& slot = next_[id];
  if (slot == t) return;
  slot = t;
  publish_locked(id, shown(t));
}

void ScheduleTable::clear(ObjectID id) {
  std::lock_guard lk(mu_);
  if (next_.erase(id)) publish_locked(id, {});
}

void ScheduleTable::clear_all() {
  std::lock_guard lk(mu_);
  auto cleared = std::exchange(next_, {});
  for (auto& [id, t] : cleared) publish_locked(id, {});
}

void ScheduleTable::watch_actor(ObjectID id, caf::actor subscriber) {
  if (!subscriber) return;  // nobody to tell
  auto addr = subscriber.address();
  bool attach = false;
  {
    std::lock_guard lk(mu_);
    auto it = next_.find(id);
    caf::anon_send(subscriber,
                   schedule_change{id, it == next_.end() ? Schedule{} : shown(it->second)});
    auto [first, last] = actor_watches_.equal_range(id);
    if (std::none_of(first, last, [&](const auto& kv) { return kv.second.address() == addr; }))
      actor_watches_.emplace(id, subscriber);
    attach = attached_.insert(addr).second;
  }
  // Let go when the subscriber exits (at once, outside the lock, if it already has): an
  // object whose schedule never changes again would otherwise hold it for good.
  if (attach)
    caf::actor_cast<caf::abstract_actor*>(subscriber)
        ->attach_functor([weak = weak_from_this(), addr] {
          if (auto table = weak.lock()) table->forget_actor(addr);
        });
}

void ScheduleTable::unwatch_actor(ObjectID id, const caf::actor_addr& subscriber) {
  std::lock_guard lk(mu_);
  auto [first, last] = actor_watches_.equal_range(id);
  for (auto it = first; it != last; ++it)
    if (it->second.address() == subscriber) {
      actor_watches_.erase(it);
      return;
    }
}

void ScheduleTable::forget_actor(const caf::actor_addr& subscriber) {
  std::lock_guard lk(mu_);
  attached_.erase(subscriber);
  std::erase_if(actor_watches_, [&](const auto& kv) { return kv.second.address() == subscriber; });
}

std::size_t ScheduleTable::watch_count() const {
  std::lock_guard lk(mu_);
  return watches_.size() + actor_watches_.size();
}

void ScheduleTable::publish_locked(ObjectID id, Schedule s) {
  auto [a, b] = actor_watches_.equal_range(id);
  for (auto it = a; it != b; ++it) caf::anon_send(it->second, schedule_change{id, s});
  auto [first, last] = watches_.equal_range(id);
  for (auto it = first; it != last;) {
    auto core = it->second.lock();
    if (core && core->push(id, s))
      ++it;
    else
      it = watches_.erase(it);
  }
}

void ScheduleTable::watch(ObjectID id, const std::shared_ptr<StreamCore<Schedule>>& core) {
  std::unique_lock lk(mu_);
  if (finished_) {
    auto why = finished_;
    lk.unlock();
    core->finish(why);
    return;
  }
  auto it = next_.find(id);
  core->push(id, it == next_.end() ? Schedule{} : shown(it->second));
  // An ended stream leaves its entry until its object's schedule changes, which for a
  // settled or missing object is never: swept once they could be half the table.
  if (watches_.size() >= 2 * swept_at_) {
    std::erase_if(watches_, [](const auto& kv) {
      auto live = kv.second.lock();
      return !live || live->done();
    });
    swept_at_ = std::max<std::size_t>(watches_.size(), 16);
  }
  watches_.emplace(id, core);
}

void ScheduleTable::finish_all(std::error_code why) {
  std::unordered_multimap<ObjectID, std::weak_ptr<StreamCore<Schedule>>> watches;
  std::unordered_multimap<ObjectID, caf::actor> actors;
  {
    std::lock_guard lk(mu_);
    finished_ = why;
    watches.swap(watches_);
    actors.swap(actor_watches_);
  }
  for (auto& [id, a] : actors) caf::anon_send(a, watch_ended{0});
  for (auto& [id, weak] : watches)
    if (auto core = weak.lock()) core->finish(why);
}

}  // namespace beehive::detail
