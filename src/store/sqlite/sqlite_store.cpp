// The SQLite backend: an anchor connection that keeps the WAL files in place for the
// store's lifetime, a pool of read-only connections, and write connections handed to
// store_writer actors.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <beehive/errors.hpp>
#include <beehive/sqlite.hpp>

#include "store/sqlite/private_files.hpp"
#include "store/sqlite/run_lock.hpp"
#include "store/sqlite/sqlite_connection.hpp"
#include "store/sqlite/sqlite_schema.hpp"

namespace beehive::store {

namespace {

/// The Reader interface over a Connection, shared by the read-only connections and the
/// write connection (whose reads see its own open transaction).
template <class Interface>
class ConnectionReader : public Interface {
 public:
  ConnectionReader(const std::filesystem::path& file, bool read_only, const sqlite::Options& opts,
                   std::int64_t session)
      : conn_(file, read_only, opts, session) {}

  std::optional<ObjectRow> get(ObjectID id, unsigned loads) override {
    return watched([&] { return conn_.get(id, loads); });
  }
  std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug,
                                       unsigned loads) override {
    return watched([&] { return conn_.get_by_slug(gk, slug, loads); });
  }
  std::vector<ObjectRow> list(const GroupKind& gk, unsigned loads) override {
    return watched([&] { return conn_.list(gk, loads); });
  }
  void list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) override {
    watched([&] { conn_.list_each(gk, each); });
  }
  std::vector<ObjectRow> snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                  std::int64_t& rv) override {
    return watched([&] { return conn_.snapshot(gk, id, rv); });
  }
  std::vector<Ref> related(ObjectID id, unsigned relation) override {
    return watched([&] { return conn_.related(id, relation); });
  }
  std::vector<Event> list_events(ObjectID id, const detail::EventQuery& q) override {
    return watched([&] { return conn_.list_events(id, q); });
  }
  std::vector<event_run> event_snapshot(ObjectID id, const detail::EventQuery& q,
                                        std::int64_t& rv) override {
    return watched([&] { return conn_.event_snapshot(id, q, rv); });
  }
  std::optional<Event> current_run(ObjectID id, const std::string& category) override {
    return watched([&] { return conn_.current_run(id, category); });
  }
  bool has_incoming_refs(ObjectID id) override {
    return watched([&] { return conn_.has_incoming_refs(id); });
  }
  std::vector<ObjectRow> list_owned_objects(const GroupKind& gk, ObjectID owner,
                                            unsigned loads) override {
    return watched([&] { return conn_.list_owned_objects(gk, owner, loads); });
  }
  std::vector<std::pair<ObjectID, std::int64_t>> list_ids(const GroupKind& gk,
                                                          bool unsettled_only) override {
    return watched([&] { return conn_.list_ids(gk, unsettled_only); });
  }

  /// A store failure seen on this connection (its file may have gone bad).
  bool failed() const { return failed_; }

 protected:
  /// Runs a read, remembering a store failure: the pool replaces such a connection
  /// instead of handing it out again.
  template <class Fn>
  auto watched(Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const Error& e) {
      if (e.value() == errc::store) failed_ = true;
      throw;
    }
  }

  Connection conn_;
  bool failed_ = false;
};

class SqliteReader : public ConnectionReader<Reader> {
 public:
  SqliteReader(const std::filesystem::path& file, const sqlite::Options& opts, std::int64_t session)
      : ConnectionReader(file, true, opts, session) {}
};

class SqliteWriter : public ConnectionReader<Writer> {
 public:
  SqliteWriter(const std::filesystem::path& file, const sqlite::Options& opts, std::int64_t session)
      : ConnectionReader(file, false, opts, session), busy_timeout_(opts.busy_timeout) {
    // Replaces SQLite's own busy timeout: the same bound, but it also stops waiting for
    // callers that have gone (set_lock_wait).
    sqlite3_busy_handler(conn_.db().getHandle(), &SqliteWriter::on_busy, this);
  }

  void begin() override {
    rv_.reset();  // another process may have written since
    rv_taken_ = false;
    ids_checked_ = false;
    guarded([&] { conn_.exec("BEGIN IMMEDIATE"); });
  }
  void commit() override {
    guarded([&] {
      if (rv_taken_) {
        auto s = conn_.use(Query::set_resource_version);
        s->bind(1, *rv_);
        s->exec();
        rv_taken_ = false;
      }
      conn_.exec("COMMIT");
    });
  }
  void rollback() override {
    // A failed statement may already have rolled the transaction back.
    if (in_transaction()) conn_.db().tryExec("ROLLBACK");
  }
  bool in_transaction() override { return !sqlite3_get_autocommit(conn_.db().getHandle()); }
  std::int64_t data_version() override { return conn_.data_version(); }
  std::vector<ObjectRow> changed_since(std::int64_t rv, std::int64_t& resource_version) override {
    return conn_.changed_since(rv, resource_version);
  }
  void set_lock_wait(std::function<bool()> keep_waiting) override {
    keep_waiting_ = std::move(keep_waiting);
  }

