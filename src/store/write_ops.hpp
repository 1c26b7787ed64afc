#pragma once

// The semantics of object writes (slugs, no-op detection, generations, resource
// versions), written once over the backend's Writer primitives. Every function runs
// inside a transaction the caller opened, appends what it changed to `changes`, and
// throws beehive::Error on failure (the caller rolls back).
//
// Run by the WriteEngine, on the store_writer's thread; one WriteOps per write, not
// shared between threads.

#include <atomic>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <beehive/actor/requests.hpp>
#include <beehive/commit_record.hpp>

#include "store/backend.hpp"
#include "store/clock_step.hpp"
#include "store/event_sweep.hpp"

namespace beehive::store {

/// The rows one garbage-collection pass marks or removes at most: a cascade of any size
/// runs as transactions of this size, other writes between them (the gc hears of each
/// pass's commit and runs the next).
inline constexpr std::int64_t gc_pass_budget = 1000;

/// The bytes (specs and statuses) of the rows one pass marks or removes, about: each
/// such row goes into the pass's commit record and change log whole, so a thousand rows
/// of megabytes would hold every other write and gigabytes of memory for one pass. A
/// pass takes at least one row. Tests lower it to see a cascade span passes.
inline std::atomic<std::int64_t> gc_pass_bytes{16 << 20};

/// The most change-log entries one trim removes (one transaction): a trim that removed
/// that many may have more to go, in the next. Tests lower it to see a trim span pages.
inline std::atomic<std::int64_t> change_log_trim_page{10000};

class WriteOps {
 public:
  /// Checks a row before it is written (see `create`); throws to refuse it.
  using RowCheck = std::function<void(const ObjectRow&)>;

  /// `check`, when given, must outlive the WriteOps.
  WriteOps(Writer& w, Time now, commit_record& rec, const RowCheck* check = nullptr)
      : w_(w), now_(now), rec_(rec), check_(check) {}

  /// Whether `check` has seen the row this write returns (a create's, before its INSERT).
  bool checked() const { return checked_; }
  /// A create leaves a taken slug to the database's unique constraint instead of looking
  /// it up first (a round trip on PostgreSQL): for a batched group commit, which runs
  /// again write by write, looking up, when the database refuses a statement.
  void leave_slugs_to_the_database() { slugs_by_constraint_ = true; }
  /// A change-log trim removes no entry above `at_most`: the engine's subscribers have
  /// not heard of those yet (see WriteEngine::trim_limit).
  void limit_change_log_trim(std::int64_t at_most) { trim_at_most_ = at_most; }
  /// A change-log trim first moves the entries each step left in the future back to the
  /// step, in order: the log is cut by age as a prefix, and an entry stamped ahead of the
  /// clock would hold every later one until the clock caught up with it. `steps` must
  /// outlive the WriteOps.
  void correct_clock_steps(const std::vector<ClockStep>& steps) { clock_steps_ = &steps; }
  /// An event-retention sweep runs the next page of `sweep` (which must outlive the
  /// WriteOps), of about `page` runs; without this it runs a whole sweep that looks at
  /// every (object, category).
  void sweep_in_pages(EventSweep& sweep, int page) {
    sweep_ = &sweep;
    page_ = page;
  }

  /// How each request of requests.hpp applies: one overload per request, replying its
  /// `reply_type`. A request's unset schema version is the kind's current one, which
  /// its sender (the facade, or the store_writer for an actor) filled in.
  ObjectRow apply(const create_request& r);
  ObjectRow apply(const update_request& r);
  ObjectRow apply(const create_or_update_request& r);
  get_or_create_reply apply(const get_or_create_request& r);
  ObjectRow apply(const remove_request& r);
  bool apply(const remove_by_slug_request& r);
  ObjectRow apply(const update_status_request& r);
  ObjectRow apply(const set_condition_request& r);
  ObjectRow apply(const remove_condition_request& r);
  ObjectRow apply(const remove_finalizer_request& r);
  ObjectRow apply(const add_finalizer_request& r);
  bool apply(const add_dependency_request& r);
  bool apply(const remove_dependency_request& r);
  Event apply(const record_event_request& r);
  ObjectRow apply(const set_labels_request& r);
  bool apply(const log_requeue_request& r);
  int apply(const collect_request& r);
  int apply(const trim_events_request& r);
  int apply(const trim_change_log_request& r);

