#pragma once

// The interface beehive's actors and facade use to reach a store. Backends implement
// it; `beehive::Store` is its opaque public face.
//
// Readers run on callers' threads, each on its own connection leased from a pool, and
// see the last committed state. The writer is owned by the store_writer actor and runs
// one transaction at a time. Errors are thrown as beehive::Error: errc::store for a
// failing database, errc::already_exists for a taken slug.

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/commit_record.hpp>
#include <beehive/errors.hpp>
#include <beehive/object_row.hpp>
#include <beehive/options.hpp>
#include <beehive/store.hpp>

namespace beehive::store {

class LabelSelector;

/// What `Reader::list_where` selects beyond the kind: ids above `after` (paging), at
/// most `limit` rows (0: no limit), those `owner` owns, those `selector` matches.
struct ListQuery {
  ObjectID after = 0;
  std::size_t limit = 0;
  std::optional<ObjectID> owner;
  /// Null or empty: every object. Shared: a read in a transaction runs on the writer's
  /// thread, which may still be reading when a caller that gave up has returned.
  std::shared_ptr<const LabelSelector> selector;

  /// A page of `page` rows (0: all): one row more is read, which tells whether another
  /// page follows. A page larger than SQL's LIMIT can say is all rows.
  void set_page(std::size_t page) {
    limit = page == 0 || page >= static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
                ? 0
                : page + 1;
  }
};

/// The change-log bit of a requeue asked for through the store (beehive-ctl requeue): no
/// object changed, the kind's controller, in whichever process runs it, reconciles it.
constexpr unsigned kLoggedRequeue = 1u << 16;
/// With kLoggedRequeue: the requeue resets the object's retry backoff.
constexpr unsigned kLoggedBackoffReset = 1u << 17;
/// A dependency on the object was removed while its deletion was pending: its kind's
/// controller reconciles it (a finalizer may wait for its last dependent), and the
/// collector looks again.
constexpr unsigned kLoggedRelease = 1u << 18;
/// A depends_on edge from the object was added: its kind's controller, in whichever
/// process runs it, reconciles it once more (see WriteOps::add_dependency).
constexpr unsigned kLoggedWake = 1u << 19;
/// The bits of a logged entry that say what changed in the object itself.
constexpr unsigned kObjectParts = kLoggedRequeue - 1;

/// One object's logged changes above a version, folded: `parts` is every part that
/// changed, `row` the object as it stands (for a removal, its final body as logged).
struct LoggedChange {
  std::int64_t resource_version = 0;  ///< of its latest change
  std::int64_t first_version = 0;     ///< of its earliest change above the version read from
  ChangeType type = ChangeType::Modified;
  unsigned parts = 0;  ///< object_change::Part bits, and the kLogged* bits
  Ref ref;
  std::optional<ObjectRow> row;  ///< absent when only a requeue was logged
  /// The object's owner, when the backend read it with the change (owner_read);
  /// otherwise the reader looks it up.
  bool owner_read = false;
  std::optional<Ref> owner;
};

/// The change log above a version: each object once, in the order of its latest change.
struct ChangeLogRead {
  std::vector<LoggedChange> changes;
  std::int64_t head = 0;     ///< the store's resource version, read in the same snapshot
  std::int64_t horizon = 0;  ///< nothing at or below it is in the log any more
};

class Reader {
 public:
  virtual ~Reader() = default;
  // `loads` is a set of LoadOption bits: relations attached from the same snapshot.