  // Counted here within a transaction and stored once, at its commit: a group commit's
  // rows then cost no statements each. Versions taken by a write that rolled back to its
  // savepoint are skipped, which leaves a gap and keeps the order.
  std::int64_t next_resource_version() override {
    if (!rv_) {
      rv_ = guarded([&] {
        auto s = conn_.use(Query::resource_version);
        s->executeStep();
        return s->getColumn(0).getInt64();
      });
    }
    rv_taken_ = true;
    return ++*rv_;
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
  // resumes after it, as it does after a restart (skipping what was reserved, unused).
  ObjectID next_object_id() override {
    if (!ids_checked_) {
      guarded([&] {
        auto s = conn_.use(Query::last_object_id);
        s->executeStep();
        auto counter = s->getColumn(0).getInt64(), max_id = s->getColumn(1).getInt64();
        if (counter != id_ceiling_ || max_id > last_id_) {
          id_ceiling_ = counter;
          last_id_ = std::max(counter, max_id);
        }
      });
      ids_checked_ = true;
    }
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

  void insert_object(const ObjectRow& row, std::optional<ObjectID> owner) override {
    guarded([&] {
      auto s = conn_.use(Query::insert_object);
      s->bind(9, row.meta.id);
      s->bindNoCopy(1, row.meta.group);
      s->bindNoCopy(2, row.meta.kind);
      if (row.meta.slug) s->bindNoCopy(3, *row.meta.slug);
      s->bindNoCopy(4, row.spec);
      s->bind(5, row.spec_version);
      s->bind(6, row.meta.resource_version);
      s->bind(7, nlohmann::json(row.meta.finalizers).dump());
      s->bind(8, to_millis(row.meta.created_at));
      s->exec();
      if (owner) add_ref(row.meta.id, "owned_by", *owner);
    });
  }

  bool add_ref(ObjectID from, const char* relation, ObjectID to) override {
    return guarded([&] {
      auto s = conn_.use(Query::add_ref);
      s->bind(1, from);
      s->bindNoCopy(2, relation);
      s->bind(3, to);
      return s->exec() > 0;
    });
  }

  bool remove_ref(ObjectID from, const char* relation, ObjectID to) override {
    return guarded([&] {
      auto s = conn_.use(Query::remove_ref);
      s->bind(1, from);
      s->bindNoCopy(2, relation);
      s->bind(3, to);
      return s->exec() > 0;
    });
  }

  bool exists(ObjectID id) override {
    return guarded([&] {
      auto s = conn_.use(Query::object_exists);
      s->bind(1, id);
      s->executeStep();
      return s->getColumn(0).getInt() != 0;
    });
  }

  EventID insert_event(ObjectID id, const EventSpec& e, const std::optional<std::string>& detail,
                       Time now, std::int64_t rv) override {
    return guarded([&] {
      auto s = conn_.use(Query::insert_event);
      s->bind(1, id);
      s->bindNoCopy(2, e.category);
      s->bind(3, to_string(e.type));
      s->bindNoCopy(4, e.reason);
      s->bindNoCopy(5, e.message);
      if (detail) s->bindNoCopy(6, *detail);
      s->bind(7, to_millis(now));
      s->bind(8, rv);
      s->exec();
      return conn_.db().getLastInsertRowid();
    });
  }

  void extend_event(EventID id, const std::string& message,
                    const std::optional<std::string>& detail, Time now, std::int64_t rv) override {
    guarded([&] {
      auto s = conn_.use(Query::extend_event);
      s->bind(1, id);
      s->bindNoCopy(2, message);
      if (detail) s->bindNoCopy(3, *detail);
      s->bind(4, to_millis(now));
      s->bind(5, rv);
      s->exec();
    });
  }

  std::vector<GroupKind> kinds_with_events() override {
    return guarded([&] {
      auto s = conn_.use(Query::kinds_with_events);
      std::vector<GroupKind> out;
      while (s->executeStep())
        out.push_back({s->getColumn(0).getString(), s->getColumn(1).getString()});
      return out;
    });
  }

  int trim_events(const GroupKind& gk, int per_object, std::optional<Time> older_than) override {
    return guarded([&] {
      auto s = conn_.use(Query::trim_events);
      s->bindNoCopy(1, gk.group);
      s->bindNoCopy(2, gk.kind);
      s->bind(3, per_object);
      if (older_than) s->bind(4, to_millis(*older_than));
      return s->exec();
    });
  }

  std::vector<ObjectID> cascade_candidates() override { return ids(Query::cascade_candidates); }
  std::vector<ObjectID> collectible() override { return ids(Query::collectible); }

  void drop_pending_dependencies(ObjectID target) override {
    guarded([&] {
      auto s = conn_.use(Query::drop_pending_dependencies);
      s->bind(1, target);
      s->exec();
    });
  }

  void delete_object(ObjectID id) override {
    guarded([&] {
      auto s = conn_.use(Query::delete_object);
      s->bind(1, id);
      s->exec();
    });
  }

  void update_spec(ObjectID id, const std::string& spec, int spec_version, std::int64_t generation,
                   std::int64_t rv, Time now) override {
    guarded([&] {
      auto s = conn_.use(Query::update_spec);
      s->bind(1, id);
      s->bindNoCopy(2, spec);
      s->bind(3, spec_version);
      s->bind(4, generation);
      s->bind(5, rv);
      s->bind(6, to_millis(now));
      s->exec();
    });
  }

  void request_deletion(ObjectID id, Time at, std::int64_t rv) override {
    guarded([&] {
      auto s = conn_.use(Query::request_deletion);
      s->bind(1, id);
      s->bind(2, to_millis(at));
      s->bind(3, rv);
      s->exec();
    });
  }

  void update_status(ObjectID id, const std::optional<std::string>& status, int status_version,
                     std::optional<std::int64_t> observed_generation,
                     std::optional<Time> observed_at, std::int64_t rv, Time now) override {
    guarded([&] {
      auto s = conn_.use(Query::update_status);
      s->bind(1, id);
      if (status) s->bindNoCopy(2, *status);
      s->bind(3, status_version);
      if (observed_generation) s->bind(4, *observed_generation);
      if (observed_at) s->bind(5, to_millis(*observed_at));
      s->bind(6, rv);
      s->bind(7, to_millis(now));
      s->exec();
    });
  }

  void upsert_condition(ObjectID id, const Condition& c, Time now) override {
    guarded([&] {
      auto s = conn_.use(Query::upsert_condition);
      s->bind(1, id);
      s->bindNoCopy(2, c.type);
      s->bind(3, to_string(c.status));
      s->bindNoCopy(4, c.reason);
      s->bindNoCopy(5, c.message);
      s->bind(6, c.liveness ? 1 : 0);
      s->bind(7, conn_.session());
      s->bind(8, to_millis(now));
      s->exec();
    });
  }

  bool delete_condition(ObjectID id, const std::string& type) override {
    return guarded([&] {
      auto s = conn_.use(Query::delete_condition);
      s->bind(1, id);
      s->bindNoCopy(2, type);
      return s->exec() > 0;
    });
  }

  void set_finalizers(ObjectID id, const std::vector<std::string>& finalizers, std::int64_t rv,
                      Time now) override {
    guarded([&] {
      auto s = conn_.use(Query::set_finalizers);
      s->bind(1, id);
      s->bind(2, nlohmann::json(finalizers).dump());
      s->bind(3, rv);
      s->bind(4, to_millis(now));
      s->exec();
    });
  }

  void conditions_changed(ObjectID id, std::int64_t rv, Time now) override {
    guarded([&] {
      auto s = conn_.use(Query::conditions_changed);
      s->bind(1, id);
      s->bind(2, rv);
      s->bind(3, to_millis(now));
      s->exec();
    });
  }

  void savepoint(int depth) override {
    guarded([&] { conn_.exec("SAVEPOINT s" + std::to_string(depth)); });
  }
  void release(int depth) override {
    guarded([&] { conn_.exec("RELEASE s" + std::to_string(depth)); });
  }
  void rollback_to(int depth) override {
    guarded([&] {
      conn_.exec("ROLLBACK TO s" + std::to_string(depth));
      conn_.exec("RELEASE s" + std::to_string(depth));
    });
  }

 private:
  /// SQLite's busy handler: true retries. Sleeps like SQLite's own busy timeout (short
  /// steps first), but never longer than 10 ms at a time, so that a caller giving up
  /// frees the writer promptly.
  static int on_busy(void* self, int attempt) {
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

  std::chrono::milliseconds busy_timeout_;
  std::chrono::steady_clock::time_point busy_since_{};
  std::function<bool()> keep_waiting_;
  std::optional<std::int64_t> rv_;  // the transaction's last resource version, once read
  bool ids_checked_ = false;        // this transaction has compared the id counter with the file
  ObjectID last_id_ = 0;            // the last object id this writer allocated
  ObjectID id_ceiling_ = -1;        // the id counter as this writer left it (-1: not read yet)
  static constexpr ObjectID kReservedIds = 1024;
  bool rv_taken_ = false;  // a version was taken: store it at commit

  std::vector<ObjectID> ids(Query q) {
    return guarded([&] {
      auto s = conn_.use(q);
      std::vector<ObjectID> out;
      while (s->executeStep()) out.push_back(s->getColumn(0).getInt64());
      return out;
    });
  }
};

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

Backend& backend_of(Store& s) {
  auto* b = dynamic_cast<Backend*>(&s);
  if (!b) throw Error(errc::invalid_argument, "not a beehive store backend");
  return *b;
}

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
