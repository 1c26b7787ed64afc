#pragma once

// A controller's per-object timers (backoff retries, requeue_after), indexed by due time
// as well as by object: the earliest and the ones due are found without a scan, so that
// a kind with many timers pays O(log n) per pass for them, not O(n).
//
// Thread-safety: none; its controller's only.

#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <beehive/detail/saturate.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/time.hpp>

namespace beehive::detail {

class TimerSet {
 public:
  /// Sets (or moves) `id`'s timer to `due`.
  void set(ObjectID id, Time due) {
    auto [it, fresh] = at_.try_emplace(id, due);
    if (!fresh) {
      order_.erase({it->second, id});
      it->second = due;
    }
    order_.emplace(due, id);
  }
  /// Drops `id`'s timer, if any.
  void erase(ObjectID id) {
    auto it = at_.find(id);
    if (it == at_.end()) return;
    order_.erase({it->second, id});
    at_.erase(it);
  }
  bool contains(ObjectID id) const { return at_.count(id) > 0; }
  void clear() {
    at_.clear();
    order_.clear();
  }
  /// The earliest due time; Time::max() without timers.
  Time earliest() const { return order_.empty() ? Time::max() : order_.begin()->first; }
  /// Whether a timer has fallen due at `now`.
  bool any_due(Time now) const { return fallen_due(earliest(), now); }
  /// Removes the timers fallen due at `now`, and returns their ids, earliest first.
  std::vector<ObjectID> take_due(Time now) {
    std::vector<ObjectID> due;
    while (!order_.empty() && fallen_due(order_.begin()->first, now)) {
      due.push_back(order_.begin()->second);
      at_.erase(due.back());
      order_.erase(order_.begin());
    }
    return due;
  }
  /// Every timer, by object.
  const std::unordered_map<ObjectID, Time>& all() const { return at_; }

 private:
  std::unordered_map<ObjectID, Time> at_;
  std::set<std::pair<Time, ObjectID>> order_;
};

}  // namespace beehive::detail
