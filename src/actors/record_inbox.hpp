#pragma once

// A controller's inbox of commit records. The store_writer folds each record the
// controller wants into it after the commit; the controller takes everything at once
// and queues what it names. It holds one change per object and one entry per id woken
// or requeued, however many commits named them, so what waits for a controller is
// bounded by the objects written, never by the write rate: a controller slower than the
// writer (a costly with_watches map, or no CPU for a while) takes larger batches instead
// of queueing a message per commit, as the hub does with its own inbox (hub_inbox.hpp).
// Event runs are left out: controllers do not act on them.
//
// Thread-safe: the writer (its actor, or a caller serving its queue) posts, the
// controller takes; one mutex, held while a record is folded in or swapped out.

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <caf/actor_addr.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include <beehive/commit_record.hpp>

namespace beehive::detail {

class RecordInbox {
 public:
  /// `controller` receives the wakes (`records_atom`) from now on; woken at once when
  /// something waits.
  void attach(caf::actor_addr controller);
  /// Folds in what `rec` names; wakes the controller when it was not woken already.
  void post(const commit_record& rec);
  /// Everything waiting, as one record: each object's changes folded (their parts
  /// together, the newest row), each woken, requeued or reset id once. The next post
  /// wakes the controller again.
  commit_record take();
  /// Objects and ids waiting.
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  caf::actor_addr controller_;
  bool woken_ = false;  // a wake is on its way and the controller has not taken since
  commit_record batch_;
  std::unordered_map<ObjectID, std::size_t> change_at_;  // index into batch_.changes
  std::unordered_set<ObjectID> woken_ids_, requeued_ids_, reset_ids_;
};

using RecordInboxPtr = std::shared_ptr<RecordInbox>;

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::RecordInboxPtr)
