// The SQLite writer's transactions: BEGIN IMMEDIATE ... COMMIT with nested savepoints,
// waiting for the file's write lock (the busy handler), and the resource versions and
// object ids a transaction allocates, counted in memory and stored once per commit.
//
// Runs on the thread running the writer (owned by the store_writer actor), one call at
// a time; not thread-safe.

#include "store/sqlite/sqlite_writer.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "store/sqlite/sqlite_schema.hpp"

namespace beehive::store {

SqliteWriter::SqliteWriter(const std::filesystem::path& file, const sqlite::Options& opts,
                           std::int64_t session)
    : ConnectionReader(file, false, opts, session), busy_timeout_(opts.busy_timeout) {
  // Replaces SQLite's own busy timeout: the same bound, but it also stops waiting for
  // callers that have gone (set_lock_wait).
  sqlite3_busy_handler(conn_.db().getHandle(), &SqliteWriter::on_busy, this);
}

void SqliteWriter::begin() {
  rv_.reset();  // another process may have written since
  rv_taken_ = false;
  last_logged_rv_ = 0;
  ids_checked_ = false;
  ids_taken_ = false;
  keep_ids_ = false;
  handed_out_ = false;
  guarded([&] { conn_.exec("BEGIN IMMEDIATE"); });
  // Only when another connection committed since: a process alone on its file pays
  // nothing for it. A failed check leaves no transaction open (it would hold the file's
  // write lock, and every later begin would fail).
  try {
    if (auto v = file_version(); !v || v != checked_version_) require_this_schema();
  } catch (...) {
    rollback();
    throw;
  }
}

std::optional<std::uint32_t> SqliteWriter::file_version() {
  unsigned int v = 0;
  if (sqlite3_file_control(conn_.db().getHandle(), "main", SQLITE_FCNTL_DATA_VERSION, &v) !=
      SQLITE_OK)
    return std::nullopt;  // an SQLite before 3.26: every transaction checks
  return v;
}

void SqliteWriter::require_this_schema() {
  int version = guarded([&] {
    auto s = conn_.use(Query::schema_version);
    return s->executeStep() ? s->getColumn(0).getInt() : 0;
  });
  if (version > sqlite_schema::latest_version()) {
    // What this build would write may no longer be what the schema means.
    rollback();
    throw Error(errc::store, "sqlite: the database schema was migrated to version " +
                                 std::to_string(version) + " by a newer build (this build's is " +
                                 std::to_string(sqlite_schema::latest_version()) +
                                 "): this process can no longer write; upgrade it");
  }
  checked_version_ = file_version();
}

void SqliteWriter::commit() {
  guarded([&] {
    // The store's version is also the log's newest entry: when the transaction's last
    // version is one, the counter needs no write (nor its page a WAL frame). A version
    // logged by a write rolled back to its savepoint was never seen by anyone, so the
    // store's version may stay below it.
    if (rv_taken_ && *rv_ != last_logged_rv_) {
      auto s = conn_.use(Query::set_resource_version);
      s->bind(1, *rv_);
      s->exec();
      rv_taken_ = false;
    }
    if (keep_ids_) keep_id_counter();
  });
  try {
    guarded([&] { conn_.exec("COMMIT"); });
  } catch (const Error& e) {
    rollback();
    drop_failed_commit(e);
  }
  if (checked_version_) checked_version_ = file_version();  // this commit's own change
}

void SqliteWriter::drop_failed_commit(const Error& why) {
  // A COMMIT that failed writing or syncing the WAL may have left the transaction's
  // frames in the file, its commit frame included. This process reads without them,
  // but opening the file after a crash rebuilds the WAL's index from the file, and
  // would find the write committed. A checkpoint that truncates the WAL drops them
  // (it copies only the frames of committed transactions); until one has, whether the
  // write lands is unknown.
  int rc = sqlite3_wal_checkpoint_v2(conn_.db().getHandle(), nullptr, SQLITE_CHECKPOINT_TRUNCATE,
                                     nullptr, nullptr);
  if (rc != SQLITE_OK)
    throw OutcomeUnknown(errc::store,
                         why.message() + "; and its remains could not be cleared from the WAL (" +
                             sqlite3_errstr(rc) +
                             "): should the process crash before its next commit, the write may be "
                             "found committed when the file is opened again");
  throw NotCommitted(errc::store, why.message());
}

void SqliteWriter::rollback() {
  // A failed statement may already have rolled the transaction back.
  if (in_transaction()) conn_.db().tryExec("ROLLBACK");
}

void SqliteWriter::rollback_keeping_counters() {
  rollback();
  if (!handed_out_) return;
  // A transaction of its own, right after. Best effort against other processes on the
  // file: one waiting for its lock could take it in between and count from the stored
  // counters (this writer itself counts from rv_floor_ and last_id_ whatever happens).
  // A savepoint kept over the whole block instead would cost every write of a large
  // block a growing statement journal. A lock another process holds is not waited for
  // long: a stop, or the writes queued behind, would wait with it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  auto keep = std::exchange(keep_waiting_,
                            [deadline] { return std::chrono::steady_clock::now() < deadline; });
  try {
    guarded([&] {
      conn_.exec("BEGIN IMMEDIATE");
      auto s = conn_.use(Query::raise_resource_version);
      s->bind(1, rv_floor_);
      s->exec();
    });
    guarded([&] { keep_id_counter(); });
    guarded([&] { conn_.exec("COMMIT"); });
    if (checked_version_) checked_version_ = file_version();  // as commit(): its own change
  } catch (const Error&) {
    rollback();  // its next commit stores them (rv_floor_, last_id_)
  }
  keep_waiting_ = std::move(keep);
  handed_out_ = false;
}

