// The SQLite backend (beehive::sqlite::open): an anchor connection that keeps the WAL
// files in place for the store's lifetime, a pool of read-only connections leased to
// callers, and the write connection handed to the store_writer actor.
//
// open() runs on the thread starting beehive; reader() on any caller's thread (the pool
// is guarded by a mutex, and a caller waits while every connection is leased);
// open_writer() when a writer starts. The other members only read what the constructor
// set, and are safe on any thread.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include <beehive/errors.hpp>
#include <beehive/sqlite.hpp>

#include "store/backend.hpp"
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
    session_ = guarded([&] { return sqlite_schema::migrate_and_open_session(anchor_.db()); });
    if (opts_.read_connections < 1) opts_.read_connections = 1;
  }

  std::string describe() const override { return "sqlite:" + file_.string(); }

  ReaderLease reader() override {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !free_.empty() || opened_ < opts_.read_connections; });
    std::unique_ptr<SqliteReader> r;
    if (!free_.empty()) {
      r = std::move(free_.back());
      free_.pop_back();
    } else {
      ++opened_;
      lk.unlock();
      try {
        r = guarded([&] { return std::make_unique<SqliteReader>(file_, opts_, session_); });
      } catch (...) {
        lk.lock();
        --opened_;
        cv_.notify_one();
        throw;
      }
    }
    return ReaderLease(r.release(), [this](Reader* p) {
      std::unique_ptr<SqliteReader> conn(static_cast<SqliteReader*>(p));
      {
        std::lock_guard g(mu_);
        // A connection that failed is closed, not pooled: whatever broke it (a file
        // gone bad, a poisoned cache) must not fail the next reader too. Its slot
        // opens a fresh one on demand.
        if (conn->failed())
          --opened_;
        else
          free_.push_back(std::move(conn));
      }
      cv_.notify_one();
      conn.reset();  // outside the lock
    });
  }

  std::unique_ptr<Writer> open_writer() override {
    return guarded([&] { return std::make_unique<SqliteWriter>(file_, opts_, session_); });
  }

  std::int64_t session() const override { return session_; }

  std::shared_ptr<void> claim() override { return RunLock::acquire(file_); }
  std::string exposure() const override { return store::exposure(file_); }

  std::string identity() const override {
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(file_, ec);
    return (ec ? file_ : canonical).string();
  }

 private:
  std::filesystem::path file_;
  sqlite::Options opts_;
  Connection anchor_;
  std::int64_t session_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<SqliteReader>> free_;
  int opened_ = 0;
};

}  // namespace

}  // namespace beehive::store

namespace beehive::sqlite {

std::shared_ptr<Store> open(const std::filesystem::path& file, Options options) {
  store::create_private(file);
  try {
    return std::make_shared<store::SqliteStore>(file, options);
  } catch (const SQLite::Exception& e) {
    store::rethrow_sqlite(e);
  }
}

}  // namespace beehive::sqlite
