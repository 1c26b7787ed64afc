#pragma once

// The Writer interface on PostgreSQL: one process's write connection. Its definitions
// are split by concept: pg_writer.cpp (transactions, the counters every write
// transaction locks, commit resolution after a lost connection, fencing) and
// pg_writes.cpp (objects, edges, conditions, labels, the change log and events).
//
// Not thread-safe: owned by the store_writer actor, used by the thread running it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/commit_note.hpp"
#include "store/postgres/pg_note_queue.hpp"
#include "store/postgres/pg_queries.hpp"
#include "store/postgres/pg_reads.hpp"

namespace beehive::store::pg {

/// What the store shares with its writer: other processes' commits as the listener
/// heard of them, and this process's leadership, which write transactions check.
struct SharedState {
  /// Bumped by the listener for every other process's commit (and after it reconnects,
  /// when it may have missed some).
  std::atomic<std::int64_t> foreign_commits{0};
  /// Their notes, from the listener to the writer.
  NoteQueue notes;
  /// The term this process leads in; 0 while it does not lead.
  std::atomic<std::int64_t> term{0};
  /// Set by a transaction that found the lease taken by another term (fenced off).
  std::atomic<bool> deposed{false};
  /// Set while the beehive stops (Backend::stand_down): the campaign takes no lease.
  std::atomic<bool> standing_down{false};
  /// Marks this process deposed and wakes the campaign, which steps down at once.
  void depose() {
    deposed.store(true, std::memory_order_release);
    std::lock_guard g(wake_mu);
    if (wake_campaign) wake_campaign();
  }
  /// Set by the campaign while it runs (empty: none). Once this returns, no earlier
  /// wake_campaign runs any more.
  void on_depose(std::function<void()> wake) {
    std::lock_guard g(wake_mu);
    wake_campaign = std::move(wake);
  }
  /// Signs this process's commit notes and checks the others' (pg_schema::Opened); set
  /// before any writer or listener is made, never changed.
  std::string note_key;

 private:
  std::mutex wake_mu;
  std::function<void()> wake_campaign;
};

class PgWriter : public Reading<Writer> {
 public:
  /// `stall_limit`: see Connection (the store passes its lease).
  PgWriter(std::string conninfo, std::string schema, std::chrono::milliseconds timeout,
           std::int64_t session, std::shared_ptr<SharedState> shared,
           std::chrono::milliseconds stall_limit);

  void begin() override;
  void describe_commit(const commit_record& rec) override;
  void commit() override;
  void rollback() override;
  void session_begun() override;
  void rollback_keeping_counters() override;
  bool in_transaction() override;
  std::int64_t data_version() override;
  std::vector<std::string> commit_notes(bool all_sent) override;
  void set_lock_wait(std::function<bool()> keep_waiting) override;
  std::int64_t next_resource_version() override;
  ObjectID next_object_id() override;
  void fence(std::int64_t term) override;
  /// With no loads, the object's owner comes along in the same round trip and is kept
  /// for this transaction: every write looks it up right after reading the row.
  std::optional<ObjectRow> get(ObjectID id, unsigned loads) override;
  std::vector<Ref> related(ObjectID id, unsigned relation) override;
  bool failed_statements_abort() const override { return true; }
  bool transaction_failed() override { return conn_.transaction_failed(); }
  bool defers_statements() const override { return true; }
  void prefetch(ObjectID id) override { prefetch_ = id; }
  void begin_ahead() override { begin_ahead_ = true; }
  void idle() override;

  void insert_object(const ObjectRow& row, std::optional<ObjectID> owner) override;
  bool add_ref(ObjectID from, const char* relation, ObjectID to) override;
  bool remove_ref(ObjectID from, const char* relation, ObjectID to) override;
  std::optional<bool> being_deleted(ObjectID id) override;
  std::vector<ObjectID> cascade_candidates(std::int64_t limit) override;
  std::vector<ObjectID> collectible(std::int64_t limit) override;
  void drop_pending_dependencies(ObjectID target) override;
  void delete_object(ObjectID id) override;
  void update_spec(ObjectID id, const std::string& spec, int spec_version, std::int64_t generation,
                   std::int64_t rv, Time now) override;
  void request_deletion(ObjectID id, Time at, std::int64_t rv) override;
  void update_status(ObjectID id, const std::optional<std::string>& status, int status_version,
                     std::optional<std::int64_t> observed_generation,
                     std::optional<Time> observed_at, std::int64_t rv, Time now) override;
  void upsert_condition(ObjectID id, const Condition& c, Time now) override;
  bool delete_condition(ObjectID id, const std::string& type) override;
  void set_finalizers(ObjectID id, const std::vector<std::string>& finalizers, std::int64_t rv,
                      Time now) override;
  void conditions_changed(ObjectID id, std::int64_t rv, Time now) override;
  void set_labels(ObjectID id, const Labels& labels, std::int64_t rv, Time now) override;
  void log_change(std::int64_t rv, const ObjectMeta& meta, unsigned parts, Time at,
                  const ObjectRow* final_body) override;
  std::optional<std::int64_t> change_log_cut(std::int64_t keep_entries, Time older_than,
                                             std::int64_t at_most,
                                             std::optional<Time>* first_young_at) override;
  int trim_change_log(std::int64_t cut) override;
  std::optional<std::int64_t> change_log_nth_oldest(std::int64_t n) override;
  std::optional<std::pair<std::int64_t, Time>> newest_change_log_entry() override;
  void lower_change_log_times(std::int64_t up_to, Time at) override;

