// ActorDirectory (see actor_directory.hpp).

#include "actors/actor_directory.hpp"

namespace beehive::detail {

store_writer_impl ActorDirectory::writer() const {
  std::lock_guard lk(mu_);
  return writer_;
}
watch_hub_impl ActorDirectory::hub() const {
  std::lock_guard lk(mu_);
  return hub_;
}
scheduler_impl ActorDirectory::scheduler() const {
  std::lock_guard lk(mu_);
  return scheduler_;
}
caf::actor ActorDirectory::gc() const {
  std::lock_guard lk(mu_);
  return gc_;
}
caf::actor ActorDirectory::event_log() const {
  std::lock_guard lk(mu_);
  return event_log_;
}
caf::actor ActorDirectory::reader() const {
  std::lock_guard lk(mu_);
  return caf::actor_cast<caf::actor>(reader_);
}
caf::actor ActorDirectory::controller(const GroupKind& gk) const {
  std::lock_guard lk(mu_);
  auto it = controllers_.find(gk);
  return it == controllers_.end() ? caf::actor{} : it->second;
}
void ActorDirectory::set_writer(store_writer_impl w) {
  std::lock_guard lk(mu_);
  writer_ = std::move(w);
}
void ActorDirectory::set_hub(watch_hub_impl h) {
  std::lock_guard lk(mu_);
  hub_ = std::move(h);
}
void ActorDirectory::set_scheduler(scheduler_impl s) {
  std::lock_guard lk(mu_);
  scheduler_ = std::move(s);
}
void ActorDirectory::set_gc(caf::actor g) {
  std::lock_guard lk(mu_);
  gc_ = std::move(g);
}
void ActorDirectory::set_event_log(caf::actor e) {
  std::lock_guard lk(mu_);
  event_log_ = std::move(e);
}
void ActorDirectory::set_reader(caf::actor r) {
  std::lock_guard lk(mu_);
  reader_ = r.address();
}
void ActorDirectory::set_controller(const GroupKind& gk, caf::actor c) {
  std::lock_guard lk(mu_);
  if (c)
    controllers_[gk] = std::move(c);
  else
    controllers_.erase(gk);
}

}  // namespace beehive::detail
