// A Database on a SQLite file: a read-only connection of the store layer's own.

#include <sqlite3.h>
#include <unistd.h>

#include <limits>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/errors.hpp>
#include <beehive/sqlite.hpp>

#include "database.hpp"
#include "failure.hpp"
#include "store/sqlite/private_files.hpp"
#include "store/sqlite/run_lock.hpp"
#include "store/sqlite/sqlite_connection.hpp"
#include "store/sqlite/sqlite_reader.hpp"
#include "store/sqlite/sqlite_schema.hpp"

namespace beehive::ctl {

namespace {

/// No store session: every liveness condition reads as Unknown.
constexpr std::int64_t kNoSession = std::numeric_limits<std::int64_t>::min();

/// The store session whose liveness conditions hold: the running application's (what it
/// sees too), none when no application runs on `file`. When the tool cannot tell (the
/// lock file is another user's), the latest session: the application's, unless a process
/// that did not start opened the file since.
std::int64_t liveness_session(const std::filesystem::path& file, SQLite::Database& db) {
  std::error_code ec;
  auto canonical = std::filesystem::canonical(file, ec);  // as sqlite::open names its lock
  if (auto running = store::RunLock::running_session(ec ? file : canonical))
    return *running ? *running : kNoSession;
  SQLite::Statement s(db, "SELECT value FROM beehive_meta WHERE key = 'session'");
  return s.executeStep() ? s.getColumn(0).getInt64() : 0;
}

/// Checks that `file` is a beehive database this build reads, and returns the store
/// session whose liveness conditions hold (liveness_session).
std::int64_t check_and_read_session(const std::filesystem::path& file,
                                    std::chrono::milliseconds busy_timeout, bool immutable) {
  SQLite::Database db(immutable ? store::immutable_uri(file) : file.string(),
                      SQLite::OPEN_READONLY | (immutable ? SQLITE_OPEN_URI : 0),
                      static_cast<int>(busy_timeout.count()));
  if (!db.tableExists("beehive_schema"))
    throw std::runtime_error(file.string() + " is not a beehive database");
  SQLite::Statement v(db, "SELECT version FROM beehive_schema");
  int version = v.executeStep() ? v.getColumn(0).getInt() : 0;
  require_schema_version(file.string(), version, store::sqlite_schema::latest_version());
  return liveness_session(file, db);
}

struct Opened {
  std::int64_t session = 0;
  bool immutable = false;  ///< read as SQLite's immutable=1 (see open_checked)
};

/// check_and_read_session, and how the file can be read. A read-only connection to a
/// WAL database creates the -shm file (and -wal) beside it, which it cannot in a
/// directory this user may not write: SQLite then says "attempt to write a readonly
/// database". Without a -wal file (the application stopped, and checkpointed) the file
/// alone holds every commit, and is read as immutable; with one, commits only the -wal
/// holds would be missed, and the read is refused.
Opened open_checked(const std::filesystem::path& file, std::chrono::milliseconds busy_timeout) {
  try {
    return {check_and_read_session(file, busy_timeout, false), false};
  } catch (const SQLite::Exception& e) {
    auto code = e.getErrorCode();
    auto dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
    if ((code != SQLITE_READONLY && code != SQLITE_CANTOPEN) || ::access(dir.c_str(), W_OK) == 0)
      throw;
  }
  auto wal = file;
  wal += "-wal";
  if (std::filesystem::exists(wal))
    throw std::runtime_error(
        "cannot read " + file.string() + ": its directory is not writable by this user, and " +
        wal.string() +
        " (the application runs, or did not stop cleanly) may hold commits that only a "
        "reader able to create the -shm file sees; run as a user who may write the directory");
  return {check_and_read_session(file, busy_timeout, true), true};
}

/// The store layer's reader, with its connection in reach for the tool's own queries.
class FileReader : public store::SqliteReader {
 public:
  using SqliteReader::SqliteReader;
  store::Connection& connection() { return conn_; }
};

sqlite::Options options(std::chrono::milliseconds busy_timeout) {
  sqlite::Options opts;
  opts.busy_timeout = busy_timeout;
  return opts;
}

class SqliteDatabase final : public Database {
 public:
  explicit SqliteDatabase(const Location& where)
      : SqliteDatabase(where,
                       store::guarded([&] { return open_checked(where.file, where.timeout); })) {}

  store::Reader& reader() override { return reader_; }

  std::string cannot_follow() const override {
    if (!immutable_) return {};
    return "cannot watch " + file_.string() +
           ": its directory is not writable by this user, so the file is read as the "
           "stopped application left it, and commits made after (once it starts) would not "
           "be seen; run as a user who may write the directory";
  }

  std::vector<KindSummary> kinds() override {
    return store::guarded([&] {
      SQLite::Statement s(db(), R"sql(
        SELECT "group", kind, count(*), count(deletion_requested_at),
               sum(observed_generation IS NOT generation OR deletion_requested_at IS NOT NULL)
        FROM objects GROUP BY "group", kind ORDER BY "group", kind)sql");
      std::vector<KindSummary> out;
      while (s.executeStep())
        out.push_back({{s.getColumn(0).getString(), s.getColumn(1).getString()},
                       s.getColumn(2).getInt64(),
                       s.getColumn(3).getInt64(),
                       s.getColumn(4).getInt64()});
      return out;
    });
  }

