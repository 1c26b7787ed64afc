#pragma once

// One SQLite connection with its prepared statements, and the reads shared by the
// read-only connections and the write connection. The definitions are split by concept:
// sqlite_connection.cpp (opening, the statement cache, errors), sqlite_object_reads.cpp
// (objects and their relations), sqlite_event_reads.cpp (the event log) and
// sqlite_change_log.cpp (the change log and selections).
//
// Not thread-safe: a Connection is used by one thread at a time (it is opened NOMUTEX),
// either a caller's thread holding it leased from the read pool or the thread running
// the store's writer. guarded() and rethrow_sqlite() are safe on any thread.

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/sqlite.hpp>

#include "store/backend.hpp"
#include "store/sqlite/row_statement.hpp"
#include "store/sqlite/sqlite_queries.hpp"
#include "store/statement_count.hpp"

namespace beehive::store {

/// The size the writer cuts its WAL file back to when it starts the log over
/// (`PRAGMA journal_size_limit`), in bytes.
inline constexpr std::int64_t wal_size_limit = 16 * 1024 * 1024;

/// `file` as a URI opening it read-only and immutable (file:///...?mode=ro&immutable=1).
std::string immutable_uri(const std::filesystem::path& file);

class Connection {
 public:
  /// `immutable` (read-only only): the file is opened as SQLite's immutable=1 URI, with
  /// no -shm file and no locks, for a reader that may not create them and knows that
  /// nothing writes the file meanwhile (beehive-ctl on a stopped application's file).
  Connection(const std::filesystem::path& file, bool read_only, const sqlite::Options& opts,
             std::int64_t session, bool immutable = false);

  /// The prepared statement for `q`, reset and unbound when the returned guard dies so
  /// that no read snapshot outlives its use.
  class Use {
   public:
    explicit Use(SQLite::Statement& s) : s_(s) {}
    ~Use() {
      s_.tryReset();
      s_.clearBindings();
    }
    SQLite::Statement* operator->() { return &s_; }
    SQLite::Statement& operator*() { return s_; }

   private:
    SQLite::Statement& s_;
  };
  Use use(Query q);
  /// The same for the object reads (get, get_by_slug, list, list_owned_objects).
  class RowUse {
   public:
    explicit RowUse(RowStatement& s) : s_(s) {}
    ~RowUse() { s_.reset(); }
    RowStatement* operator->() { return &s_; }

   private:
    RowStatement& s_;
  };
  RowUse use_rows(Query q);
  /// An object read built at run time (a selection), prepared once per SQL text.
  RowUse use_rows(const std::string& sql);
  /// Runs a statement without parameters (BEGIN, COMMIT, SAVEPOINT ...), prepared once.
  void exec(const std::string& sql);

  /// `loads` is a set of LoadOption bits: the relations to attach, read in the same
  /// snapshot as the rows.
  std::optional<ObjectRow> get(ObjectID id, unsigned loads = 0);
  /// SQLite's data_version: it changes when another connection commits.
  std::int64_t data_version();
  std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug,
                                       unsigned loads = 0);
  std::vector<ObjectRow> list(const GroupKind& gk, unsigned loads = 0);
  void list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each);
  std::vector<std::pair<ObjectID, std::int64_t>> list_ids(const GroupKind& gk, bool unsettled_only);
  std::vector<ObjectRow> snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                  const std::shared_ptr<const LabelSelector>& selector,
                                  std::int64_t& resource_version);
  /// One relation (a LoadOption bit) of one object; empty for a missing id.
  std::vector<Ref> related(ObjectID id, unsigned relation);
  bool has_incoming_refs(ObjectID id);
  std::vector<ObjectRow> list_owned_objects(const GroupKind& gk, ObjectID owner, unsigned loads);
  std::vector<ObjectRow> list_where(const GroupKind& gk, const ListQuery& q, unsigned loads);
  ChangeLogRead changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                              std::optional<ObjectID> id, const std::vector<std::int64_t>& skip);
  std::vector<Event> list_events(ObjectID id, const detail::EventQuery& q);
  std::vector<event_run> event_snapshot(ObjectID id, const detail::EventQuery& q,
                                        std::int64_t& resource_version);
  std::optional<Event> current_run(ObjectID id, const std::string& category);
  std::vector<event_run> event_runs_between(std::int64_t after, std::int64_t through);
  std::int64_t session() const { return session_; }
  /// Whose liveness conditions the reads trust from now on (beehive-ctl's watch, which
  /// outlives the application's runs).
  void set_session(std::int64_t session) { session_ = session; }

  SQLite::Database& db() { return db_; }

 private:
  /// Runs `fn` in one read snapshot when relations are loaded too.
  template <class Fn>
  auto snapshot(unsigned loads, Fn&& fn) -> decltype(fn());
  /// Attaches the relations `loads` names to the rows.
  void load(std::vector<ObjectRow*> rows, unsigned loads);
  void load_all(std::vector<ObjectRow>& rows, unsigned loads);
  std::vector<std::pair<ObjectID, Ref>> edges(Query q, const std::string& ids);
  std::vector<Event> recent_events(const std::string& ids);
  std::vector<event_run> query_events(ObjectID id, const detail::EventQuery& q);
  /// True when this connection is inside a transaction already (the writer's).
  bool in_transaction() const;

  SQLite::Database db_;
  std::int64_t session_;
  std::array<std::unique_ptr<SQLite::Statement>, static_cast<int>(Query::count_)> stmts_;
  std::array<std::unique_ptr<RowStatement>, 4> row_stmts_;  // get .. list, owned
  std::unordered_map<std::string, std::unique_ptr<RowStatement>> dynamic_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> plain_;
};

/// Runs `fn`, turning SQLite failures into Error(errc::store) with SQLite's message.
template <class Fn>
auto guarded(Fn&& fn) -> decltype(fn());

[[noreturn]] void rethrow_sqlite(const SQLite::Exception& e);

template <class Fn>
auto guarded(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const SQLite::Exception& e) {
    rethrow_sqlite(e);
  }
}

// Here rather than in a .cpp: both the object reads and the event reads run in it.
template <class Fn>
auto Connection::snapshot(unsigned loads, Fn&& fn) -> decltype(fn()) {
  return guarded([&] {
    if (loads == 0 || in_transaction()) return fn();
    use(Query::begin_read)->exec();
    try {
      auto result = fn();
      use(Query::end_read)->exec();
      return result;
    } catch (...) {
      db_.tryExec("ROLLBACK");
      throw;
    }
  });
}

}  // namespace beehive::store
