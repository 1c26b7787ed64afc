// The PostgreSQL backend (beehive::postgres::open): the schema migrated on open, a pool
// of reader connections leased to callers, the write connection handed to the
// store_writer actor, the change listener, and the leadership campaign while a Beehive
// runs on the store.
//
// open() runs on the thread starting beehive; reader() on any caller's thread (the pool
// is guarded by a mutex); the subscriptions from any thread. The other members only
// read what the constructor set.

#include <libpq-fe.h>

#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>
#include <beehive/postgres.hpp>

#include "store/backend.hpp"
#include "store/postgres/pg_campaign.hpp"
#include "store/postgres/pg_listener.hpp"
#include "store/postgres/pg_reads.hpp"
#include "store/postgres/pg_schema.hpp"
#include "store/postgres/pg_writer.hpp"
#include "store/reader_pool.hpp"

namespace beehive::store::pg {

namespace {

/// Refuses options PostgreSQL would misread: a schema name it would truncate (two long
/// names would then share one control plane) or cut at a NUL, a connect timeout that
/// leaves no time to connect (libpq's 0 means "for ever"; ours would fail at once), and
/// a lease the server cannot enforce: it is the writer's lock and idle-transaction
/// timeout, which PostgreSQL reads 0 as "none" and takes up to INT_MAX milliseconds.
/// Below 300 ms a renewal every third of it would leave no room for a round trip.
void check(const postgres::Options& o) {
  using std::chrono::milliseconds;
  constexpr milliseconds longest{std::numeric_limits<std::int32_t>::max()}, shortest_lease{300};
  check_schema_name(o.schema);
  if (o.connect_timeout.count() <= 0 || o.connect_timeout > longest)
    throw Error(errc::invalid_argument,
                "postgres: connect_timeout must be positive and at most 2147483647 ms (got " +
                    std::to_string(o.connect_timeout.count()) + " ms)");
  if (o.lease < shortest_lease || o.lease > longest)
    throw Error(errc::invalid_argument,
                "postgres: lease must be at least 300 ms and at most 2147483647 ms (got " +
                    std::to_string(o.lease.count()) + " ms)");
}

/// The database must hold any UTF-8 text as given: in another encoding the server would
/// refuse the first character it lacks (errc::store on some writes only).
void require_utf8_database(Connection& c) {
  const char* encoding = PQparameterStatus(c.raw(), "server_encoding");
  const std::string e = encoding ? encoding : "";
  if (e != "UTF8" && e != "SQL_ASCII")
    throw Error(errc::store, "postgres: the database's encoding is " + e +
                                 ": beehive stores UTF-8 text and needs a UTF8 database (or "
                                 "SQL_ASCII, which keeps bytes as given)");
}

class PgStore : public Backend, public std::enable_shared_from_this<PgStore> {
 public:
  PgStore(std::string conninfo, postgres::Options opts)
      : conninfo_(std::move(conninfo)), opts_(std::move(opts)) {
    check(opts_);
    if (opts_.connections < 1) opts_.connections = 1;
    Connection anchor(conninfo_, opts_.schema, opts_.connect_timeout);
    require_utf8_database(anchor);
    auto opened = pg_schema::migrate_and_open_session(anchor, opts_.lease);
    session_ = opened.session;
    shared_->note_key = std::move(opened.note_key);
    auto* raw = anchor.raw();
    std::string host = PQhost(raw) ? PQhost(raw) : "", port = PQport(raw) ? PQport(raw) : "";
    std::string db = PQdb(raw) ? PQdb(raw) : "";
    where_ = "postgres://" + host + (port.empty() ? "" : ":" + port) + "/" + db +
             "?schema=" + opts_.schema;
    listener_ = std::make_unique<Listener>(conninfo_, opts_.schema, opts_.connect_timeout, session_,
                                           shared_);
  }

  std::string describe() const override { return where_; }

  ReaderLease reader() override { return reader({}); }

  ReaderLease reader(std::function<bool()> keep_waiting) override {
    auto lease = pool_.lease(
        [&] {
          // A new connection, made within the caller's wait too.
          return std::make_unique<PgReader>(conninfo_, opts_.schema, opts_.connect_timeout,
                                            session_, std::chrono::milliseconds{}, keep_waiting);
        },
        keep_waiting);
    if (!keep_waiting) return lease;
    static_cast<PgReader*>(lease.get())->wait_while(std::move(keep_waiting));
    auto give_back = lease.get_deleter();
    return ReaderLease(lease.release(), [give_back](Reader* r) {
      static_cast<PgReader*>(r)->wait_while({});
      give_back(r);
    });
  }

  std::unique_ptr<Writer> open_writer() override {
    return std::make_unique<PgWriter>(conninfo_, opts_.schema, opts_.connect_timeout, session_,
                                      shared_, opts_.lease);
  }

  std::int64_t session() const override { return session_; }

  // Any number of processes may run on the store: the claim is a campaign for
  // leadership, which ends (and hands the lease over) with the handle.
  std::shared_ptr<void> claim() override {
    shared_->standing_down.store(false, std::memory_order_release);
    auto weak = weak_from_this();
    return std::make_shared<Campaign>(conninfo_, opts_.schema, opts_.connect_timeout, opts_.lease,
                                      session_, shared_, [weak](bool leads) {
                                        if (auto self = weak.lock())
                                          self->leadership_changed(leads);
                                      });
  }

  std::string exposure() const override { return {}; }
  std::string identity() const override { return where_; }
  void stand_down() override { shared_->standing_down.store(true, std::memory_order_release); }

  // A fenced write that found the lease taken over says so at once, before the campaign
  // steps down.
  bool fences_leaders() const override { return true; }
  bool leads() const override {
    return shared_->term.load(std::memory_order_acquire) != 0 &&
           !shared_->deposed.load(std::memory_order_acquire);
  }
  std::int64_t term() const override {
    // Read after leads(): a deposition in between yields a term that ended, which the
    // fence refuses as it refuses -1.
    if (!leads()) return -1;
    auto term = shared_->term.load(std::memory_order_acquire);
    return term != 0 ? term : -1;
  }

  void on_leadership(std::function<void(bool)> changed) override {
    std::lock_guard g(leadership_mu_);
    leadership_ = std::move(changed);
  }

  void on_foreign_commit(std::function<void()> committed) override {
    listener_->subscribe(std::move(committed));
  }

 private:
  void leadership_changed(bool leads) {
    std::lock_guard g(leadership_mu_);
    if (leadership_) leadership_(leads);
  }

  std::string conninfo_;
  postgres::Options opts_;
  std::string where_;
  std::int64_t session_ = 0;
  std::shared_ptr<SharedState> shared_ = std::make_shared<SharedState>();
  std::unique_ptr<Listener> listener_;
  ReaderPool<PgReader> pool_{opts_.connections};
  std::mutex leadership_mu_;
  std::function<void(bool)> leadership_;
};

}  // namespace

}  // namespace beehive::store::pg

namespace beehive::postgres {

std::shared_ptr<Store> open(std::string conninfo, Options options) {
  return std::make_shared<store::pg::PgStore>(std::move(conninfo), std::move(options));
}

}  // namespace beehive::postgres
