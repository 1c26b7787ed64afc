#pragma once

// Settling: how `beehive::testing::settle` learns that nothing is left to do. The root
// asks each of its actors `settle_atom`; an actor answers at once when it is idle at the
// timers' current time (nothing queued, running, being read or due), and otherwise
// keeps the request and answers when it becomes idle. The root repeats the round until
// a round ends with no commit made during it (see root.cpp).
//
// Thread-safety: a SettleWaiters belongs to one actor's state; only that actor's thread
// touches it.

#include <vector>

#include <caf/error.hpp>
#include <caf/sec.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/atoms.hpp"

namespace beehive::detail {

/// The settle requests an actor holds until it is idle.
class SettleWaiters {
 public:
  SettleWaiters() = default;
  SettleWaiters(const SettleWaiters&) = delete;
  SettleWaiters& operator=(const SettleWaiters&) = delete;
  /// An actor that ends (a crash, a stop) answers what it held, so that the root's round
  /// learns that it went rather than wait for ever (CAF 0.17 answers no promise an actor
  /// dies holding).
  ~SettleWaiters() {
    for (auto& rp : waiting_) rp.deliver(caf::make_error(caf::sec::request_receiver_down));
  }

  /// The reply to a settle request: now when `idle`, else once `check(true)` is called.
  template <class Self>
  caf::typed_response_promise<bool> ask(Self* self, bool idle) {
    auto rp = self->template make_response_promise<bool>();
    if (idle)
      rp.deliver(true);
    else
      waiting_.push_back(rp);
    return rp;
  }

  /// Whether a settle request waits for the actor to become idle.
  bool waiting() const { return !waiting_.empty(); }

  /// Called after anything that may have made the actor idle.
  void check(bool idle) {
    if (!idle || waiting_.empty()) return;
    for (auto& rp : waiting_) rp.deliver(true);
    waiting_.clear();
  }

 private:
  std::vector<caf::typed_response_promise<bool>> waiting_;
};

}  // namespace beehive::detail