  /// `owner` must exist (not_found); its edge is written with the row. The row is built
  /// and checked first, then written by one INSERT (two with an owner): without an
  /// owner, a create that fails leaves nothing, even outside a savepoint.
  ObjectRow create(const GroupKind& gk, const std::string& spec,
                   const std::optional<std::string>& slug,
                   const std::vector<std::string>& finalizers,
                   std::optional<ObjectID> owner = std::nullopt, int spec_version = 0,
                   const Labels& labels = {});
  /// `expected`: the resource version the object must be at (conflict otherwise).
  ObjectRow update(const GroupKind& gk, ObjectID id, const std::string& spec, int spec_version = 0,
                   std::optional<std::int64_t> expected = std::nullopt);
  /// `finalizers`, `owner` and `labels` apply only when it creates.
  ObjectRow create_or_update(const GroupKind& gk, const std::string& slug, const std::string& spec,
                             int spec_version = 0, const std::vector<std::string>& finalizers = {},
                             std::optional<ObjectID> owner = std::nullopt,
                             const Labels& labels = {});
  /// The row holding the slug untouched (false), or a new one (true).
  std::pair<ObjectRow, bool> get_or_create(const GroupKind& gk, const std::string& slug,
                                           const std::string& spec,
                                           const std::vector<std::string>& finalizers,
                                           std::optional<ObjectID> owner, int spec_version = 0,
                                           const Labels& labels = {});
  ObjectRow remove(const GroupKind& gk, ObjectID id,
                   std::optional<std::int64_t> expected = std::nullopt);
  /// Replaces the labels (validated); the same labels write nothing.
  ObjectRow set_labels(const GroupKind& gk, ObjectID id, const Labels& labels,
                       std::optional<std::int64_t> expected = std::nullopt);
  /// Records a requeue of the object in the change log and wakes its controller here.
  bool log_requeue(const GroupKind& gk, ObjectID id, bool reset_backoff);
  /// Trims the change log (see trim_change_log_request); returns the entries removed.
  int trim_change_log(const trim_change_log_request& r);
  /// True when this call requested the deletion.
  bool remove_by_slug(const GroupKind& gk, const std::string& slug);

  // Controller writes: kind-folded, so another kind's id is wrong_kind.

  /// Records status and the observed generation; unchanged bytes at an already
  /// recorded generation write nothing.
  ObjectRow update_status(const GroupKind& gk, ObjectID id, std::int64_t observed_generation,
                          const std::string& status, int status_version = 0,
                          std::optional<std::int64_t> expected = std::nullopt);
  ObjectRow set_condition(const GroupKind& gk, ObjectID id, const Condition& c);
  ObjectRow remove_condition(const GroupKind& gk, ObjectID id, const std::string& type);
  ObjectRow remove_finalizer(const GroupKind& gk, ObjectID id, const std::string& finalizer);
  /// Present already: nothing written. invalid_argument once deletion was requested.
  ObjectRow add_finalizer(const GroupKind& gk, ObjectID id, const std::string& finalizer);
  /// `from` is this kind's; `to` any existing object. True when the edge is new.
  bool add_dependency(const GroupKind& gk, ObjectID from, ObjectID to);
  bool remove_dependency(const GroupKind& gk, ObjectID from, ObjectID to);

  /// Extends the current run of the event's category or starts a new one; never moves
  /// the object's resource version.
  Event record_event(const GroupKind& gk, ObjectID id, const EventSpec& e);
  /// Applies event retention to every kind with events; returns the runs removed.
  int trim_events(const trim_events_request& policy);
  /// Runs the next page of `sweep`, of about `page` runs; returns the runs removed.
  int sweep_page(EventSweep& sweep, int page);

  /// Garbage collection: soft-deletes the live children of deletion-pending owners (when
  /// `cascade`) and removes collectible rows, repeating while that unblocks more, until
  /// `budget` rows, or gc_pass_bytes of them, were marked or removed. Returns the number
  /// of rows removed.
  int collect_garbage(std::int64_t budget, bool cascade);

 private:
  /// Logs an entry that changes nothing in the object (kLogged* `parts`) at a version of
  /// its own.
  void log_without_change(const ObjectMeta& meta, unsigned parts);
  /// The kind's row with this id, or not_found.
  ObjectRow require(const GroupKind& gk, ObjectID id);
  /// The row with this id, not_found when missing, wrong_kind for another kind's.
  ObjectRow require_own(const GroupKind& gk, ObjectID id);
  /// Re-reads a row the transaction changed and records the change.
  ObjectRow changed(ObjectID id, unsigned parts);
  /// Records a change, with the row's owner (controllers that own its kind wake on it),
  /// and logs it in the change log, in the same transaction.
  void record(object_change c, std::optional<Ref> owner);
  /// The owner of `id`, if it has one.
  std::optional<Ref> owner_of(ObjectID id);
  /// Edges to `targets` are gone: wakes those being deleted, and tells GC.
  /// `all_deleting`: every target is known to be deletion-pending (the dependents of an
  /// object being collected), so none is read: a target with a million such dependents
  /// costs no million reads (round trips, on PostgreSQL) in one pass.
  void released(const std::vector<Ref>& targets, bool all_deleting = false);
  /// Queues the dependents of `id` for a wake (its conditions changed), or with `lift`
  /// as requeues, which lift a terminal mark (its deletion was requested).
  void wake_dependents(ObjectID id, bool lift = false);
  ObjectRow update_row(const ObjectRow& row, const std::string& spec, int spec_version);
  ObjectRow mark_deleted(const ObjectRow& row);
  ObjectRow reread(ObjectID id);

  Writer& w_;
  Time now_;
  commit_record& rec_;
  const RowCheck* check_;
  bool checked_ = false;
  bool slugs_by_constraint_ = false;
  std::int64_t trim_at_most_ = std::numeric_limits<std::int64_t>::max();
  const std::vector<ClockStep>* clock_steps_ = nullptr;
  EventSweep* sweep_ = nullptr;
  int page_ = 0;
  std::unordered_set<ObjectID> woken_;  // released targets already woken by this write
};

}  // namespace beehive::store