  /// Any kind; the caller checks the kind.
  virtual std::optional<ObjectRow> get(ObjectID id, unsigned loads = 0) = 0;
  virtual std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug,
                                               unsigned loads = 0) = 0;
  /// Every object of the kind, by id.
  virtual std::vector<ObjectRow> list(const GroupKind& gk, unsigned loads = 0) = 0;
  /// The same without relations, each row handed to `each` as it is read (in one read
  /// transaction), so that a large kind is never held as rows and decoded objects at once.
  virtual void list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) = 0;
  /// Ids of the kind; with `unsettled_only`, those whose observed generation lags the
  /// generation or whose deletion was requested.
  /// One object (`id`) or the whole kind (with a non-empty `selector`, only the objects
  /// it matches, selected by the database), read with the store's resource version in
  /// the same snapshot: every commit after the snapshot has greater versions.
  virtual std::vector<ObjectRow> snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                          const std::shared_ptr<const LabelSelector>& selector,
                                          std::int64_t& resource_version) = 0;
  /// One relation (a LoadOption bit: owner, dependencies, dependents, owned) of any
  /// object, by id; empty for a missing id.
  virtual std::vector<Ref> related(ObjectID id, unsigned relation) = 0;
  /// An owned child, or a dependent not itself being deleted, points at `id`.
  virtual bool has_incoming_refs(ObjectID id) = 0;
  /// The kind's objects owned by `owner`, by id.
  virtual std::vector<ObjectRow> list_owned_objects(const GroupKind& gk, ObjectID owner,
                                                    unsigned loads) = 0;
  /// An object's event runs matching `q`, newest first (by resource version).
  virtual std::vector<Event> list_events(ObjectID id, const detail::EventQuery& q) = 0;
  /// The current run of an object's category (the one started last, whatever the
  /// clock did to the runs' times), if any.
  virtual std::optional<Event> current_run(ObjectID id, const std::string& category) = 0;
  /// The runs list_events returns, oldest first (a watch's snapshot), with the store's
  /// resource version read in the same snapshot.
  virtual std::vector<event_run> event_snapshot(ObjectID id, const detail::EventQuery& q,
                                                std::int64_t& resource_version) = 0;
  /// Each with its resource version.
  virtual std::vector<std::pair<ObjectID, std::int64_t>> list_ids(const GroupKind& gk,
                                                                  bool unsettled_only) = 0;
  /// The kind's objects `q` selects, by id (selection and paging done by the database).
  virtual std::vector<ObjectRow> list_where(const GroupKind& gk, const ListQuery& q,
                                            unsigned loads) = 0;
  /// The logged changes above `rv` (of the kind, of one object when `id` is given), in
  /// one read snapshot; entries whose version is in `skip` (sorted) are left out.
  virtual ChangeLogRead changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                                      std::optional<ObjectID> id,
                                      const std::vector<std::int64_t>& skip = {}) = 0;
  /// The event runs whose last write has a version in (`after`, `through`], oldest
  /// first: how a process learns of the runs other processes recorded or extended.
  virtual std::vector<event_run> event_runs_between(std::int64_t after, std::int64_t through) = 0;
};

/// Thrown by Writer::commit when the transaction certainly did not commit: the database
/// refused a statement of it, or the connection was lost before the COMMIT took effect.
/// Only then may its writes be run again (WriteEngine::commit_group does, after batching).
class NotCommitted : public Error {
 public:
  using Error::Error;
};

/// Thrown by Writer::commit when whether the transaction committed could not be learnt
/// (its connection was lost after the COMMIT was sent, and the database stayed out of
/// reach). Its callers are told so; should it have committed, the change log brings its
/// changes to this process's watches once the database answers again.
class OutcomeUnknown : public Error {
 public:
  using Error::Error;
};

