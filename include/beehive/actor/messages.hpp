#pragma once

/// The messages of beehive's actors: requests (each answered with the reply type its
/// actor's interface names, or a `caf::error` in beehive's category), the changes
/// watches deliver, and the state each actor reports to `inspect_atom`. Every type has
/// an `inspect` overload (actor/inspect.hpp), so it can be serialized and printed.
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

#include <caf/all.hpp>

#include <beehive/commit_record.hpp>
#include <beehive/condition.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>
#include <beehive/schedule.hpp>

namespace beehive {

// -- atoms --------------------------------------------------------------------

using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using unsubscribe_atom = caf::atom_constant<caf::atom("unsubscr")>;

// -- store_writer -------------------------------------------------------------

/// Create an object. `spec` is JSON text. Replies the stored row.
struct create_request {
  GroupKind gk{};
  std::string spec{};
  std::optional<std::string> slug{};
  std::vector<std::string> finalizers{};
  std::optional<ObjectID> owner{};  ///< must exist; its owned_by edge is written with the row
  int spec_version = 0;             ///< the schema version `spec` is written at
};

/// Replace an object's spec; a spec equal to the stored one writes nothing.
/// Replies the stored row.
struct update_request {
  GroupKind gk{};
  ObjectID id = 0;
  std::string spec{};
  int spec_version = 0;  ///< the schema version `spec` is written at
};

/// Update the object holding `slug`, or create it. Replies the stored row.
struct create_or_update_request {
  GroupKind gk{};
  std::string slug{};
  std::string spec{};
  int spec_version = 0;  ///< the schema version `spec` is written at
};

/// Return the object holding `slug` untouched, or create it with the options.
struct get_or_create_request {
  GroupKind gk{};
  std::string slug{};
  std::string spec{};
  std::vector<std::string> finalizers{};
  std::optional<ObjectID> owner{};
  int spec_version = 0;  ///< the schema version `spec` is written at
};

struct get_or_create_reply {
  ObjectRow row{};
  bool created = false;
};

/// Request deletion of an object (a soft delete). Replies the row as it now stands.
struct remove_request {
  GroupKind gk{};
  ObjectID id = 0;
};

/// Request deletion of the object holding `slug`, if any. Replies true when a deletion
/// was requested by this call.
struct remove_by_slug_request {
  GroupKind gk{};
  std::string slug{};
};

/// Controller writes (kind-folded: another kind's id is wrong_kind). Each replies the
/// row as it now stands.
struct update_status_request {
  GroupKind gk{};
  ObjectID id = 0;
  std::int64_t observed_generation = 0;
  std::string status{};    ///< JSON text
  int status_version = 0;  ///< the schema version `status` is written at
};

struct set_condition_request {
  GroupKind gk{};
  ObjectID id = 0;
  Condition condition{};
};

struct remove_condition_request {
  GroupKind gk{};
  ObjectID id = 0;
  std::string type{};
};

struct remove_finalizer_request {
  GroupKind gk{};
  ObjectID id = 0;
  std::string finalizer{};
};

/// Adds or removes a depends_on edge from this kind's `from` to any object `to`.
/// Replies true when the edge was added (removed); repeating it writes nothing.
struct add_dependency_request {
  GroupKind gk{};
  ObjectID from = 0;
  ObjectID to = 0;
};

struct remove_dependency_request {
  GroupKind gk{};
  ObjectID from = 0;
  ObjectID to = 0;
};

/// Records an observation on this kind's object `id`: extends the current run of its
/// category when (type, reason) match, starts a new run otherwise. Replies the run.
struct record_event_request {
  GroupKind gk{};
  ObjectID id = 0;
  EventSpec event{};
};

/// Event retention: keep the newest `per_object` runs per (object, category) (all when
/// 0) and none older than `max_age` (no bound when 0).
struct event_retention {
  int per_object = 0;
  std::chrono::milliseconds max_age{0};
};

/// One garbage-collection pass: cascades deletion to the children of deletion-pending
/// owners and removes collectible objects. Replies the number of objects removed.
struct collect_request {};

/// One retention sweep: trims every kind's event timelines by `retention` (per kind;
/// `fallback` for kinds not listed; nothing when neither applies). Replies the number of
/// runs removed.
struct trim_events_request {
  std::optional<event_retention> fallback{};
  std::vector<std::pair<GroupKind, event_retention>> retention{};
};

/// The actor form of `within`: the writes in `writes` (each a message holding one write
/// request above) applied in one transaction, in order, all or nothing. Replies one
/// message per write holding that request's reply; if any write fails, nothing is
/// committed and the error names the failing index.
struct transaction_request {
  std::vector<caf::message> writes{};
};

// -- reads (served by the store_writer, in commit order with the writes) -------

/// The kind's object `id`; not_found for a missing or another kind's id. `loads` is a
/// set of LoadOption bits (LoadOption::owner | LoadOption::events ...).
struct get_request {
  GroupKind gk{};
  ObjectID id = 0;
  unsigned loads = 0;
};

struct get_by_slug_request {
  GroupKind gk{};
  std::string slug{};
  unsigned loads = 0;
};

/// Every object of the kind by id, or (with `owner`) those `owner` owns.
struct list_request {
  GroupKind gk{};
  unsigned loads = 0;
  std::optional<ObjectID> owner{};
};

/// One relation of any object (a LoadOption bit: owner, dependencies, dependents,
/// owned); not kind-scoped, empty for a missing id.
struct relation_request {
  ObjectID id = 0;
  unsigned relation = 0;
};

struct has_incoming_refs_request {
  ObjectID id = 0;
};

/// An object's event runs, newest first, filtered as list_events filters.
struct list_events_request {
  ObjectID id = 0;
  std::optional<std::string> category{};
  std::optional<EventType> type{};
  std::optional<std::string> reason{};
  std::optional<Time> since{};
  std::optional<int> limit{};
};

/// The store_writer's state, for `inspect_atom`.
struct store_writer_state {
  std::uint64_t transactions = 0;  ///< committed since start
  std::uint64_t session = 0;       ///< the open within session; 0 = none
  std::size_t deferred = 0;        ///< requests waiting for the session to end
  std::size_t subscribers = 0;
};

// -- watch_hub ----------------------------------------------------------------

/// Subscribes `subscriber` to the objects of `gk` (or to the one object `id`). The hub
/// replies the subscription id; the changes are each object as it stands (`Added`),
/// then every later change in commit order. The subscription ends with
/// `unsubscribe_atom` + the id, when the subscriber terminates, or when the beehive
/// stops (the subscriber then receives `watch_ended`).
///
/// Pushed (`pull == false`), each change is sent to the subscriber as an
/// `object_change` message as it commits: simplest, but a subscriber that falls behind
/// holds every change in its mailbox. Pulled (`pull == true`), the hub keeps the
/// changes conflated per object, as a blocking Stream does (memory bounded by the
/// distinct objects pending, however many writes), and the subscriber takes them with
/// `pull_atom` + the id.
struct watch_request {
  GroupKind gk{};
  std::optional<ObjectID> id{};
  caf::actor subscriber{};
  bool pull = false;
};

/// For a pulled subscription: replies every pending change, in order, once at least
/// one is pending (one pull waits at a time). Ends with `errc::stopped` when the beehive
/// stops, `errc::not_found` for an unknown or ended subscription.
using pull_atom = caf::atom_constant<caf::atom("pull")>;

/// Subscribes `subscriber` to the event runs of object `id` that pass the filters: a
/// snapshot of the newest `limit` runs (all without a limit), oldest first, then every
/// new run and extension, each as an `event_run` message, in one chronological stream.
/// Replies the subscription id; ends as watch_request does.
struct event_watch_request {
  ObjectID id = 0;
  std::optional<std::string> category{};
  std::optional<EventType> type{};
  std::optional<std::string> reason{};
  std::optional<Time> since{};
  std::optional<int> limit{};
  caf::actor subscriber{};
};

/// Sent to an actor subscriber when its subscription ends because the beehive stopped.
struct watch_ended {
  std::uint64_t subscription = 0;
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
};

// -- controller -----------------------------------------------------------------

using requeue_atom = caf::atom_constant<caf::atom("requeue")>;
using schedule_atom = caf::atom_constant<caf::atom("schedule")>;
using inspect_atom = caf::atom_constant<caf::atom("inspect")>;

/// Requeues `id` now (kept backoff unless `reset_backoff`). Replies true once queued;
/// not_found for a missing or another kind's id.
struct requeue_request {
  ObjectID id = 0;
  bool reset_backoff = false;
};

/// Subscribes `subscriber` to `id`'s schedule: the current value, then every change,
/// each as a `schedule_change`. Replies true.
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
};

/// The gc actor's state, for `inspect_atom`.
struct gc_state {
  std::uint64_t passes = 0;
  bool running = false;
};

/// The event_log actor's state, for `inspect_atom`. Runs are counted from the commit
/// records of every event write, whichever way it reached the store.
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
