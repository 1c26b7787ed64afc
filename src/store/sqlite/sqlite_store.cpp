// The SQLite backend (beehive::sqlite::open): an anchor connection that keeps the WAL
// files in place for the store's lifetime, a pool of read-only connections leased to
// callers, and the write connection handed to the store_writer actor.
//
// open() runs on the thread starting beehive; reader() on any caller's thread (the pool
// is guarded by a mutex, and a caller waits while every connection is leased);
// open_writer() when a writer starts. The other members only read what the constructor
// set, and are safe on any thread.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <sqlite3.h>

#include <beehive/errors.hpp>
#include <beehive/sqlite.hpp>

#include "store/backend.hpp"
#include "store/reader_pool.hpp"
#include "store/sqlite/private_files.hpp"
#include "store/sqlite/run_lock.hpp"
#include "store/sqlite/sqlite_connection.hpp"
#include "store/sqlite/sqlite_reader.hpp"
#include "store/sqlite/sqlite_schema.hpp"
#include "store/sqlite/sqlite_writer.hpp"

namespace beehive::store {

namespace {

class SqliteStore : public Backend {
 public:
  SqliteStore(std::filesystem::path file, sqlite::Options opts)
      : file_(std::move(file)), opts_(opts), anchor_(file_, false, opts_, 0) {
    // SQLite's exceptions go up unconverted: open() names the file in them.
    session_ = sqlite_schema::migrate_and_open_session(anchor_.db(), [&](int from) {
      // A beehive of an older build running on the file could write no more once its
      // schema changed under it: its users stop it first.
      auto held = RunLock::held(file_);
      if (!held)
        throw Error(errc::store, file_.string() + " has the older schema " + std::to_string(from) +
                                     ", and whether a beehive runs on it cannot be told (its "
                                     "lock file cannot be opened: another user's?): open it "
                                     "once as the user that runs it, to migrate it");
      if (*held)
        throw Error(errc::store_in_use,
                    file_.string() + " has the older schema " + std::to_string(from) +
                        " (this build writes " + std::to_string(sqlite_schema::latest_version()) +
                        ") and a beehive runs on it: migrating it would stop that one "
                        "from writing; stop it first");
    });
    if (opts_.read_connections < 1) opts_.read_connections = 1;
  }

  std::string describe() const override { return "sqlite:" + file_.string(); }

  ReaderLease reader() override { return reader({}); }

  // A read never waits for a lock here (WAL), but it can wait for a free connection.
  ReaderLease reader(std::function<bool()> keep_waiting) override {
    return pool_.lease(
        [&] {
          return guarded([&] { return std::make_unique<SqliteReader>(file_, opts_, session_); });
        },
        keep_waiting);
  }

  std::unique_ptr<Writer> open_writer() override {
    return guarded([&] { return std::make_unique<SqliteWriter>(file_, opts_, session_); });
  }

  std::int64_t session() const override { return session_; }

  std::shared_ptr<void> claim() override { return RunLock::acquire(file_, session_); }
  std::string exposure() const override { return store::exposure(file_); }

  std::string identity() const override { return file_.string(); }  // canonical (open)

 private:
  std::filesystem::path file_;
  sqlite::Options opts_;
  Connection anchor_;
  std::int64_t session_ = 0;

  ReaderPool<SqliteReader> pool_{opts_.read_connections};
};

}  // namespace

}  // namespace beehive::store

namespace beehive::sqlite {

std::shared_ptr<Store> open(const std::filesystem::path& file, Options options) {
  // SQLite takes the timeout as an int of milliseconds; beyond it the cast was garbage
  // (readers got a negative timeout: none) and the writer's own wait overflowed into none.
  if (options.busy_timeout.count() < 0 ||
      options.busy_timeout.count() > std::numeric_limits<std::int32_t>::max())
    throw Error(errc::invalid_argument, "sqlite: busy_timeout must be 0 to 2147483647 ms (got " +
                                            std::to_string(options.busy_timeout.count()) + " ms)");
  store::create_private(file);
  // Resolved once: every connection, the process claim's lock file and the identity
  // name the same file, whatever the working directory becomes and through whichever
  // symlink another process opens it.
  std::error_code ec;
  auto resolved = std::filesystem::canonical(file, ec);
  if (ec)  // another name would be claimed than the one another process resolves
    throw Error(errc::store, "cannot resolve " + file.string() + ": " + ec.message());
  store::require_writable(resolved);
  try {
    return std::make_shared<store::SqliteStore>(resolved, options);
  } catch (const Error& e) {  // beehive's own (a newer schema): named too, once
    if (e.message().find(resolved.string()) != std::string::npos) throw;
    throw Error(e.value(), "sqlite: cannot open " + resolved.string() + ": " + e.message());
  } catch (const SQLite::Exception& e) {
    // Says which file: an application may open several, and a lock or a foreign file is
    // that file's trouble.
    std::string why = resolved.string() + ": " + e.what();
    if ((e.getErrorCode() & 0xff) == SQLITE_BUSY)
      why += " (another connection held a lock on it past busy_timeout, " +
             std::to_string(options.busy_timeout.count()) + " ms)";
    throw Error(errc::store, "sqlite: cannot open " + why);
  }
}

}  // namespace beehive::sqlite