class Writer : public Reader {
 public:
  virtual void begin() = 0;
  /// What the transaction about to commit changed, told just before commit(): a store
  /// shared by several processes sends it to the others with the commit (commit_note).
  virtual void describe_commit(const commit_record& rec) { (void)rec; }
  virtual void commit() = 0;
  virtual void rollback() = 0;
  /// A `within` block's transaction has begun (after begin()): its writes hand their
  /// resource versions and object ids to the caller as they go (see
  /// rollback_keeping_counters).
  virtual void session_begun() {}
  /// Ends such a transaction without its writes, and keeps the store's counters above
  /// what it handed out, so that no later transaction, of this process or another, hands
  /// the same values out again (a caller may hold them: an id named outside, a version
  /// kept as a precondition). Each writer also never hands a value out twice itself;
  /// when storing the counters fails, its next commit stores them.
  virtual void rollback_keeping_counters() { rollback(); }
  /// False once the transaction has ended: besides commit and rollback, the database
  /// rolls a transaction back by itself on some failures (an I/O error, a full disk),
  /// and whatever ran after that would commit on its own.
  virtual bool in_transaction() = 0;
  /// While `begin` waits for a lock held by another process, it asks `keep_waiting`
  /// between retries and gives up (errc::store, busy) on false, so that nobody waits
  /// for callers that have gone; the store's busy timeout bounds the wait anyway.
  /// Empty: wait for the busy timeout.
  virtual void set_lock_wait(std::function<bool()> keep_waiting) = 0;
  /// The write about to run is the leader's (a controller's, the collector's, a
  /// sweep's): throws errc::store unless this process still leads, checked in the open
  /// transaction so that a takeover cannot commit in between (fencing). A store with a
  /// single process (SQLite) always leads.
  /// `term`: the leadership term the work began in (a reconcile's); it fails too once
  /// that term has ended, even while this process leads again. 0: any term.
  virtual void fence(std::int64_t term) { (void)term; }
  /// A failed statement aborts the whole transaction (PostgreSQL), rather than only
  /// itself (SQLite): every write of a group then needs a savepoint of its own.
  virtual bool failed_statements_abort() const { return false; }
  /// A statement failed in the open transaction, which refuses everything else until it
  /// is rolled back (to a savepoint) (PostgreSQL).
  virtual bool transaction_failed() { return false; }
  /// Write statements are sent with the next round trip (PostgreSQL), so that a write's
  /// failure may surface in a later call or in `commit` (release_later: even when it
  /// ran in a savepoint).
  virtual bool defers_statements() const { return false; }
  /// The next transaction's first write reads object `id` first (get, without loads): a
  /// backend whose round trips cost reads it along with `begin`. Forgotten by `begin`.
  virtual void prefetch(ObjectID id) { (void)id; }
  /// Another transaction is likely to follow the next commit at once (writes keep
  /// coming): a backend whose round trips cost may begin it along with that commit,
  /// for the next `begin` to take up. Until then it holds what `begin` takes (the
  /// store's write lock), so whoever asks must say `idle` once no write is waiting.
  virtual void begin_ahead() {}
  /// No write is waiting: ends a transaction begun ahead (see begin_ahead).
  virtual void idle() {}

  /// Allocates the next resource version (global, strictly increasing, never reused).
  virtual std::int64_t next_resource_version() = 0;
  /// Changes when another connection (another process, another Store on the file)
  /// commits; this writer's own commits leave it alone.
  virtual std::int64_t data_version() = 0;
  /// Other processes' commit notes (commit_note) heard since the last call, in commit
  /// order; an empty one where some may be missing. With `all_sent`, first waits (a
  /// round trip at most, bounded) until every note the server sent so far is heard.
  /// None on a store that sends no notes.
  virtual std::vector<std::string> commit_notes(bool all_sent) {
    (void)all_sent;
    return {};
  }
  /// Allocates the id of the next object (strictly increasing, never one a removed
  /// object had). Allocated before the INSERT, so that the whole row can be checked
  /// before anything is written.
  virtual ObjectID next_object_id() = 0;
  /// One INSERT (and the owner edge, when there is an owner). Throws already_exists
  /// when the slug is taken in the kind.
  virtual void insert_object(const ObjectRow& row, std::optional<ObjectID> owner) = 0;
  virtual void update_spec(ObjectID id, const std::string& spec, int spec_version,
                           std::int64_t generation, std::int64_t resource_version, Time now) = 0;
  virtual void request_deletion(ObjectID id, Time at, std::int64_t resource_version) = 0;
  virtual void update_status(ObjectID id, const std::optional<std::string>& status,
                             int status_version, std::optional<std::int64_t> observed_generation,
                             std::optional<Time> observed_at, std::int64_t resource_version,
                             Time now) = 0;
  /// Inserts or replaces the condition of its type, stamped with this store session;
  /// the transition time moves only when the status changes.
  virtual void upsert_condition(ObjectID id, const Condition& c, Time now) = 0;
  /// True when a condition of that type existed.
  virtual bool delete_condition(ObjectID id, const std::string& type) = 0;
  virtual void set_finalizers(ObjectID id, const std::vector<std::string>& finalizers,
                              std::int64_t resource_version, Time now) = 0;
  /// Replaces the object's labels.
  virtual void set_labels(ObjectID id, const Labels& labels, std::int64_t resource_version,
                          Time now) = 0;
  /// Appends to the change log: `parts` of `meta`'s object changed at `resource_version`
  /// (`final_body`: the removed object's last row).
  virtual void log_change(std::int64_t resource_version, const ObjectMeta& meta, unsigned parts,
                          Time at, const ObjectRow* final_body) = 0;
  /// The newest change-log entry older than `older_than` beyond the newest
  /// `keep_entries` (no count bound when <= 0) and at most `at_most`: what a trim would
  /// remove up to. `first_young_at`, when given, receives the time of the oldest entry
  /// not older than `older_than` (nothing when there is none).
  virtual std::optional<std::int64_t> change_log_cut(
      std::int64_t keep_entries, Time older_than, std::int64_t at_most,
      std::optional<Time>* first_young_at = nullptr) = 0;
  /// The version of the `n`th oldest change-log entry (n >= 1); nothing when the log
  /// holds fewer.
  virtual std::optional<std::int64_t> change_log_nth_oldest(std::int64_t n) = 0;
  /// Removes the log entries up to `cut` and moves the horizon there; returns the
  /// entries removed.
  virtual int trim_change_log(std::int64_t cut) = 0;
  /// The newest change-log entry's version and time; nothing when the log is empty.
  virtual std::optional<std::pair<std::int64_t, Time>> newest_change_log_entry() = 0;
  /// Sets the time of the log entries up to `up_to` that are later than `at` to `at`.
  virtual void lower_change_log_times(std::int64_t up_to, Time at) = 0;
  /// After a condition write: moves the object's resource version and recounts its
  /// conditions (reads look them up only when there are some).
  virtual void conditions_changed(ObjectID id, std::int64_t resource_version, Time now) = 0;

