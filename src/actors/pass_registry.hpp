#pragma once

// The objects of one kind whose reconcile runs now, whichever controller handed them out.
//
// Nothing interrupts a reconcile: a controller replaced while its passes ran (it crashed,
// or the root retired it with its restart group) leaves them running on their workers'
// threads, and its successor lists the kind and hands every id out again. Since a
// controller is never called concurrently for one object, a pass that finds its id held
// does not run (Outcome::busy); when the holder ends, the controller current then is told
// (on_release) and queues the id again.
//
// The passes in flight are reported from here (work_started / work_finished, the
// active-workers and in-flight gauges), as they start and end: a pass its controller no
// longer hears of (replaced, or left running by a stop's deadline) counts until it ends.
//
// Thread-safe: workers enter and leave on their own threads.

#include <chrono>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <beehive/group_kind.hpp>

namespace beehive::detail {

class KindMetrics;

class PassRegistry {
 public:
  /// Holds `id` for one pass: `held()` is false when another pass holds it already. A
  /// held pass is reported to `metrics` (when not null) as it starts and ends.
  class Hold {
   public:
    Hold(PassRegistry& r, ObjectID id, const KindMetrics* metrics)
        : r_(r), id_(id), metrics_(metrics), held_(r.enter(id, metrics)) {}
    ~Hold() {
      if (held_) r_.leave(id_, metrics_);
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    bool held() const { return held_; }

   private:
    PassRegistry& r_;
    ObjectID id_;
    const KindMetrics* metrics_;
    bool held_;
  };

  /// Called, on the thread of the pass that ends, with an id another pass was refused
  /// while it held it. Replaces the previous one (each controller sets its own).
  void on_release(std::function<void(ObjectID)> released);

  /// Whether a pass holds an id now.
  bool running() const;

 private:
  using Steady = std::chrono::steady_clock;
  bool enter(ObjectID id, const KindMetrics* m);
  void leave(ObjectID id, const KindMetrics* m);
  /// The gauges of the passes in flight; under mu_, so that reports land in order.
  void report(const KindMetrics& m, Steady::time_point now) const;

  mutable std::mutex mu_;
  std::unordered_map<ObjectID, Steady::time_point> running_;  // since when (with metrics)
  std::unordered_set<ObjectID> refused_;                      // held ids a pass found held
  std::function<void(ObjectID)> released_;
};

}  // namespace beehive::detail