  EventID insert_event(ObjectID id, const EventSpec& e, const std::optional<std::string>& detail,
                       Time now, std::int64_t rv) override;
  void extend_event(EventID id, const std::string& message,
                    const std::optional<std::string>& detail, Time now, std::int64_t rv) override;
  std::int64_t events_high_water() override;
  std::optional<std::int64_t> event_page_end(EventPaging by, std::int64_t after, int runs) override;
  std::vector<GroupKind> kinds_with_runs_in(EventPaging by, std::int64_t after,
                                            std::int64_t upto) override;
  std::vector<GroupKind> kinds_with_runs_before(Time before) override;
  int trim_event_runs(const GroupKind& gk, int per_object, EventPaging by, std::int64_t after,
                      std::int64_t upto) override;
  std::optional<Time> old_events_page_end(const GroupKind& gk, Time after, Time before,
                                          int runs) override;
  int trim_old_events(const GroupKind& gk, Time after, std::optional<Time> through,
                      Time before) override;

  void savepoint(int depth) override;
  void release(int depth) override;
  void release_later(int depth) override;
  void rollback_to(int depth) override;

 private:
  /// After a COMMIT lost with its connection: reconnects and reads this session's write
  /// token back. Returns normally when the transaction committed; throws when it did
  /// not, or when that cannot be learnt.
  void resolve_lost_commit(const Error& why);
  /// A row as Q::get_with_owner reads it; keeps its owner for this transaction.
  std::optional<ObjectRow> row_with_owner(ObjectID id, const Result& r);
  std::vector<ObjectID> ids(Q q, std::int64_t limit);
  /// Runs `q` with the next statement that needs a result (see savepoint()).
  void later(Q q, Params p);
  /// Runs a write statement now (its result is wanted).
  Result write_now(Q q, const Params& p);
  /// Queues `q` as part of the statement `later` queued last, when that is still the
  /// last one queued (one statement to run instead of two); false when it is not.
  bool join_last(Q q, const Params& p);
  void insert_labels(ObjectID id, const Labels& labels);
  /// BEGIN and what every transaction reads first: the counters, locked, and the
  /// schema's version.
  std::vector<Statement> begin_statements();
  /// Commits the open transaction (rolled back to savepoint 0) with the counters alone.
  void commit_counters();

  std::int64_t session_;
  std::shared_ptr<SharedState> shared_;
  std::string channel_;
  std::chrono::milliseconds connect_timeout_;
  std::unordered_map<ObjectID, std::optional<Ref>> owners_;  // read in this transaction
  std::optional<ObjectID> prefetch_;  // to read with the next BEGIN (see prefetch)
  bool begin_ahead_ = false;          // begin the next transaction with this commit
  bool begun_ahead_ = false;          // it was: the next begin takes it up
  std::uint64_t later_at_ = 0;        // Connection::deferred_total as `later` left it
  /// The row read with BEGIN, until the first statement that may change it.
  struct Prefetched {
    ObjectID id;
    std::optional<ObjectRow> row;
  };
  std::optional<Prefetched> prefetched_;
  std::int64_t token_ = 0;            // of the last transaction begun
  std::int64_t rv_ = 0;               // the counters as locked at begin, then as allocated
  std::int64_t known_rv_ = -1;        // the version the counters hold as far as this writer knows
  std::int64_t counted_commits_ = 0;  // other processes' commits begin() noticed
  std::string note_;                  // the commit's note (describe_commit), sent by commit
  NoteKey note_key_;                  // signs it
  std::int64_t last_id_ = 0;
  std::int64_t locked_id_ = 0;  // the id counter as begin() locked it
  // The last version and id this writer handed out, ever: a transaction that handed
  // them out and then rolled back may have a caller holding them (a block's writes).
  std::int64_t rv_floor_ = 0, id_floor_ = 0;
  bool leader_work_ = false;      // the open transaction must be fenced by the lease
  std::int64_t fenced_term_ = 0;  // the term it checked (0: not checked yet)
  std::function<bool()> keep_waiting_;
};

}  // namespace beehive::store::pg
