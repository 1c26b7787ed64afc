#pragma once

// The Writer interface on SQLite: the store's one write connection. Its definitions are
// split by concept: sqlite_writer.cpp (transactions, savepoints, waiting for the file's
// lock, resource versions and object ids), sqlite_object_writes.cpp (objects, edges,
// conditions and the collector's queries) and sqlite_event_writes.cpp (the event log).
//
// Not thread-safe: owned by the store_writer actor, and used by one thread at a time,
// the one running the writer.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/sqlite/sqlite_reader.hpp"

namespace beehive::store {

class SqliteWriter : public ConnectionReader<Writer> {
 public:
  SqliteWriter(const std::filesystem::path& file, const sqlite::Options& opts,
               std::int64_t session);

  void begin() override;
  void commit() override;
  void rollback() override;
  void rollback_keeping_counters() override;
  bool in_transaction() override;
  std::int64_t data_version() override;
  void set_lock_wait(std::function<bool()> keep_waiting) override;
  std::int64_t next_resource_version() override;
  ObjectID next_object_id() override;

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
  void rollback_to(int depth) override;

 private:
  /// After a failed COMMIT (rolled back): throws NotCommitted once nothing of it can
  /// come back after a crash, OutcomeUnknown when that could not be made sure of.
  [[noreturn]] void drop_failed_commit(const Error& why);
  /// SQLite's count of changes to the file, this connection's commits included: it
  /// moves past the one this writer's last commit left when another connection commits.
  std::optional<std::uint32_t> file_version();
  /// Throws, rolling back, when a newer build migrated the schema since it was read.
  void require_this_schema();
  /// SQLite's busy handler: true retries. Sleeps like SQLite's own busy timeout (short
  /// steps first), but never longer than 10 ms at a time, so that a caller giving up
  /// frees the writer promptly.
  static int on_busy(void* self, int attempt);
  /// One `labels` row per label (the object's old ones already deleted).
  void insert_labels(ObjectID id, const Labels& labels);
  /// The first column of the rows of `q` (bound to `limit` as ?1), as ids.
  std::vector<ObjectID> ids(Query q, std::int64_t limit);

  std::chrono::milliseconds busy_timeout_;
  std::chrono::steady_clock::time_point busy_since_{};
  std::function<bool()> keep_waiting_;
  /// Raises the file's id counter to the last id handed out, where a rollback to a
  /// savepoint may have undone its raise.
  void keep_id_counter();

  std::optional<std::int64_t> rv_;  // the transaction's last resource version, once read
  std::int64_t rv_floor_ = 0;       // the last version this writer handed out, ever
  bool ids_checked_ = false;        // this transaction has compared the id counter with the file
  bool ids_taken_ = false;          // this transaction allocated an id
  bool keep_ids_ = false;           // ... and rolled back to a savepoint since: see commit
  bool handed_out_ = false;         // this transaction took a version or an id
  ObjectID last_id_ = 0;            // the last object id this writer allocated
  ObjectID id_ceiling_ = -1;        // the id counter as this writer left it (-1: not read yet)
  static constexpr ObjectID kReservedIds = 1024;
  bool rv_taken_ = false;                         // a version was taken: store it at commit
  std::int64_t last_logged_rv_ = 0;               // the version this transaction last logged
  std::optional<std::uint32_t> checked_version_;  // file_version() when the schema was checked
};

}  // namespace beehive::store
