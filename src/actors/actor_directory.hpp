#pragma once

// ActorDirectory: where the root publishes the handles of the actors it runs, and where
// the facade (BeehiveCore, actor_handles) reads them. A restarted actor's new handle
// replaces the old one here.
//
// Thread-safety: every member function may be called from any thread.

#include <map>
#include <mutex>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>

#include "actors/scheduler.hpp"
#include "actors/store_writer.hpp"
#include "actors/watch_hub.hpp"

namespace beehive::detail {

/// The handles of the running actors, published by the root for the facade.
/// Thread-safety: every member function may be called from any thread.
class ActorDirectory {
 public:
  store_writer_impl writer() const;
  watch_hub_impl hub() const;
  scheduler_impl scheduler() const;
  caf::actor gc() const;
  caf::actor event_log() const;
  /// The reader that runs the actors' blocking reads (watch snapshots among them), or
  /// null once it is gone. Held weakly: the root ends it, and nothing here keeps it.
  caf::actor reader() const;
  /// The kind's controller, or null (before start, after stop, or no such kind).
  caf::actor controller(const GroupKind& gk) const;

  void set_writer(store_writer_impl w);
  void set_hub(watch_hub_impl h);
  void set_scheduler(scheduler_impl s);
  void set_gc(caf::actor g);
  void set_event_log(caf::actor e);
  void set_reader(caf::actor r);
  void set_controller(const GroupKind& gk, caf::actor c);

 private:
  mutable std::mutex mu_;
  store_writer_impl writer_;
  watch_hub_impl hub_;
  scheduler_impl scheduler_;
  caf::actor gc_;
  caf::actor event_log_;
  caf::actor_addr reader_;
  std::map<GroupKind, caf::actor> controllers_;
};

}  // namespace beehive::detail
