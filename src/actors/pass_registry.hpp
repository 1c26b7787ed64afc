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
// Thread-safe: workers enter and leave on their own threads.

#include <functional>
#include <mutex>
#include <unordered_set>

#include <beehive/group_kind.hpp>

namespace beehive::detail {

class PassRegistry {
 public:
  /// Holds `id` for one pass: `held()` is false when another pass holds it already.
  class Hold {
   public:
    Hold(PassRegistry& r, ObjectID id) : r_(r), id_(id), held_(r.enter(id)) {}
    ~Hold() {
      if (held_) r_.leave(id_);
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    bool held() const { return held_; }

   private:
    PassRegistry& r_;
    ObjectID id_;
    bool held_;
  };

  /// Called, on the thread of the pass that ends, with an id another pass was refused
  /// while it held it. Replaces the previous one (each controller sets its own).
  void on_release(std::function<void(ObjectID)> released);

 private:
  bool enter(ObjectID id);
  void leave(ObjectID id);

  std::mutex mu_;
  std::unordered_set<ObjectID> running_;
  std::unordered_set<ObjectID> refused_;  // held ids a pass found held
  std::function<void(ObjectID)> released_;
};

}  // namespace beehive::detail
