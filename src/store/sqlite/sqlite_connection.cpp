// Opening a SQLite connection, its cache of prepared statements, and the translation
// of SQLite's errors into beehive's. The reads themselves are in sqlite_object_reads.cpp
// and sqlite_event_reads.cpp.
//
// A Connection runs on one thread at a time (see sqlite_connection.hpp); the statement
// counter is a relaxed atomic, shared by every connection of the process.

#include "store/sqlite/sqlite_connection.hpp"

#include <sqlite3.h>

#include <beehive/errors.hpp>

namespace beehive::store {

void rethrow_sqlite(const SQLite::Exception& e) {
  if (e.getExtendedErrorCode() == SQLITE_CONSTRAINT_UNIQUE)
    throw Error(errc::already_exists, e.what());
  throw Error(errc::store, e.what());
}

std::string immutable_uri(const std::filesystem::path& file) {
  // An empty authority (file:///), so that the path is never read as a host; '%', '?'
  // and '#' escaped, as they would end or change the path.
  std::string uri = "file://";
  for (char c : std::filesystem::absolute(file).string()) {
    if (c == '%')
      uri += "%25";
    else if (c == '?')
      uri += "%3f";
    else if (c == '#')
      uri += "%23";
    else
      uri += c;
  }
  return uri + "?mode=ro&immutable=1";
}

Connection::Connection(const std::filesystem::path& file, bool read_only,
                       const sqlite::Options& opts, std::int64_t session, bool immutable)
    // NOMUTEX: a connection is only ever used by one thread at a time (a leased reader,
    // or the writer on the thread running it), so SQLite's per-call connection mutex is
    // pure cost.
    // No VFS argument: every file goes through SQLite's default VFS, unmodified, so that
    // durability is SQLite's own argument (a shim that batched the writer's WAL writes
    // once lost acknowledged transactions).
    : db_(immutable && read_only ? immutable_uri(file) : file.string(),
          SQLITE_OPEN_NOMUTEX | (immutable && read_only ? SQLITE_OPEN_URI : 0) |
              (read_only ? SQLite::OPEN_READONLY : (SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE)),
          static_cast<int>(opts.busy_timeout.count())),
      session_(session) {
  if (!read_only) {
    // Another application's database (tables, no beehive_schema): switching it to WAL
    // and adding beehive's tables would change it for good. A beehive database gets its
    // beehive_schema table in the transaction that creates the others.
    bool foreign = db_.execAndGet(
                          "SELECT EXISTS (SELECT 1 FROM sqlite_master) AND NOT EXISTS "
                          "(SELECT 1 FROM sqlite_master WHERE name = 'beehive_schema')")
                       .getInt() != 0;
    if (foreign)
      throw Error(errc::store, "sqlite: " + file.string() +
                                   " is not a beehive database (it holds another "
                                   "application's tables); it was left as it was");
    db_.exec("PRAGMA journal_mode = WAL");
    db_.exec(opts.synchronous == sqlite::Synchronous::full ? "PRAGMA synchronous = FULL"
                                                           : "PRAGMA synchronous = NORMAL");
    db_.exec("PRAGMA foreign_keys = ON");
    // Without a limit the WAL keeps the size of the largest transaction it ever held
    // (a `within` block of a gigabyte leaves a gigabyte file) until the store closes.
    // With one, the writer cuts the file back when it starts the log over. Above the
    // steady size (about 4 MiB: SQLite checkpoints every 1000 pages), so that an
    // ordinary run never pays for the cut.
    db_.exec("PRAGMA journal_size_limit = " + std::to_string(wal_size_limit));
  }
}

Connection::Use Connection::use(Query q) {
  count_statement();
  auto& slot = stmts_[static_cast<int>(q)];
  if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql_for(q));
  return Use(*slot);
}

Connection::RowUse Connection::use_rows(Query q) {
  count_statement();
  int i = q == Query::list_owned_objects ? 3 : static_cast<int>(q);
  auto& slot = row_stmts_.at(static_cast<std::size_t>(i));
  if (!slot) slot = std::make_unique<RowStatement>(db_.getHandle(), sql_for(q));
  return RowUse(*slot);
}

Connection::RowUse Connection::use_rows(const std::string& sql) {
  count_statement();
  // Selections differ by the shape of their selector, and a program uses a few: keep
  // them prepared, but never let callers with ever-new shapes grow the cache unbounded.
  if (dynamic_.size() >= 64 && !dynamic_.contains(sql)) dynamic_.clear();
  auto& slot = dynamic_[sql];
  if (!slot) slot = std::make_unique<RowStatement>(db_.getHandle(), sql);
  return RowUse(*slot);
}

void Connection::exec(const std::string& sql) {
  count_statement();
  auto& slot = plain_[sql];
  if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql);
  Use u(*slot);
  u->exec();
}

bool Connection::in_transaction() const { return !sqlite3_get_autocommit(db_.getHandle()); }

std::int64_t Connection::data_version() {
  return guarded([&] {
    // Not counted in statements_run(): it runs on the writer's own cadence, whatever
    // the callers whose statements that count measures are doing.
    auto& slot = stmts_[static_cast<int>(Query::data_version)];
    if (!slot) slot = std::make_unique<SQLite::Statement>(db_, sql_for(Query::data_version));
    Use s(*slot);
    s->executeStep();
    return s->getColumn(0).getInt64();
  });
}

}  // namespace beehive::store
