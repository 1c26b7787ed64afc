#pragma once

// The watch hub's inbox of committed changes. The store_writer folds each commit record
// into it after the commit; the hub takes everything at once and fans it out. It holds
// one entry per object (and per event run), however many commits changed it, so what
// waits for the hub is bounded by the objects written, never by the write rate: a hub
// slower than the writer takes larger batches instead of queueing a message per commit.
// Each entry is its object as last committed, so a commit that changed an object several
// times (a `within` block that wrote its status, then a condition) reaches watchers once,
// whole.
//
// Thread-safe: the writer (its actor, or a caller serving its queue) posts, the hub
// takes; one mutex, held while a record is copied in or a batch is swapped out.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/atom.hpp>

#include <beehive/commit_record.hpp>

#include "actors/atoms.hpp"

namespace beehive::detail {

/// The conflation rule for object changes waiting for the hub (this inbox, and a new
/// watch's held changes): a pending `Added` stays `Added` with the newest body; anything
/// followed by a removal becomes the `Deleted` with the final body. Keeps every key: a
/// watch opened meanwhile may hold the object (its snapshot), and has to hear of it.
bool merge_changes(object_change& pending, object_change&& incoming);

/// A mark the hub puts in `object_change::parts` of a change it hands a watch's stream
/// without knowing whether the reader has the object: a resumed selector watch's object
/// that existed at the resume point (which labels it had then is not known), and every
/// row of a snapshot (handed over at open, read or not). Stream cores fold it safely
/// (merge_unread), and it is cleared before anything reaches a subscriber.
inline constexpr unsigned kReaderMayHaveIt = 1u << 30;

/// The conflation rule for the changes a reader has not read yet (a watch's stream
/// core), which is to leave the reader with what the changes together do to it:
///   Added then Modified   -> Added (the newest body)
///   Added then Deleted    -> nothing: the key is dropped (the reader never had it, and
///                            has not now), so what waits is bounded by the objects that
///                            exist, not by those ever written
///   Deleted then Added    -> Modified (a selector's object that left and came back: the
///                            reader still has it, and must not hear Added twice)
///   otherwise             -> the incoming type, with the newest body
/// A first change marked kReaderMayHaveIt leaves the reader's state before it unknown:
/// then Added then Deleted stays Deleted, and Deleted then Added stays Added.
bool merge_unread(object_change& pending, object_change&& incoming);

/// One object's changes since the hub last took the inbox, folded by merge_changes.
struct QueuedChange {
  object_change change;
  /// The resource version of the first change folded in: a watch whose snapshot was read
  /// at or above it already holds the object (see watch_hub.cpp).
  std::int64_t first_version = 0;
};

struct HubBatch {
  std::vector<QueuedChange> changes;  ///< in the order each object first changed
  std::vector<event_run> events;      ///< the newest state of each run, likewise
  std::int64_t lost_through = 0;      ///< the highest of the records' (commit_record)
  /// The highest version of the records folded in: every commit up to it is in this
  /// batch or an earlier one (records come in version order).
  std::int64_t through = 0;
};

class HubInbox {
 public:
  /// `hub` receives the wakes from now on. What an earlier hub left is dropped: a new hub
  /// has no watches yet, and each watch it opens reads a snapshot.
  void attach(caf::actor_addr hub);
  /// Folds in what `rec` changed; wakes the hub when the inbox was empty.
  void post(const commit_record& rec);
  /// Everything waiting; the next post wakes the hub again.
  HubBatch take();
  /// Entries waiting (objects plus event runs), and the most there have been since attach.
  std::size_t size() const;
  std::size_t peak() const;

 private:
  mutable std::mutex mu_;
  caf::actor_addr hub_;
  bool woken_ = false;  // a wake is on its way and the hub has not taken since
  HubBatch batch_;
  std::unordered_map<ObjectID, std::size_t> change_at_;  // index into batch_.changes
  std::unordered_map<EventID, std::size_t> event_at_;    // index into batch_.events
  std::size_t peak_ = 0;
};

}  // namespace beehive::detail