  /// An edge; false when it existed (added) or did not (removed).
  virtual bool add_ref(ObjectID from, const char* relation, ObjectID to) = 0;
  virtual bool remove_ref(ObjectID from, const char* relation, ObjectID to) = 0;
  /// Whether the object's deletion was requested; nothing when there is no such object.
  virtual std::optional<bool> being_deleted(ObjectID id) = 0;
  /// Up to `limit` live children of owners whose deletion was requested.
  virtual std::vector<ObjectID> cascade_candidates(std::int64_t limit) = 0;
  /// Up to `limit` deletion-pending objects without finalizers that nothing with a live
  /// claim points at (an owned child, or a dependent not itself being deleted).
  virtual std::vector<ObjectID> collectible(std::int64_t limit) = 0;
  /// Removes the depends_on edges to `target` from deletion-pending dependents (a
  /// self-edge included), so that a collectible target can go.
  virtual void drop_pending_dependencies(ObjectID target) = 0;
  /// Physically removes a row (its conditions, events and outgoing edges go with it).
  virtual void delete_object(ObjectID id) = 0;

  /// A new run (count 1, first_at = last_at = now); returns its id.
  virtual EventID insert_event(ObjectID id, const EventSpec& e,
                               const std::optional<std::string>& detail, Time now,
                               std::int64_t resource_version) = 0;
  /// Extends a run: count + 1, last_at = now, message and detail from the latest.
  virtual void extend_event(EventID id, const std::string& message,
                            const std::optional<std::string>& detail, Time now,
                            std::int64_t resource_version) = 0;
  /// The highest resource version of any run (0 when there are none).
  virtual std::int64_t events_high_water() = 0;
  /// How a retention sweep's count-bound pages go through the runs: in object id order
  /// (every pair; all of an object's runs in one page), or in resource-version order
  /// (the pairs with a run in the page's versions: a sweep that looks only at the runs
  /// written since the last one). `after` and `upto` below are object ids or versions.
  enum class EventPaging { by_object, by_version };
  /// The object id, or version, of the `runs`-th run after `after` in that order: where
  /// a page of `runs` runs ends; nothing when fewer are left.
  virtual std::optional<std::int64_t> event_page_end(EventPaging by, std::int64_t after,
                                                     int runs) = 0;
  /// Kinds with a run in (after, upto].
  virtual std::vector<GroupKind> kinds_with_runs_in(EventPaging by, std::int64_t after,
                                                    std::int64_t upto) = 0;
  /// Kinds with a run last written before `before`.
  virtual std::vector<GroupKind> kinds_with_runs_before(Time before) = 0;
  /// Keeps the newest `per_object` (> 0) runs of each (object, category) of the kind
  /// with a run in (after, upto]; returns the number removed.
  virtual int trim_event_runs(const GroupKind& gk, int per_object, EventPaging by,
                              std::int64_t after, std::int64_t upto) = 0;
  /// Of the kind's runs last written after `after` and before `before`, oldest first:
  /// the last-written time of the `runs`-th; nothing when fewer are left.
  virtual std::optional<Time> old_events_page_end(const GroupKind& gk, Time after, Time before,
                                                  int runs) = 0;
  /// Removes the kind's runs last written after `after` and before `before`, up to
  /// `through` when given; returns the number removed.
  virtual int trim_old_events(const GroupKind& gk, Time after, std::optional<Time> through,
                              Time before) = 0;