bool SqliteWriter::in_transaction() { return !sqlite3_get_autocommit(conn_.db().getHandle()); }

std::int64_t SqliteWriter::data_version() { return conn_.data_version(); }

void SqliteWriter::set_lock_wait(std::function<bool()> keep_waiting) {
  keep_waiting_ = std::move(keep_waiting);
}

// Counted here within a transaction and stored once, at its commit: a group commit's
// rows then cost no statements each. Versions taken by a write that rolled back to its
// savepoint are skipped, which leaves a gap and keeps the order.
std::int64_t SqliteWriter::next_resource_version() {
  if (!rv_) {
    rv_ = guarded([&] {
      auto s = conn_.use(Query::resource_version);
      s->executeStep();
      // Versions handed out by a transaction that then rolled back may be held by
      // their callers (a block's writes): never handed out again.
      return std::max(s->getColumn(0).getInt64(), rv_floor_);
    });
  }
  rv_taken_ = true;
  handed_out_ = true;
  rv_floor_ = ++*rv_;
  return *rv_;
}

// Counted here like resource versions; an id allocated by a write that failed is
// skipped.
//
// AUTOINCREMENT stores its counter (a page of its own) whenever a row's id exceeds it,
// which would be every transaction that creates: the counter is raised a block of ids
// ahead instead, so that most commits leave its page alone. It stays at or above every
// id ever committed, so ids are never reused. Within the block the count goes on from
// memory, checked once per transaction against the file: when the counter is not the
// one this writer left (another process, or a rolled-back reservation), counting
// resumes after it, as it does after a restart (skipping what was reserved, unused),
// but never below the last id this writer handed out (a rolled-back block's caller may
// hold it; commit raises the counter again when a savepoint's rollback undid it).
ObjectID SqliteWriter::next_object_id() {
  if (!ids_checked_) {
    guarded([&] {
      auto s = conn_.use(Query::last_object_id);
      s->executeStep();
      auto counter = s->getColumn(0).getInt64(), max_id = s->getColumn(1).getInt64();
      if (counter != id_ceiling_ || max_id > last_id_) {
        id_ceiling_ = counter;
        last_id_ = std::max({last_id_, counter, max_id});
      }
    });
    ids_checked_ = true;
  }
  ids_taken_ = true;
  handed_out_ = true;
  ++last_id_;
  // No counter row until the first object is inserted: AUTOINCREMENT writes that one.
  if (last_id_ > id_ceiling_ && id_ceiling_ > 0) {
    id_ceiling_ = last_id_ + kReservedIds - 1;
    guarded([&] {
      auto s = conn_.use(Query::reserve_object_ids);
      s->bind(1, id_ceiling_);
      s->exec();
    });
  }
  return last_id_;
}

void SqliteWriter::savepoint(int depth) {
  guarded([&] { conn_.exec("SAVEPOINT s" + std::to_string(depth)); });
}

void SqliteWriter::release(int depth) {
  guarded([&] { conn_.exec("RELEASE s" + std::to_string(depth)); });
}

void SqliteWriter::rollback_to(int depth) {
  guarded([&] {
    conn_.exec("ROLLBACK TO s" + std::to_string(depth));
    conn_.exec("RELEASE s" + std::to_string(depth));
  });
  // The log entry last written may be gone with the savepoint, while a version taken
  // before it (an event's) stays: commit stores the counter. So may the id counter's
  // raise, while the ids stay handed out: commit raises it again.
  last_logged_rv_ = 0;
  if (ids_taken_) keep_ids_ = true;
}

void SqliteWriter::keep_id_counter() {
  {
    auto s = conn_.use(Query::last_object_id);
    s->executeStep();
    if (s->getColumn(0).getInt64() >= last_id_) return;
  }
  // No counter row when the first object ever was rolled back: one is added, which
  // AUTOINCREMENT then reads.
  for (auto q : {Query::reserve_object_ids, Query::raise_object_id_counter}) {
    auto s = conn_.use(q);
    s->bind(1, last_id_);
    s->exec();
  }
  id_ceiling_ = last_id_;
}

int SqliteWriter::on_busy(void* self, int attempt) {
  auto& w = *static_cast<SqliteWriter*>(self);
  auto now = std::chrono::steady_clock::now();
  if (attempt == 0) w.busy_since_ = now;
  if (now - w.busy_since_ >= w.busy_timeout_) return 0;
  if (w.keep_waiting_ && !w.keep_waiting_()) return 0;
  static constexpr int steps_ms[] = {1, 2, 5, 10};
  auto step = std::chrono::milliseconds(steps_ms[std::min(attempt, 3)]);
  auto left = w.busy_timeout_ - (now - w.busy_since_);
  std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(step, left));
  return 1;
}

std::vector<ObjectID> SqliteWriter::ids(Query q, std::int64_t limit) {
  return guarded([&] {
    auto s = conn_.use(q);
    s->bind(1, limit);
    std::vector<ObjectID> out;
    while (s->executeStep()) out.push_back(s->getColumn(0).getInt64());
    return out;
  });
}

}  // namespace beehive::store
