#include "actors/pass_registry.hpp"

namespace beehive::detail {

void PassRegistry::on_release(std::function<void(ObjectID)> released) {
  std::lock_guard lk(mu_);
  released_ = std::move(released);
}

bool PassRegistry::enter(ObjectID id) {
  std::lock_guard lk(mu_);
  if (running_.insert(id).second) return true;
  refused_.insert(id);
  return false;
}

void PassRegistry::leave(ObjectID id) {
  std::function<void(ObjectID)> tell;
  {
    std::lock_guard lk(mu_);
    running_.erase(id);
    if (refused_.erase(id)) tell = released_;
  }
  if (tell) tell(id);  // outside the lock: it sends a message
}

}  // namespace beehive::detail
