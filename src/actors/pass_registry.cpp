#include "actors/pass_registry.hpp"

#include <algorithm>

#include "metrics/kind_metrics.hpp"

namespace beehive::detail {

void PassRegistry::on_release(std::function<void(ObjectID)> released) {
  std::lock_guard lk(mu_);
  released_ = std::move(released);
}

bool PassRegistry::running() const {
  std::lock_guard lk(mu_);
  return !running_.empty();
}

bool PassRegistry::enter(ObjectID id, const KindMetrics* m) {
  std::lock_guard lk(mu_);
  // The start times are the metrics' only: without a sink no clock is read.
  const auto now = m ? Steady::now() : Steady::time_point{};
  if (!running_.emplace(id, now).second) {
    refused_.insert(id);
    return false;
  }
  if (m) {
    m->work_started(id, now);
    report(*m, now);
  }
  return true;
}

void PassRegistry::leave(ObjectID id, const KindMetrics* m) {
  std::function<void(ObjectID)> tell;
  {
    std::lock_guard lk(mu_);
    auto it = running_.find(id);
    const auto now = m ? Steady::now() : Steady::time_point{};
    if (m && it != running_.end()) m->work_finished(id, now - it->second);
    running_.erase(it);
    if (m) report(*m, now);
    if (refused_.erase(id)) tell = released_;
  }
  if (tell) tell(id);  // outside the lock: it sends a message
}

void PassRegistry::report(const KindMetrics& m, Steady::time_point now) const {
  double unfinished = 0, longest = 0;
  for (auto& [id, began] : running_) {
    double s = std::chrono::duration<double>(now - began).count();
    unfinished += s;
    longest = std::max(longest, s);
  }
  m.active_workers(running_.size());
  m.in_flight(unfinished, longest);
}

}  // namespace beehive::detail
