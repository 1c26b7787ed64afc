// ScheduleTable (see schedule_table.hpp).

#include "actors/schedule_table.hpp"

#include <caf/send.hpp>

#include <beehive/actors.hpp>

namespace beehive::detail {

Schedule ScheduleTable::get(ObjectID id) const {
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  return it == next_.end() ? Schedule{} : Schedule{it->second};
}

void ScheduleTable::set(ObjectID id, Time t) {
  std::lock_guard lk(mu_);
  auto& slot = next_[id];
  if (slot == t) return;
  slot = t;
  publish_locked(id, {t});
}

void ScheduleTable::clear(ObjectID id) {
  std::lock_guard lk(mu_);
  if (next_.erase(id)) publish_locked(id, {});
}

void ScheduleTable::watch_actor(ObjectID id, caf::actor subscriber) {
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  caf::anon_send(subscriber,
                 schedule_change{id, it == next_.end() ? Schedule{} : Schedule{it->second}});
  actor_watches_.emplace(id, std::move(subscriber));
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
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  core->push(id, it == next_.end() ? Schedule{} : Schedule{it->second});
  watches_.emplace(id, core);
}

void ScheduleTable::finish_all(std::error_code why) {
  std::unordered_multimap<ObjectID, std::weak_ptr<StreamCore<Schedule>>> watches;
  std::unordered_multimap<ObjectID, caf::actor> actors;
  {
    std::lock_guard lk(mu_);
    watches.swap(watches_);
    actors.swap(actor_watches_);
  }
  for (auto& [id, a] : actors) caf::anon_send(a, watch_ended{0});
  for (auto& [id, weak] : watches)
    if (auto core = weak.lock()) core->finish(why);
}

}  // namespace beehive::detail
