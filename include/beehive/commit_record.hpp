#pragma once

/// `commit_record`: what one committed transaction changed, as the store_writer actor
/// publishes it to its subscribers (the watch hub, controllers, gc) after the commit.
///
/// Plain values, copied into each subscriber's message: thread-compatible.

#include <cstdint>
#include <optional>
#include <vector>

#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>

#include <beehive/change.hpp>
#include <beehive/object_row.hpp>

namespace beehive {

/// One object a commit changed, with its new row (for `Deleted`, the final body), and
/// what changed (a set of `object_change::Part` bits).
struct object_change {
  enum Part : unsigned {
    created = 1,
    spec = 2,
    status = 4,  ///< status or observed generation
    conditions = 8,
    finalizers = 16,
    deletion = 32,  ///< deletion requested
    removed = 64,   ///< physically removed
    labels = 128,
  };
  ChangeType type = ChangeType::Added;
  ObjectRow row;
  unsigned parts = 0;
  /// The row's owner, when it has one (controllers that own the row's kind reconcile
  /// it); on a removal, the owner it had, except on one another process made that was
  /// read from the change log (the edge went with the row).
  std::optional<Ref> owner{};
  /// When several changes of the object are folded into this one (another process's
  /// commits, read from the change log), the resource version of the earliest: a reader
  /// whose state is at or above it has the object already, and an `Added` is, to it, a
  /// modification. 0: this change alone, at the row's version.
  std::int64_t first_version = 0;
};

/// An event run a commit wrote (a new run, or an extension of the current one), with
/// the resource version of that write. Actor subscribers of event watches receive these.
struct event_run {
  Event event;
  std::int64_t resource_version = 0;
};

struct commit_record {
  std::vector<object_change> changes;
  std::vector<event_run> events;
  /// Dependents of objects whose conditions changed: each is requeued by its kind's
  /// controller.
  std::vector<Ref> wakes;
  /// Objects requeued by hand through the change log (`beehive-ctl requeue`, or
  /// `Client::requeue` on a standby), and the dependents of objects whose deletion was
  /// requested (which must drop their edges for the object to go): their kind's
  /// controller reconciles each, lifting a terminal mark, as an in-process requeue does.
  std::vector<Ref> requeues;
  /// Those of `requeues` asked for with the retry backoff reset: the controller forgets
  /// the object's place on its backoff ladder before it queues it.
  std::vector<Ref> backoff_resets;
  /// An edge was removed (it may have been what kept a deletion-pending object).
  bool edges_removed = false;
  /// The resource versions of what this commit wrote to the change log without changing
  /// an object (a requeue, a dependency released from a deletion-pending object), for
  /// the writer's bookkeeping and the watches' positions (which move past them):
  /// nothing for a subscriber to act on. Another process's commit may name only the
  /// highest.
  std::vector<std::int64_t> logged_versions{};
  /// When above 0: changes made by other processes at or below this resource version
  /// may be missing from the records published so far, and will never come. The change
  /// log was trimmed past what this process had read of it (it was paused, or cut off
  /// from the database, for longer than the log's retention). A subscriber that knows
  /// the state only as of a version below this one has to read it afresh: the watch hub
  /// ends such watches with `errc::watch_too_old`, controllers list their kinds again.
  std::int64_t lost_through = 0;

  bool empty() const {
    return changes.empty() && events.empty() && wakes.empty() && requeues.empty() &&
           !edges_removed && lost_through == 0;
  }
  /// Appends `other`, as one transaction made of both.
  void append(commit_record&& other);
};

}  // namespace beehive