  /// Nested transactions, named by depth.
  virtual void savepoint(int depth) = 0;
  virtual void release(int depth) = 0;
  /// Releases the savepoint without learning whether what ran in it succeeded (see
  /// defers_statements).
  virtual void release_later(int depth) { release(depth); }
  virtual void rollback_to(int depth) = 0;
};

using ReaderLease = std::unique_ptr<Reader, std::function<void(Reader*)>>;

class Backend : public Store {
 public:
  /// A reader for the calling thread; blocks while every pooled connection is leased.
  virtual ReaderLease reader() = 0;
  /// The same for a caller who gives up when `keep_waiting` (asked now and then while
  /// it waits) says so: for a pooled connection, or for the database's answer (another
  /// session's lock, a slow or unreachable server). The call waiting then fails with
  /// errc::store.
  virtual ReaderLease reader(std::function<bool()> keep_waiting) = 0;
  /// The single writer; throws if it is already open.
  virtual std::unique_ptr<Writer> open_writer() = 0;
  /// Distinguishes this open of the store from earlier ones (liveness conditions).
  virtual std::int64_t session() const = 0;
  /// Names the underlying database, the same for every store opened on it (running
  /// two beehives on one database in a process is refused).
  virtual std::string identity() const = 0;
  /// Claims the database for one running beehive, across processes; released when the
  /// handle goes (or the process dies). Throws Error(errc::store_in_use) while claimed.
  virtual std::shared_ptr<void> claim() = 0;
  /// A warning when others may read the database (logged at start); empty otherwise.
  virtual std::string exposure() const = 0;

  /// Whether a process's writes as leader fail once it no longer leads (checked by term
  /// in their transaction): a stop may then hand its claim (the leadership) over while
  /// a pass it gave up on still runs. Without fencing (SQLite) the claim is kept until
  /// the pass ends, else another beehive would reconcile what it holds.
  virtual bool fences_leaders() const { return false; }
  /// Whether the process holding claim() leads the processes running on this store
  /// (runs controllers, the collector and sweeps). A store only one process can run on
  /// (SQLite) always leads.
  virtual bool leads() const { return true; }
  /// The leadership term this process leads in; -1 when it does not lead (a reconcile
  /// pass that begins then has no term to write in); 0 when the store has no terms
  /// (SQLite, whose one process always leads).
  virtual std::int64_t term() const { return 0; }
  /// A stop began: from now on this process takes no leadership (a draining process
  /// runs no controllers, and would hold the others off until its stop ends); a lease
  /// it holds is still renewed until the claim goes. A later claim() campaigns again.
  virtual void stand_down() {}
  /// Called, on a thread of the store's, whenever leads() changes while claimed; an
  /// empty function unsubscribes. Returns once no earlier function runs any more.
  virtual void on_leadership(std::function<void(bool)> changed) { (void)changed; }
  /// Called, on a thread of the store's, soon after other processes commit: a cue to take
  /// their notes from the writer (Writer::commit_notes) and publish them, or to look at
  /// data_version() now rather than at the next poll. Not called again until the notes
  /// were taken. Notes heard while nobody is subscribed are dropped. Empty unsubscribes.
  virtual void on_foreign_commit(std::function<void()> committed) { (void)committed; }

  /// Held by the one Beehive this store serves, from its construction to its stop: the
  /// subscriptions above, the session and its write tokens are one Beehive's. Throws
  /// Error(errc::store_in_use) while another holds it; released when the handle goes.
  std::shared_ptr<void> serve();

 private:
  std::atomic<bool> served_{false};
};

/// The backend behind a public Store; throws invalid_argument for a foreign Store.
Backend& backend_of(Store& s);

}  // namespace beehive::store
