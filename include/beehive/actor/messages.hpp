#pragma once

/// The messages of beehive's actors: the store_writer's requests (actor/requests.hpp,
/// plain values without CAF, each naming its reply type), the requests that name a
/// subscribing actor (watches, schedules), the changes watches deliver, and the state
/// each actor reports to `inspect_atom`. Every type has an `inspect` overload
/// (actor/inspect.hpp), so it can be serialized and printed. Requests are answered with
/// their reply type, or a `caf::error` in beehive's category.
///
/// Object rows carry spec and status as JSON text at the schema version they were
/// written at; use `decode_row<Spec, Status>` to turn one into a typed Object.
///
/// Plain values: copyable, thread-compatible; CAF copies them between actors.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>

#include <beehive/actor/atoms.hpp>
#include <beehive/actor/requests.hpp>
#include <beehive/commit_record.hpp>
#include <beehive/condition.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>
#include <beehive/schedule.hpp>

namespace beehive {

/// The store_writer's state, for `inspect_atom`.
struct store_writer_state {
  std::uint64_t transactions = 0;  ///< committed since start
  std::uint64_t session = 0;       ///< the open within session; 0 = none
  std::size_t deferred = 0;        ///< requests waiting for the session to end
  std::size_t subscribers = 0;
};

// -- watch_hub ----------------------------------------------------------------

/// Subscribes `subscriber` to the objects of `gk` (or to the one object `id`). The hub
/// replies the subscription id once the snapshot is read (see watch_hub_actor about a
/// request's timeout); the changes are each object as it stands (`Added`), then every
/// later change in commit order. The subscription ends with `unsubscribe_atom` + the id
/// (or + the subscriber: all of its subscriptions), when the subscriber terminates, or
/// when the beehive stops (the subscriber then receives `watch_ended`).
///
/// Pushed (`pull == false`), each change is sent to the subscriber as an
/// `object_change` message as it commits: simplest, but a subscriber that falls behind
/// holds every change in its mailbox. (While the hub itself lags behind the writer, it
/// folds an object's changes into the latest, as a pulled one does: a subscriber sees
/// every object's latest state, not every intermediate one.) Pulled (`pull == true`), the hub keeps
/// the changes conflated per object, as a blocking Stream does (memory bounded by the distinct
/// objects pending, however many writes), and the subscriber takes them with `pull_atom` + the id.
///
/// `selector` and `resume_from` are with_selector's and with_resume_from's: objects
/// starting to match arrive as `Added`, stopping as `Deleted`; a resume replays the
/// change log instead of a snapshot, and ends the subscription (`watch_ended`) when its
/// position is outside the log (the reply is the id either way).
struct watch_request {
  GroupKind gk{};
  std::optional<ObjectID> id{};
  caf::actor subscriber{};
  bool pull = false;
  std::string selector{};
  std::optional<std::int64_t> resume_from{};
};

// For a pulled subscription, `pull_atom` + the id replies every pending change, in
// order, once at least one is pending. One pull waits at a time: a new one replaces it
// (the one replaced gets an empty reply). Changes the hub hands to a pull whose request
// timed out are lost to the subscriber (CAF drops the late reply): pull with
// `caf::infinite`, or, after a timed-out pull, subscribe again with `resume_from` the
// last version taken. Ends with `errc::stopped` when the beehive stops,
// `errc::not_found` for an unknown or ended subscription (a pull waiting when it ends
// included). At stop, what is pending and not pulled is pushed to the subscriber as
// `object_change` messages ahead of `watch_ended`: a pulled subscriber handles
// `object_change` too, or loses what was committed before the stop.

/// Subscribes `subscriber` to the event runs of object `id` that pass the filters: a
/// snapshot of the newest `limit` runs (all without a limit), oldest first, then every
/// new run and extension, each as an `event_run` message, in one chronological stream.
/// Replies the subscription id; ends as watch_request does.
struct event_watch_request {
  ObjectID id = 0;
  EventFilter filter{};
  caf::actor subscriber{};
};

/// Sent to an actor subscriber when its subscription ends, with why:
/// - `errc::stopped`: the beehive stopped;
/// - `errc::watch_too_old` / `errc::watch_too_new`: its `resume_from` lies below what the
///   change log still holds (or is 0, no position), or above its head (subscribe afresh,
///   without it);
/// - `errc::store`: the watch hub failed; its restart serves a new subscription;
/// - `errc::not_found`: the object an event subscription follows was removed (its runs
///   with it; none can come after).
/// A pulled subscription that ended answers a later `pull_atom` with `not_found`.
struct watch_ended {
  std::uint64_t subscription = 0;
  errc reason = errc::stopped;
};

/// The watch_hub's state, for `inspect_atom`.
struct watch_hub_state {
  std::size_t object_watches = 0;
  std::size_t event_watches = 0;
  std::size_t pending = 0;  ///< changes queued in blocking streams, not yet read
  /// Committed changes and event runs waiting for the hub to fan them out (one per
  /// object or run, whatever the number of commits), and the most there have been.
  std::size_t queued = 0;
  std::size_t peak_queued = 0;
  /// Actors it monitors: one per actor with a subscription, however many it has.
  std::size_t monitored = 0;
};

// -- controller -----------------------------------------------------------------

/// Requeues `id` now (kept backoff unless `reset_backoff`). Replies true once queued;
/// not_found for a missing or another kind's id; `stopped` once the beehive is stopping.
/// A standby's controller (PostgreSQL) hands the request to the leader's through the
/// change log, as Client::requeue does, and replies true once that is committed.
struct requeue_request {
  ObjectID id = 0;
  bool reset_backoff = false;
};

/// Subscribes `subscriber` to `id`'s schedule: the current value, then every change,
/// each as a `schedule_change`. Replies true. The subscription lasts until the
/// subscriber exits, the beehive stops (`watch_ended`), or the controller receives
/// `unsubscribe_atom` + `id` + the subscriber (changes sent before may still arrive). A
/// subscriber asking again for the same id keeps one subscription (and hears the
/// current value again).
struct schedule_watch_request {
  ObjectID id = 0;
  caf::actor subscriber{};
};

struct schedule_change {
  ObjectID id = 0;
  Schedule schedule{};
};

/// A controller's state, for `inspect_atom`.
struct controller_state {
  GroupKind gk{};
  std::size_t queue_length = 0;
  std::vector<ObjectID> in_flight{};
  std::vector<std::pair<ObjectID, std::chrono::milliseconds>> backoff{};  ///< last retry delay
  std::vector<std::pair<ObjectID, Time>> timers{};  ///< pending backoff / requeue_after
  bool dispatching = false;
  int workers = 0;
  std::uint64_t restarts = 0;  ///< times the supervisor restarted this controller
  /// Schedule watches held (streams and actors); ended ones are let go within a bounded
  /// number of later subscriptions.
  std::size_t schedule_watches = 0;
  /// Resync listings of the kind begun since the controller started. At most one runs at
  /// a time: resync ticks that come while one runs fold into one more, run after it.
  std::uint64_t resync_listings = 0;
  /// Whether a settle request (beehive::testing::settle) waits for this controller to
  /// become idle.
  bool settle_waiting = false;
};

/// The gc actor's state, for `inspect_atom`.
struct gc_state {
  std::uint64_t passes = 0;
  bool running = false;
};

/// The event_log actor's state, for `inspect_atom`. Runs are counted from the commit
/// records of every event write, whichever way it reached the store (other processes'
/// included, once this process has read them). Another process's writes are read back
/// folded, a run's latest state per read: the writes to one run between two reads count
/// once, as an extension unless the run was read at its first event.
struct event_log_state {
  std::uint64_t runs_started = 0;
  std::uint64_t runs_extended = 0;
  std::uint64_t sweeps = 0;   ///< retention sweeps completed
  std::uint64_t trimmed = 0;  ///< runs those sweeps removed
  bool sweeping = false;
};

/// The scheduler's state, for `inspect_atom`.
struct scheduler_state {
  std::size_t wakes = 0;  ///< targets waiting for a wake
  Time earliest{};        ///< the first of them; epoch when none
};

}  // namespace beehive