  std::vector<ConditionRow> conditions(ObjectID id) override {
    return store::guarded([&] {
      SQLite::Statement s(db(), R"sql(
        SELECT type, status, reason, message, liveness, session, last_transition_at,
               observed_generation
        FROM conditions WHERE object_id = ?1 ORDER BY type)sql");
      s.bind(1, id);
      std::vector<ConditionRow> out;
      while (s.executeStep()) {
        ConditionRow r;
        r.stored = condition_status_from_string(s.getColumn(1).getString());
        r.condition = {s.getColumn(0).getString(),   r.stored,
                       s.getColumn(2).getString(),   s.getColumn(3).getString(),
                       s.getColumn(4).getInt() != 0, s.getColumn(7).getInt64()};
        // The library's liveness rule (store/sqlite/row_statement.cpp, RowStatement::row).
        if (r.condition.liveness && s.getColumn(5).getInt64() != conn().session())
          r.condition.status = ConditionStatus::Unknown;
        r.last_transition_at = from_millis(s.getColumn(6).getInt64());
        out.push_back(std::move(r));
      }
      return out;
    });
  }

  int newest_spec_version(const GroupKind& gk) override {
    return store::guarded([&] {
      SQLite::Statement s(db(), R"sql(SELECT coalesce(max(spec_version), 0) FROM objects
                      WHERE "group" = ?1 AND kind = ?2)sql");
      s.bind(1, gk.group);
      s.bind(2, gk.kind);
      s.executeStep();
      return s.getColumn(0).getInt();
    });
  }

  std::int64_t resource_version() override {
    return store::guarded([&] {
      auto s = conn().use(store::Query::current_resource_version);
      s->executeStep();
      return s->getColumn(0).getInt64();
    });
  }

  const char* stale_liveness_writer() const override {
    return session_ == kNoSession ? "a beehive that is not running" : "an earlier session";
  }

  std::optional<bool> application_runs() override {
    std::error_code ec;
    auto canonical = std::filesystem::canonical(file_, ec);  // as sqlite::open names its lock
    return store::RunLock::held(ec ? file_ : canonical);
  }

  const char* nobody_runs() const override { return "no started beehive holds its run lock"; }

  void refresh_liveness() override {
    session_ = store::guarded([&] { return liveness_session(file_, db()); });
    conn().set_session(session_);
  }

 protected:
  void begin_snapshot() override {
    store::guarded([&] { db().exec("BEGIN"); });
  }
  void end_snapshot() noexcept override { db().tryExec("COMMIT"); }

 private:
  SqliteDatabase(const Location& where, Opened opened)
      : Database(where),
        file_(where.file),
        session_(opened.session),
        immutable_(opened.immutable),
        reader_(where.file, options(where.timeout), opened.session, opened.immutable) {}

  store::Connection& conn() { return reader_.connection(); }
  SQLite::Database& db() { return conn().db(); }

  std::filesystem::path file_;
  std::int64_t session_;  // whose liveness conditions hold (liveness_session)
  bool immutable_;        // read as immutable (open_checked)
  FileReader reader_;
};

}  // namespace

std::unique_ptr<Database> open_sqlite_database(const Location& where) {
  return std::make_unique<SqliteDatabase>(where);
}

void require_sqlite_store_to_write(const Location& where) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(where.file, ec))
    throw NotFound("no such database file: " + where.file.string());
  // Not even looked at when this user cannot write it: the look would leave -wal and
  // -shm files behind with the database's mode (see require_writable).
  {
    std::error_code ec;  // as sqlite::open resolves it: the side files are the target's
    auto resolved = std::filesystem::canonical(where.file, ec);
    store::require_writable(ec ? where.file : resolved);
  }
  // Looked at read-only first: opening it through the store would make any SQLite file
  // (another program's) a beehive database, tables, WAL mode and all.
  bool holds_store = false;
  try {
    SQLite::Database db(where.file.string(), SQLite::OPEN_READONLY,
                        static_cast<int>(where.timeout.count()));
    holds_store = db.tableExists("beehive_schema");
  } catch (const SQLite::Exception& e) {
    // Only a file SQLite cannot read as a database is foreign: a busy or unreadable one
    // is said as what it is.
    if (e.getErrorCode() == SQLITE_NOTADB)
      throw NotFound(where.file.string() + " is not a beehive database (" + e.what() + ")");
    throw std::runtime_error("cannot read " + where.file.string() + ": " + e.what());
  }
  if (!holds_store) throw NotFound(where.file.string() + " is not a beehive database");
  int version = 0;
  {
    SQLite::Database db(where.file.string(), SQLite::OPEN_READONLY,
                        static_cast<int>(where.timeout.count()));
    SQLite::Statement v(db, "SELECT version FROM beehive_schema");
    version = v.executeStep() ? v.getColumn(0).getInt() : 0;
  }
  const int latest = store::sqlite_schema::latest_version();
  if (version >= latest) return;
  auto canonical = std::filesystem::canonical(where.file, ec);  // as sqlite::open names its lock
  // Anything but "nothing runs" (a holder that wrote no session: an older build) refuses.
  if (store::RunLock::running_session(ec ? where.file : canonical) == std::int64_t{0}) return;
  throw std::runtime_error(migration_refusal(where.file.string(), version, latest));
}

int sqlite_schema_version() { return store::sqlite_schema::latest_version(); }

}  // namespace beehive::ctl
