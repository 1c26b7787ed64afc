// What only the PostgreSQL store has to promise: a commit whose connection is lost is
// reported as exactly what happened (resolved by its write token), lost connections are
// errc::store and replaced on the next call, and a schema written by a newer build is
// refused. Runs in the pg.* set (it skips, saying so, on SQLite).

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <beehive/actors.hpp>
#include <beehive/postgres.hpp>

#include "controller_fixture.hpp"
#include "group_engine.hpp"
#include "store/backend.hpp"
#include "store/commit_note.hpp"
#include "store/postgres/pg_connection.hpp"
#include "store/postgres/pg_faults.hpp"
#include "store/postgres/pg_listener.hpp"
#include "store/postgres/pg_schema.hpp"
#include "store/postgres/pg_writer.hpp"
#include "store/write_engine.hpp"
#include "support/test_store.hpp"

namespace beehive::test {
namespace {

namespace faults = store::pg::faults;
using namespace std::chrono_literals;

/// Runs `sql` on the test database (a connection of its own), in `schema`.
void run_sql(const std::string& schema, const std::string& sql) {
  PGconn* c = PQconnectdb(std::getenv("BEEHIVE_TEST_PG"));
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  auto full = "SET search_path TO \"" + schema + "\"; " + sql;
  PGresult* r = PQexec(c, full.c_str());
  auto status = PQresultStatus(r);
  EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
}

/// Whether `sql`, run on `c`, returns `want` in its first cell.
bool first_cell_is(PGconn* c, const std::string& sql, const std::string& want) {
  PGresult* r = PQexec(c, sql.c_str());
  bool yes = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
             std::string(PQgetvalue(r, 0, 0)) == want;
  PQclear(r);
  return yes;
}

/// Another session on the test database, in `schema`, that runs `sql` in a transaction
/// it keeps open (holding the locks `sql` took) until commit() or its end.
class OpenTransaction {
 public:
  OpenTransaction(const std::string& schema, const std::string& sql)
      : c_(PQconnectdb(std::getenv("BEEHIVE_TEST_PG"))) {
    EXPECT_EQ(PQstatus(c_), CONNECTION_OK) << PQerrorMessage(c_);
    auto all = "BEGIN; SET LOCAL search_path TO \"" + schema + "\"; " + sql;
    PGresult* r = PQexec(c_, all.c_str());
    EXPECT_TRUE(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK)
        << PQresultErrorMessage(r);
    PQclear(r);
  }
  ~OpenTransaction() {
    commit();
    PQfinish(c_);
  }
  OpenTransaction(const OpenTransaction&) = delete;
  OpenTransaction& operator=(const OpenTransaction&) = delete;
  void commit() {
    if (PQtransactionStatus(c_) != PQTRANS_IDLE) PQclear(PQexec(c_, "COMMIT"));
  }
  /// Runs a query on this session; true when it returns `want` in its first cell.
  bool returns(const std::string& sql, const std::string& want) {
    return first_cell_is(c_, sql, want);
  }

 private:
  PGconn* c_;
};

/// A TCP proxy in front of the test server's Unix socket. It relays every connection but
/// cancel requests, which it takes and never answers, as a server behind a network that
/// drops packets looks to libpq's PQcancel (which then waits). close() lets go of them.
class CancelSwallowingProxy {
 public:
  CancelSwallowingProxy() {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(std::getenv("BEEHIVE_TEST_PG"), &err);
    std::string host, port = "5432";
    for (auto* o = opts; o && o->keyword; ++o) {
      if (o->val && std::string(o->keyword) == "host") host = o->val;
      if (o->val && std::string(o->keyword) == "port") port = o->val;
      if (o->val && std::string(o->keyword) == "user") user_ = o->val;
      if (o->val && std::string(o->keyword) == "dbname") dbname_ = o->val;
    }
    PQconninfoFree(opts);
    PQfreemem(err);
    upstream_ = host + "/.s.PGSQL." + port;
    host_ = host;
    server_port_ = port;
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("proxy: cannot listen");
    port_ = ntohs(addr.sin_port);
    accepting_ = std::thread([this] { accept_loop(); });
  }
  ~CancelSwallowingProxy() {
    close();
    ::shutdown(listener_, SHUT_RDWR);
    accepting_.join();
    ::close(listener_);
  }
  /// A conninfo reaching the test server through the proxy.
  std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + user_ +
           " dbname=" + dbname_ + " sslmode=disable";
  }
  /// A conninfo naming the proxy first and then `host` and `port`.
  std::string conninfo_then(const std::string& host, const std::string& port) const {
    return "host=127.0.0.1," + host + " port=" + std::to_string(port_) + "," + port +
           " user=" + user_ + " dbname=" + dbname_ + " sslmode=disable";
  }
  /// The test server's own host (its socket's directory) and port.
  std::pair<std::string, std::string> server() const { return {host_, server_port_}; }
  /// Ends every connection, the cancel requests held included.
  void close() {
    std::lock_guard g(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    closed_ = true;
  }
  int cancels_held() const { return cancels_.load(); }
  /// The next bytes a client sends that hold `needle` (any, for "") are not relayed: its
  /// connection is closed instead, as by a server that ended the idle session as they
  /// were sent.
  void drop_next_sending(std::string needle) {
    std::lock_guard g(mu_);
    drop_needle_ = std::move(needle);
    dropping_ = true;
  }
  int dropped() const { return dropped_.load(); }
  /// New connections taken and never answered (hang_new_connections).
  int connections_hung() const { return hung_.load(); }
  /// From now on a new connection is taken and never answered, as behind a network that
  /// drops packets; the connections open so far are cut.
  void hang_new_connections() {
    std::lock_guard g(mu_);
    hang_ = true;
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  void accept_loop() {
    std::vector<std::thread> relays;
    for (int c; (c = ::accept(listener_, nullptr, nullptr)) >= 0;) {
      std::lock_guard g(mu_);
      if (closed_) ::shutdown(c, SHUT_RDWR);
      open_.push_back(c);
      relays.emplace_back([this, c] { relay(c); });
    }
    for (auto& t : relays) t.join();
    for (int fd : open_) ::close(fd);
  }
  void relay(int client) {
    // The first 8 bytes: the message's length and its code (80877102: a cancel request).
    unsigned char head[8];
    if (::recv(client, head, sizeof head, MSG_WAITALL) != sizeof head) return;
    std::uint32_t code =
        (std::uint32_t{head[4]} << 24) | (head[5] << 16) | (head[6] << 8) | head[7];
    bool hang;
    {
      std::lock_guard g(mu_);
      hang = hang_;
    }
    if (code == 80877102 || hang) {
      ++(hang ? hung_ : cancels_);
      char sink[64];
      while (::recv(client, sink, sizeof sink, 0) > 0) {  // held until close()
      }
      return;
    }
    int server = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", upstream_.c_str());
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::send(server, head, sizeof head, MSG_NOSIGNAL) != sizeof head) {
      ::close(server);
      return;
    }
    {
      std::lock_guard g(mu_);
      open_.push_back(server);
      if (closed_) ::shutdown(server, SHUT_RDWR);
    }
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buf[16384];
    for (;;) {
      if (::poll(fds, 2, -1) < 0) return;
      for (int i = 0; i < 2; ++i) {
        if (!fds[i].revents) continue;
        auto n = ::recv(fds[i].fd, buf, sizeof buf, 0);
        if (i == 0 && n > 0 && drops_next(std::string_view(buf, static_cast<std::size_t>(n)))) {
          // As a server that ended the session just as the client sent this.
          ::shutdown(client, SHUT_RDWR);
          ::shutdown(server, SHUT_RDWR);
          return;
        }
        if (n <= 0 || ::send(fds[1 - i].fd, buf, n, MSG_NOSIGNAL) != n) {
          ::shutdown(fds[1 - i].fd, SHUT_RDWR);
          return;
        }
      }
    }
  }

  std::string upstream_, user_, dbname_, host_, server_port_;
  int listener_ = -1;
  int port_ = 0;
  std::thread accepting_;
  std::mutex mu_;
  std::vector<int> open_;
  bool closed_ = false;
  bool hang_ = false;
  std::atomic<int> cancels_{0};
  std::atomic<int> hung_{0};
  std::string drop_needle_;  // see drop_next_sending
  bool dropping_ = false;
  std::atomic<int> dropped_{0};

  bool drops_next(std::string_view sent) {
    std::lock_guard g(mu_);
    if (!dropping_ || sent.find(drop_needle_) == std::string_view::npos) return false;
    dropping_ = false;
    ++dropped_;
    return true;
  }
};

/// Closes a proxy as it leaves scope: declared after the proxy and before what uses it,
/// it lets go of what hangs on the proxy before that goes (a beehive, a reader).
struct ClosedFirst {
  CancelSwallowingProxy& p;
  ~ClosedFirst() { p.close(); }
};

class PostgresStore : public BeehiveTest {
 protected:
  void SetUp() override {
    REQUIRE_POSTGRES();
    BeehiveTest::SetUp();
  }
  void TearDown() override {
    faults::drop_before_commit = 0;
    faults::drop_after_commit = 0;
    faults::drop_after_begin_ahead = 0;
    faults::refuse_connections = false;
    faults::cancel_delay_ms = 0;
    faults::deafen_listener = false;
    faults::hold_listener_notes = false;
    faults::fail_change_log_reads = false;
    BeehiveTest::TearDown();
  }
};

TEST_F(PostgresStore, ACommitLostBeforeCOMMITWasSentIsAFailedWriteThatWroteNothing) {
  Widgets w(bh(), widget_kind);
  faults::drop_before_commit = 1;
  EXPECT_ERRC(w.create(ctx_, {"lost", 1}, with_slug("lost")), errc::store);
  EXPECT_ERRC(w.get_by_slug(ctx_, "lost"), errc::not_found);
  // The writer connects again by itself.
  auto o = w.create(ctx_, {"next", 2}, with_slug("next"));
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 2);
}

TEST_F(PostgresStore, ACommitLostAfterCOMMITSucceededIsReportedCommitted) {
  Widgets w(bh(), widget_kind);
  auto before = w.create(ctx_, {"a", 1});
  faults::drop_after_commit = 1;
  auto o = w.update(ctx_, before.id, {"a", 2});  // resolved through its write token
  EXPECT_EQ(o.spec.size, 2);
  EXPECT_EQ(w.get(ctx_, before.id).spec.size, 2);
  EXPECT_EQ(w.get(ctx_, before.id).resource_version, o.resource_version);
  auto next = w.update(ctx_, before.id, {"a", 3});
  EXPECT_GT(next.resource_version, o.resource_version);
}

// The store's writer is made anew (a second beehive on the same store, a writer
// restarted by its supervisor) under the same session: the write tokens it reads back
// must never be taken for the earlier writer's.
TEST_F(PostgresStore, AWriterMadeAgainNeverTakesAnEarlierWritersTokenForItsOwn) {
  auto store = open_test_store(dir_.file("tokens.db"));
  {
    Beehive first(store);
    Widgets(first, widget_kind).create(ctx_, {"first", 1});
  }
  Beehive second(store);
  Widgets w(second, widget_kind);
  faults::drop_before_commit = 1;
  EXPECT_ERRC(w.create(ctx_, {"second", 2}), errc::store);
  for (auto& o : w.list(ctx_)) EXPECT_NE(o.spec.color, "second");
}

// The connection lost while the server is still working on the COMMIT (a slow flush, a
// synchronous replica not answering): read back at once, the token is the one before
// it, though the transaction is about to commit. The writer waits for the transaction
// to be over before it reads: the write is reported committed, and is made once.
TEST_F(PostgresStore, ACommitTheServerIsStillFinishingWhenTheConnectionGoesIsReportedCommitted) {
  Widgets w(bh(), widget_kind);
  w.create(ctx_, {"before", 0});
  const auto schema = test_schema_for(db_path());
  run_sql(schema, R"sql(
      CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$;
      CREATE TRIGGER slow_commit BEFORE UPDATE ON write_tokens
        FOR EACH ROW EXECUTE FUNCTION slow_commit())sql");
  faults::cut_commit_after_ms = 200;
  std::optional<ObjectID> made;
  try {
    made = w.create(ctx_, {"cut", 1}).id;
  } catch (const Error& e) {
    ADD_FAILURE() << "a write that committed was reported failed: " << e.what();
  }
  run_sql(schema, "DROP TRIGGER slow_commit ON write_tokens");
  std::vector<ObjectID> cut;
  for (auto& o : w.list(ctx_))
    if (o.spec.color == "cut") cut.push_back(o.id);
  ASSERT_EQ(cut.size(), 1u) << "the write was made " << cut.size() << " times";
  EXPECT_EQ(made, cut.front());
}

// The database out of reach for longer than a lost commit's outcome is looked for (six
// connect timeouts): the caller is told that its write's outcome is unknown, not that it
// failed; and since this one did land, the watches of the process still see it, even
// behind the process's later writes.
TEST_F(PostgresStore, ACommitWhoseOutcomeCannotBeLearntSaysSoAndStillReachesTheWatches) {
  auto path = dir_.file("unknown.db");
  Beehive bh(postgres::open(std::getenv("BEEHIVE_TEST_PG"),
                            {.schema = test_schema_for(path), .connect_timeout = 100ms}));
  Widgets w(bh, widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  auto watch = w.watch_list(ctx_);
  faults::drop_after_commit = 1;
  faults::refuse_connections = true;
  auto began = std::chrono::steady_clock::now();
  EXPECT_ERRC_WITH(w.update(ctx_, o.id, {"a", 2}), errc::store, "outcome of this write is unknown");
  EXPECT_GE(std::chrono::steady_clock::now() - began, 6 * 100ms) << "looked for too briefly";
  faults::refuse_connections = false;
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 2);  // it had landed
  auto later = w.create(ctx_, {"b", 1});

  bool seen = false, seen_later = false;
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!(seen && seen_later) && std::chrono::steady_clock::now() < until) {
    auto ch = watch.next_for(1s);
    if (!ch) continue;
    if (ch->object.id == o.id && ch->object.spec.size == 2) seen = true;
    if (ch->object.id == later.id) seen_later = true;
  }
  EXPECT_TRUE(seen) << "the watch never saw the write whose outcome was unknown";
  EXPECT_TRUE(seen_later);
}

// The same for a within block's commit: the block says so, and its writes, which did
// land, reach the watches.
TEST_F(PostgresStore,
       AWithinBlockWhoseCommitsOutcomeCannotBeLearntSaysSoAndStillReachesTheWatches) {
  Beehive bh(postgres::open(
      std::getenv("BEEHIVE_TEST_PG"),
      {.schema = test_schema_for(dir_.file("unknown.db")), .connect_timeout = 100ms}));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh, widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  Widgets w(bh, widget_kind);
  auto watch = w.watch_list(ctx_);
  faults::drop_after_commit = 1;
  faults::refuse_connections = true;
  EXPECT_ERRC_WITH(cc.within(ctx_,
                             [&](const Context& tx) {
                               w.create(tx, {"in", 1}, with_slug("in-1"));
                               w.create(tx, {"in", 2}, with_slug("in-2"));
                             }),
                   errc::store, "outcome of this write is unknown");
  faults::refuse_connections = false;
  EXPECT_EQ(w.get_by_slug(ctx_, "in-2").spec.size, 2);  // it had landed
  w.create(ctx_, {"b", 1}, with_slug("later"));

  std::set<std::string> seen;
  auto until = std::chrono::steady_clock::now() + 10s;
  while (seen.size() < 3 && std::chrono::steady_clock::now() < until)
    if (auto ch = watch.next_for(1s)) seen.insert(ch->object.slug.value_or(""));
  EXPECT_EQ(seen, (std::set<std::string>{"in-1", "in-2", "later"}));
}

// Sessions the server ended while idle (a restart, an idle timeout, an operator's
// pg_terminate_backend) are replaced before their next use: no call fails for them.
TEST_F(PostgresStore, SessionsTheServerEndedWhileIdleAreReplacedWithoutFailingACall) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 1);  // a reader connection is open too
  auto schema = test_schema_for(db_path());
  // The second argument waits until each backend has ended.
  run_sql(schema,
          "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE "
          "application_name = 'beehive " +
              schema + "'");
  for (int i = 0; i < 5; ++i) {
    EXPECT_NO_THROW(w.update(ctx_, o.id, {"a", 10 + i})) << i;
    EXPECT_NO_THROW(EXPECT_EQ(w.get(ctx_, o.id).spec.size, 10 + i)) << i;
  }
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, w.list(ctx_).front().resource_version);
}

/// Makes this process deaf to other processes' commits (its listener's session ends and
/// no new one can be made) while `theirs`, another process's client, updates `a` to
/// size 3 and creates "b"; then trims the change log up to just below b, as the
/// leader's retention would have, and lets this process hear again. Returns b.
Object<WidgetSpec, WidgetStatus> trim_past_while_deaf(const std::string& schema, Widgets& theirs,
                                                      ObjectID a) {
  faults::refuse_connections = true;
  run_sql(schema,
          "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE "
          "application_name = 'beehive " +
              schema + "' AND query LIKE 'LISTEN%'");
  theirs.update({}, a, {"a", 3});
  auto b = theirs.create({}, {"b", 1});
  auto cut = std::to_string(b.resource_version - 1);
  run_sql(schema, "DELETE FROM change_log WHERE resource_version <= " + cut +
                      "; UPDATE beehive_meta SET value = " + cut +
                      " WHERE key = 'change_log_horizon'");
  faults::refuse_connections = false;  // it hears again, and reads the log
  return b;
}

// A process that could not read the change log (its listener cut off, the process
// paused) while the log was trimmed past what it had read has lost changes it can never
// deliver: its watches that might have missed one end with watch_too_old, as a resume
// below the log's horizon does, instead of going on without them.
TEST_F(PostgresStore, AProcessTheLogWasTrimmedPastEndsItsWatchesAsTooOld) {
  Widgets mine(bh(), widget_kind);
  auto a = mine.create(ctx_, {"a", 1});
  auto watch = mine.watch_list(ctx_);
  ASSERT_EQ(watch.next_for(5s)->object.id, a.id);
  auto schema = test_schema_for(db_path());
  Beehive other(postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = schema}));
  Widgets theirs(other, widget_kind);
  theirs.update(ctx_, a.id, {"a", 2});  // its connections are open from here on
  auto seen = watch.next_for(5s);
  ASSERT_TRUE(seen && seen->object.spec.size == 2);
  caf::scoped_actor subscriber{actor_system_of(bh())};
  caf::anon_send(bh().store_writer(), subscribe_atom::value,
                 caf::actor_cast<caf::actor>(subscriber));

  auto b = trim_past_while_deaf(schema, theirs, a.id);
  // An actor subscribed to the writer's records is told too.
  std::int64_t lost_through = 0;
  for (int i = 0; i < 100 && lost_through == 0; ++i)
    subscriber->receive([&](const commit_record& r) { lost_through = r.lost_through; },
                        caf::after(10s) >> [&] { i = 100; });
  EXPECT_EQ(lost_through, b.resource_version - 1);
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!watch.done() && std::chrono::steady_clock::now() < until) {
    auto ch = watch.next_for(200ms);
    ASSERT_FALSE(ch && ch->object.id == a.id) << "a change it cannot have read";
  }
  ASSERT_TRUE(watch.done()) << "the watch went on without the update it missed";
  EXPECT_EQ(watch.error(), make_error_code(errc::watch_too_old));
  // Watching again: a snapshot with both, as they stand.
  auto again = mine.watch_list(ctx_);
  std::map<ObjectID, int> sizes;
  while (sizes.size() < 2) {
    auto ch = again.next_for(5s);
    if (!ch) break;
    sizes[ch->object.id] = ch->object.spec.size;
  }
  EXPECT_EQ(sizes, (std::map<ObjectID, int>{{a.id, 3}, {b.id, 1}}));
}

// The same process leading: its controller never hears of the update it missed, so it
// reconciles every object again, as after a takeover.
TEST_F(PostgresStore, ALeaderTheLogWasTrimmedPastReconcilesEveryObjectAgain) {
  // Shared with the reconcile, which the fixture's beehive may still run after the test.
  struct Seen {
    std::mutex mu;
    std::map<ObjectID, int> reconciled;  // the size each object was last reconciled at
  };
  auto seen = std::make_shared<Seen>();
  register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind,
      [seen](const Context&, ControllerClient<WidgetStatus>&,
             const Object<WidgetSpec, WidgetStatus>& o) {
        std::lock_guard g(seen->mu);
        seen->reconciled[o.id] = o.spec.size;
        return Result{};
      },
      with_resync_interval(std::chrono::hours(1)));
  bh().start(ctx_);
  Widgets mine(bh(), widget_kind);
  auto a = mine.create(ctx_, {"a", 1});
  auto size_of = [&](ObjectID id) {
    std::lock_guard g(seen->mu);
    auto it = seen->reconciled.find(id);
    return it == seen->reconciled.end() ? 0 : it->second;
  };
  ASSERT_TRUE(eventually([&] { return size_of(a.id) == 1; }));
  auto schema = test_schema_for(db_path());
  Beehive other(postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = schema}));
  Widgets theirs(other, widget_kind);
  theirs.update(ctx_, a.id, {"a", 2});
  ASSERT_TRUE(eventually([&] { return size_of(a.id) == 2; }));

  auto b = trim_past_while_deaf(schema, theirs, a.id);
  EXPECT_TRUE(eventually([&] { return size_of(b.id) == 1; }));
  EXPECT_TRUE(eventually([&] { return size_of(a.id) == 3; }))
      << "the update it missed was never reconciled";
}

// Two processes writing at once: every write of the other reaches this one's watch,
// however late its notification arrives. (A commit of this process's that followed
// the other's, and a look at the log before the notification came, used to skip it.)
// And no write fails: the two writers' transactions lock the counters in one order.
// (They locked them in scan order, which two snapshots straddling a commit could see
// differently: the server then found a deadlock and failed one of them.)
TEST_F(PostgresStore, EveryWriteOfAnotherProcessWritingAtOnceReachesTheWatch) {
  Widgets mine(bh(), widget_kind);
  auto watch = mine.watch_list(ctx_);
  Beehive other(
      postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = test_schema_for(db_path())}));
  Widgets theirs(other, widget_kind);
  constexpr int kWrites = 300, kThreads = 4;
  std::mutex mu;
  std::set<ObjectID> foreign;
  std::vector<std::string> failures;
  auto writing = [&](Widgets& w, bool record) {
    for (int i = 0; i < kWrites; ++i) {
      try {
        auto o = w.create({}, {record ? "theirs" : "mine", i});
        std::lock_guard g(mu);
        if (record) foreign.insert(o.id);
      } catch (const Error& e) {
        std::lock_guard g(mu);
        failures.push_back(e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] { writing(theirs, true); });
    threads.emplace_back([&] { writing(mine, false); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<std::string>{});
  std::set<ObjectID> seen;
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!std::includes(seen.begin(), seen.end(), foreign.begin(), foreign.end()) &&
         std::chrono::steady_clock::now() < until)
    if (auto ch = watch.next_for(500ms)) seen.insert(ch->object.id);
  std::size_t missed = 0;
  for (auto id : foreign) missed += seen.count(id) == 0;
  EXPECT_EQ(missed, 0u) << "of " << foreign.size() << " writes by the other process";
}

/// Waits until `n` listeners (one per store opened on the schema) listen: a listener
/// connects on a thread of its own, and misses what was sent before it listened.
bool listeners_listen(const std::filesystem::path& db_path, int n) {
  const auto sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'beehive " +
                   test_schema_for(db_path) + "' AND (query LIKE 'LISTEN%' OR query = '')";
  auto until = std::chrono::steady_clock::now() + 5s;
  while (std::stoi(query_test_store(db_path, sql).at(0).at(0)) < n)
    if (std::chrono::steady_clock::now() > until) return false;
  return true;
}

/// This process's watch of the widgets, and another process (a second store on the
/// schema) writing them.
struct TwoProcesses {
  TwoProcesses(Beehive& bh, const std::filesystem::path& db_path)
      : watch(Widgets(bh, widget_kind).watch_list({})),
        other(postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = test_schema_for(db_path)})),
        theirs(other, widget_kind) {}
  Stream<Change<WidgetSpec, WidgetStatus>> watch;
  Beehive other;
  Widgets theirs;
};

/// One object made by each process, `theirs` through the other and `mine` through
/// `ours`; returns once both listeners listen and the watch has had both.
void one_each(TwoProcesses& two, Widgets& ours, const std::filesystem::path& db_path,
              Object<WidgetSpec, WidgetStatus>& theirs, Object<WidgetSpec, WidgetStatus>& mine) {
  theirs = two.theirs.create({}, {"theirs", 1});
  mine = ours.create({}, {"mine", 1});
  ASSERT_TRUE(listeners_listen(db_path, 2));
  ASSERT_TRUE(two.watch.next_for(5s));
  ASSERT_TRUE(two.watch.next_for(5s));
}

/// Waits (no fixed sleep) until the change log has been refused to at least `n` reads.
bool change_log_refused(int n) {
  auto until = std::chrono::steady_clock::now() + 5s;
  while (faults::change_log_reads_failed < n)
    if (std::chrono::steady_clock::now() > until)
      return false;
    else
      std::this_thread::yield();
  return true;
}

// Another process's commit comes with its note, which carries what it changed: the watch
// gets it from there, without the change log (which here cannot be read at all).
TEST_F(PostgresStore, AnotherProcesssCommitReachesTheWatchFromItsNoteAlone) {
  TwoProcesses two(bh(), db_path());
  auto& [watch, other, theirs] = two;
  ASSERT_TRUE(listeners_listen(db_path(), 2));
  auto o = theirs.create({}, {"theirs", 1});
  auto added = watch.next_for(5s);
  ASSERT_TRUE(added);
  ASSERT_EQ(added->object.id, o.id);

  faults::fail_change_log_reads = true;
  auto written = theirs.update({}, o.id, {"theirs", 2});
  auto updated = watch.next_for(5s);
  ASSERT_TRUE(updated) << "the note's record was not published";
  EXPECT_EQ(updated->type, ChangeType::Modified);
  EXPECT_EQ(updated->object.spec.size, 2);
  EXPECT_EQ(updated->object.resource_version, written.resource_version);
}

// Any role that may connect may notify on the channel, and could read the notes sent on
// it. A note it forges (the next versions, a made-up change, signed without the schema's
// key) is not published, and the real commit of those versions still is.
TEST_F(PostgresStore, ANoteSignedWithoutTheSchemasKeyIsNotPublishedNorHidesTheRealCommit) {
  TwoProcesses two(bh(), db_path());
  auto& [watch, other, theirs] = two;
  ASSERT_TRUE(listeners_listen(db_path(), 2));
  auto o = theirs.create({}, {"theirs", 1});
  ASSERT_TRUE(watch.next_for(5s));

  auto forged = theirs.get({}, o.id);
  commit_record rec;
  ObjectRow row;
  row.meta.id = forged.id;
  row.meta.group = widget_kind.group;
  row.meta.kind = widget_kind.kind;
  row.meta.generation = forged.generation + 1;
  row.meta.resource_version = forged.resource_version + 1;
  row.spec = R"({"color":"forged","size":99})";
  rec.changes.push_back({ChangeType::Modified, row, object_change::spec});
  auto note =
      store::write_commit_note(999999, forged.resource_version, forged.resource_version + 100, &rec,
                               store::NoteKey("a key that is not the schema's key"));
  ASSERT_NE(note.find('{'), std::string::npos) << "the forged note carries no record";
  auto schema = test_schema_for(db_path());
  run_sql(schema, "SELECT pg_notify('" + store::pg_schema::notify_channel(schema) + "', $note$" +
                      note + "$note$)");
  auto written = theirs.update({}, o.id, {"theirs", 2});
  auto seen = watch.next_for(5s);
  ASSERT_TRUE(seen) << "the real commit was hidden";
  EXPECT_EQ(seen->object.spec.color, "theirs");
  EXPECT_EQ(seen->object.resource_version, written.resource_version);
}

// A commit too large for its note is read from the change log, and the commits after it
// wait for that read even when their notes carry them: a watch never gets a later
// change before an earlier one.
TEST_F(PostgresStore, ACommitTooLargeForItsNoteHoldsBackTheNotesAfterItUntilTheLogIsRead) {
  TwoProcesses two(bh(), db_path());
  auto& [watch, other, theirs] = two;
  auto large = theirs.create({}, {"large", 1});
  auto small = theirs.create({}, {"small", 1});
  ASSERT_TRUE(listeners_listen(db_path(), 2));
  ASSERT_TRUE(watch.next_for(5s));
  ASSERT_TRUE(watch.next_for(5s));

  faults::fail_change_log_reads = true;
  const int refused = faults::change_log_reads_failed;
  Labels many;
  for (int i = 0; i < 150; ++i) many["label-" + std::to_string(i)] = std::string(60, 'v');
  theirs.set_labels({}, large.id, many);
  ASSERT_TRUE(change_log_refused(refused + 1)) << "the large commit was never looked for";
  theirs.update({}, small.id, {"small", 2});  // its note carries it, after the gap
  ASSERT_TRUE(change_log_refused(refused + 3));
  EXPECT_FALSE(watch.next_for(0ms)) << "a change was delivered over one still unread";

  faults::fail_change_log_reads = false;
  auto first = watch.next_for(5s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->object.id, large.id);
  EXPECT_EQ(first->object.labels, many);
  auto second = watch.next_for(5s);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->object.id, small.id);
  EXPECT_EQ(second->object.spec.size, 2);
}

// This process's own commit above another's it has not been able to read yet waits for
// it too: the watch gets the earlier change first, and a position never passes it.
TEST_F(PostgresStore, AnOwnCommitAboveAnUnreadForeignOneWaitsForItInTheWatch) {
  TwoProcesses two(bh(), db_path());
  auto& [watch, other, theirs] = two;
  Widgets ours(bh(), widget_kind);
  Object<WidgetSpec, WidgetStatus> large, mine;
  ASSERT_NO_FATAL_FAILURE(one_each(two, ours, db_path(), large, mine));
  auto before = watch.resource_version();

  faults::fail_change_log_reads = true;
  const int refused = faults::change_log_reads_failed;
  Labels many;
  for (int i = 0; i < 150; ++i) many["label-" + std::to_string(i)] = std::string(60, 'v');
  theirs.set_labels({}, large.id, many);  // too large for its note: read from the log
  ASSERT_TRUE(change_log_refused(refused + 1)) << "the large commit was never looked for";
  auto written = ours.update({}, mine.id, {"mine", 2});  // committed all the same
  EXPECT_EQ(written.spec.size, 2);
  ASSERT_TRUE(change_log_refused(refused + 2));
  EXPECT_FALSE(watch.next_for(0ms)) << "this process's change was delivered over one unread";
  EXPECT_EQ(watch.resource_version(), before);

  faults::fail_change_log_reads = false;
  auto first = watch.next_for(5s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->object.id, large.id);
  auto second = watch.next_for(5s);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->object.id, mine.id);
  EXPECT_EQ(second->object.spec.size, 2);
}

/// Has the listeners keep the notes of what `theirs` commits next, as a process paused
/// before it read them would: `o` updated to size 2, then "p" created. Then trims the
/// change log through p, as the leader's retention would. Returns p.
Object<WidgetSpec, WidgetStatus> trim_past_notes_not_yet_heard(const std::filesystem::path& db_path,
                                                               Widgets& theirs, ObjectID o) {
  const int held = faults::listener_notes_held;
  faults::hold_listener_notes = true;
  theirs.update({}, o, {"o", 2});
  auto p = theirs.create({}, {"p", 1});
  auto until = std::chrono::steady_clock::now() + 5s;
  while (faults::listener_notes_held < held + 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  EXPECT_GE(faults::listener_notes_held, held + 2) << "this process's listener never heard them";
  const auto cut = std::to_string(p.resource_version);
  run_sql(test_schema_for(db_path), "DELETE FROM change_log WHERE resource_version <= " + cut +
                                        "; UPDATE beehive_meta SET value = " + cut +
                                        " WHERE key = 'change_log_horizon'");
  return p;
}

/// The watch's next changes are o at size 2, then p added (its size 1).
void expect_o_then_p(Stream<Change<WidgetSpec, WidgetStatus>>& watch, ObjectID o, ObjectID p) {
  auto first = watch.next_for(5s);
  ASSERT_TRUE(first) << (watch.done() ? watch.error().message() : "nothing came");
  EXPECT_EQ(first->type, ChangeType::Modified);
  EXPECT_EQ(first->object.id, o);
  EXPECT_EQ(first->object.spec.size, 2);
  auto second = watch.next_for(5s);
  ASSERT_TRUE(second) << (watch.done() ? watch.error().message() : "nothing came");
  EXPECT_EQ(second->type, ChangeType::Added);
  EXPECT_EQ(second->object.id, p);
}

// A process whose listener had not yet read the notes of the others' last commits (its
// process paused, its thread not run yet) when the change log was trimmed past them has
// lost nothing: the notes carry those commits. Its writer, finding the log short, waits
// until every note the server sent has been heard and publishes what they carry, instead
// of ending its watches as too old. Here it finds out at its own next commit, whose
// change comes after theirs.
TEST_F(PostgresStore, AnOwnCommitOverNotesNotYetHeardWhenTheLogWasTrimmedPastThemLosesNothing) {
  TwoProcesses two(bh(), db_path());
  auto& [watch, other, theirs] = two;
  Widgets ours(bh(), widget_kind);
  Object<WidgetSpec, WidgetStatus> o, mine;
  ASSERT_NO_FATAL_FAILURE(one_each(two, ours, db_path(), o, mine));

  auto p = trim_past_notes_not_yet_heard(db_path(), theirs, o.id);
  auto written = ours.update({}, mine.id, {"mine", 2});
  ASSERT_NO_FATAL_FAILURE(expect_o_then_p(watch, o.id, p.id));
  auto third = watch.next_for(5s);
  ASSERT_TRUE(third) << (watch.done() ? watch.error().message() : "nothing came");
  EXPECT_EQ(third->object.id, mine.id);
  EXPECT_EQ(third->object.resource_version, written.resource_version);
}

// The same, found out by the writer's look at the log after a transaction of its own
// saw the store's versions move (here an update of a missing object, which commits
// nothing).
TEST_F(PostgresStore, ALookAtALogTrimmedPastNotesNotYetHeardWaitsForThemAndLosesNothing) {
  TwoProcesses two(bh(), db_path());
  auto& [watch, other, theirs] = two;
  auto o = theirs.create({}, {"o", 1});
  ASSERT_TRUE(listeners_listen(db_path(), 2));
  ASSERT_TRUE(watch.next_for(5s));

  auto p = trim_past_notes_not_yet_heard(db_path(), theirs, o.id);
  EXPECT_ERRC(Widgets(bh(), widget_kind).update({}, ObjectID{1} << 40, {"none", 1}),
              errc::not_found);
  ASSERT_NO_FATAL_FAILURE(expect_o_then_p(watch, o.id, p.id));
  EXPECT_EQ(watch.resource_version(), p.resource_version);
  EXPECT_FALSE(watch.next_for(0ms));
  EXPECT_FALSE(watch.done());
}

// A listener whose connection went half-open (a partition dropping packets, no reset)
// hears nothing and fails nothing. Without a check of its own it would stay deaf until
// TCP gave up, and another process's commits would reach nobody here meanwhile. It asks
// the server after a second of silence and connects again when no answer comes.
TEST_F(PostgresStore, AListenerWhoseConnectionWentSilentConnectsAgainAndTheWatchHearsOthers) {
  Widgets mine(bh(), widget_kind);
  auto watch = mine.watch_list(ctx_);
  // Only this process's listener runs yet: it takes the fault.
  faults::deafen_listener = true;
  auto until = std::chrono::steady_clock::now() + 5s;
  while (faults::deafen_listener && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  ASSERT_FALSE(faults::deafen_listener) << "the listener never looked";
  Beehive other(
      postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = test_schema_for(db_path())}));
  auto written = Widgets(other, widget_kind).create({}, {"theirs", 1});
  auto sent = std::chrono::steady_clock::now();
  auto bound = store::pg::Listener::kPingAfter + store::pg::Listener::kStallLimit + 2s;
  auto seen = watch.next_for(bound);
  ASSERT_TRUE(seen) << "another process's commit never reached the watch";
  EXPECT_EQ(seen->object.id, written.id);
  EXPECT_LE(std::chrono::steady_clock::now() - sent, bound);
}

// Slug-keyed writes racing from two processes (two stores on one schema, each with its
// own writer and sessions): get_or_create inserts once and every loser gets the winner's
// row; create's losers get already_exists, never the database's unique-key error.
TEST_F(PostgresStore, SlugWritesRacingFromTwoProcessesInsertOnceAndLosersSeeTheWinner) {
  Beehive other(
      postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = test_schema_for(db_path())}));
  Widgets mine(bh(), widget_kind), theirs(other, widget_kind);
  constexpr int kThreads = 8;
  for (int round = 0; round < 10; ++round) {
    auto slug = "race-" + std::to_string(round);
    std::atomic<int> created{0}, made{0}, refused{0}, failed{0};
    std::vector<ObjectID> ids(kThreads);
    run_together(kThreads, [&](int i) {
      auto& w = i % 2 ? theirs : mine;
      auto [o, c] = w.get_or_create(ctx_, slug, {"goc", i});
      ids[i] = o.id;
      created += c;
      try {
        w.create(ctx_, {"create", i}, with_slug(slug + "-c"));
        ++made;
      } catch (const Error& e) {
        ++(e.code() == errc::already_exists ? refused : failed);
      }
    });
    EXPECT_EQ(created.load(), 1) << round;
    for (auto id : ids) EXPECT_EQ(id, ids[0]) << round;
    EXPECT_EQ(made.load(), 1) << round;
    EXPECT_EQ(refused.load(), kThreads - 1) << round;
    EXPECT_EQ(failed.load(), 0) << round;
  }
  EXPECT_EQ(mine.list(ctx_).size(), 20u);
}

TEST_F(PostgresStore, AWriteBehindAnotherProcesssTransactionGivesUpAtItsDeadlineWritingNothing) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  // Another process holds the store's write lock (its counters) in an open transaction.
  OpenTransaction other(test_schema_for(db_path()),
                        "SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE");
  auto began = std::chrono::steady_clock::now();
  EXPECT_ERRC(w.update(Context{}.with_timeout(std::chrono::milliseconds(300)), o.id, {"a", 2}),
              errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(3));
  // The writer stops waiting for the lock (its wait is cancelled) before the lock is
  // released, so that the writes after it run on a connection whose wait was cancelled.
  auto waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'beehive " +
                 test_schema_for(db_path()) + "' AND wait_event_type = 'Lock'";
  EXPECT_TRUE(eventually([&] { return other.returns(waiting, "0"); }));
  other.commit();
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 1) << "the abandoned write was applied";
  EXPECT_EQ(w.update(ctx_, o.id, {"a", 3}).spec.size, 3);
}

// A write that gave up waiting for another process's lock closed its connection inside
// the transaction it had begun. The next statement on that connection is not always a
// write: here the watch's poll for the other process's commits, which must connect anew
// rather than fail for ever.
TEST_F(PostgresStore, AfterAWriteGaveUpWaitingTheWatchStillHearsOfOtherProcesses) {
  Widgets mine(bh(), widget_kind);
  auto stop = bh().start(ctx_);
  auto watch = mine.watch_list(ctx_);
  {
    OpenTransaction other(
        test_schema_for(db_path()),
        "SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE");
    EXPECT_ERRC(mine.create(Context{}.with_timeout(300ms), {"mine", 1}), errc::deadline_exceeded);
    // Its wait is cancelled while the lock is still held.
    auto waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'beehive " +
                   test_schema_for(db_path()) + "' AND wait_event_type = 'Lock'";
    EXPECT_TRUE(eventually([&] { return other.returns(waiting, "0"); }));
  }
  Beehive other(
      postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = test_schema_for(db_path())}));
  auto theirs = Widgets(other, widget_kind).create(ctx_, {"theirs", 2});
  std::optional<ObjectID> seen;
  while (auto ch = watch.next_for(5s))
    if ((seen = ch->object.id) == theirs.id) break;
  EXPECT_EQ(seen, theirs.id) << "the other process's creation never reached the watch";
  stop(ctx_);
}

// A `within` block opens by taking the store's write lock: behind another process's
// transaction it gives up at its caller's deadline, before any of its code runs, and
// the next block commits.
TEST_F(PostgresStore, AWithinBlockBehindAnotherProcesssTransactionGivesUpAtItsDeadline) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  Widgets w(bh(), widget_kind);
  bool ran = false;
  {
    OpenTransaction other(
        test_schema_for(db_path()),
        "SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE");
    auto began = std::chrono::steady_clock::now();
    EXPECT_ERRC(cc.within(Context{}.with_timeout(300ms),
                          [&](const Context& tx) {
                            ran = true;
                            w.create(tx, {"in", 1}, with_slug("in"));
                          }),
                errc::deadline_exceeded);
    EXPECT_LT(std::chrono::steady_clock::now() - began, 3s);
  }
  EXPECT_FALSE(ran) << "the block ran without the lock";
  EXPECT_ERRC(w.get_by_slug(ctx_, "in"), errc::not_found);
  cc.within(ctx_, [&](const Context& tx) { w.create(tx, {"next", 2}, with_slug("next")); });
  EXPECT_EQ(w.get_by_slug(ctx_, "next").spec.size, 2);
}

// A cancel request travels on a connection of its own and can land after the statement
// it was meant for ended by itself: here the other process's lock comes free just after
// the writer gave up waiting for it, and the cancel comes late. It must not cancel
// whatever that session runs next: the next write waits for a lock when it lands.
TEST_F(PostgresStore, ACancelThatLandsLateFailsNoLaterWrite) {
  namespace faults = store::pg::faults;
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  const auto schema = test_schema_for(db_path());
  const std::string lock =
      "SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE";
  faults::cancel_delay_ms = 500;
  const int sent = faults::cancels_sent.load(), delivered = faults::cancels_delivered.load();
  {
    OpenTransaction other(schema, lock);
    EXPECT_ERRC(w.update(Context{}.with_timeout(200ms), o.id, {"a", 2}), errc::deadline_exceeded);
    ASSERT_TRUE(eventually([&] { return faults::cancels_sent.load() > sent; }));
  }  // committed: the writer gets the lock before its cancel is sent
  OpenTransaction again(schema, lock);
  auto next = std::async(std::launch::async, [&] { return w.update(ctx_, o.id, {"a", 3}); });
  ASSERT_TRUE(eventually([&] { return faults::cancels_delivered.load() > delivered; }));
  again.commit();
  EXPECT_NO_THROW(EXPECT_EQ(next.get().spec.size, 3));
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 3);
}

// On PostgreSQL a read can wait: here for another session's lock (an operator's LOCK
// TABLE, a migration). It gives up at its caller's deadline, like a write, whether it
// waits for the database or for a reader connection (six callers, four connections);
// reads run again once the lock is gone.
// A process paused inside a write transaction (here a within block that waits) holds the
// store's write lock for one lease at most: the server ends its idle transaction, the
// other processes' writes go through, and the block fails whole when it resumes.
TEST_F(PostgresStore, AProcessPausedInsideAWriteTransactionHoldsTheOthersUpForALeaseAtMost) {
  constexpr auto lease = 1000ms;
  postgres::Options opts{.schema = test_schema_for(dir_.file("paused.db")), .lease = lease};
  Beehive a(postgres::open(std::getenv("BEEHIVE_TEST_PG"), opts));
  Beehive b(postgres::open(std::getenv("BEEHIVE_TEST_PG"), opts));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      a, widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  Widgets wa(a, widget_kind), wb(b, widget_kind);
  auto o = wb.create(ctx_, {"b", 1});

  std::promise<void> inside, resume;
  std::thread paused([&] {
    EXPECT_ERRC(cc.within(ctx_,
                          [&](const Context& tx) {
                            wa.create(tx, {"a", 1}, with_slug("before-pause"));
                            inside.set_value();
                            resume.get_future().wait();
                            wa.create(tx, {"a", 2}, with_slug("after-pause"));
                          }),
                errc::store);
  });
  inside.get_future().wait();
  // The other process's writes: one may give up after waiting a lease for the lock
  // (errc::store); one goes through once the server has ended the paused transaction.
  auto began = std::chrono::steady_clock::now();
  bool written = false;
  while (!written && std::chrono::steady_clock::now() - began < 10s) try {
      wb.update(ctx_, o.id, {"b", 2});
      written = true;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::store)) << e.what();
    }
  EXPECT_TRUE(written);
  EXPECT_LE(std::chrono::steady_clock::now() - began, lease + 2s);
  resume.set_value();
  paused.join();
  EXPECT_ERRC(wb.get_by_slug(ctx_, "before-pause"), errc::not_found);
  EXPECT_ERRC(wb.get_by_slug(ctx_, "after-pause"), errc::not_found);
  EXPECT_EQ(wa.create(ctx_, {"a", 3}, with_slug("later")).spec.size, 3);  // a writes again
}

// A reconcile of one beehive that writes through another beehive's Client is an ordinary
// caller there, with a fresh context or with the pass's own: its writes are not fenced by
// its own leadership term (here 1), which the other's leader (here in term 2) would take
// for an ended one of its own.
TEST_F(PostgresStore, AReconcileWritesToAnotherBeehiveAsAnyCallerDoes) {
  postgres::Options other_schema{.schema = test_schema_for(dir_.file("other-plane.db"))};
  {
    Beehive first(postgres::open(std::getenv("BEEHIVE_TEST_PG"), other_schema));
    first.start(ctx_)(ctx_);  // term 1, handed over at its stop
  }
  Beehive other(postgres::open(std::getenv("BEEHIVE_TEST_PG"), other_schema));
  auto stop_other = other.start(ctx_);
  ASSERT_TRUE(eventually([&] { return other.is_leader(); }));  // term 2
  Widgets there(other, gadget_kind);

  std::atomic<int> written{0};
  std::string refused;
  std::mutex mu;
  register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind,
      [&](const Context& rctx, ControllerClient<WidgetStatus>&,
          const Object<WidgetSpec, WidgetStatus>& o) {
        for (const Context* c : {&rctx, static_cast<const Context*>(&ctx_)}) try {
            there.create(*c, {o.spec.color, o.spec.size});
            ++written;
          } catch (const Error& e) {
            std::lock_guard lk(mu);
            refused += std::string(e.what()) + "\n";
          }
        return Result{};
      });
  Widgets(bh(), widget_kind).create(ctx_, {"mirrored", 1});
  auto stop_this = bh().start(ctx_);
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lk(mu);
    return written == 2 || !refused.empty();
  }));
  EXPECT_EQ(written.load(), 2);
  EXPECT_EQ(refused, "");
  EXPECT_EQ(there.list(ctx_).size(), 2u);
  stop_this(ctx_);
  stop_other(ctx_);
}

TEST_F(PostgresStore, AReadBehindAnotherSessionsLockGivesUpAtItsCallersDeadline) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  OpenTransaction other(test_schema_for(db_path()), "LOCK TABLE objects IN ACCESS EXCLUSIVE MODE");
  std::atomic<int> gave_up{0};
  auto began = std::chrono::steady_clock::now();
  run_together(6, [&](int t) {
    auto ctx = Context{}.with_timeout(std::chrono::milliseconds(300));
    try {
      if (t % 2)
        w.get(ctx, o.id);
      else
        w.list(ctx);
      ADD_FAILURE() << "a read went through the lock";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::deadline_exceeded) << e.what();
      ++gave_up;
    }
  });
  EXPECT_EQ(gave_up, 6);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(3))
      << "the reads waited for the lock timeout (the lease), not for their callers";
  other.commit();
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 1);
  EXPECT_EQ(w.list(ctx_).size(), 1u);
}

// PostgreSQL aborts a transaction whose statement fails. A read or a write that fails
// inside a within block (here behind another session's lock, past lock_timeout: the
// lease), on a connection that has not prepared its statements yet, fails alone, as on
// SQLite: the block goes on, and what it wrote before and writes after commits.
TEST_F(PostgresStore, AReadThatFailsInsideAWithinBlockFailsAlone) {
  const auto schema = test_schema_for(dir_.file("read_fails.db"));
  Beehive bh(postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = schema, .lease = 500ms}));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh, widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  Widgets w(bh, widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  std::optional<OpenTransaction> other;
  cc.within(ctx_, [&](const Context& tx) {
    auto before = w.create(tx, {"before", 2}, with_slug("before"));
    // The references' table: the block's own create holds a lock on the objects'.
    other.emplace(schema, "LOCK TABLE refs IN ACCESS EXCLUSIVE MODE");
    EXPECT_ERRC(cc.add_dependency(tx, o.id, before.id), errc::store);
    EXPECT_ERRC(w.list_dependencies(tx, o.id), errc::store);
    other->commit();
    EXPECT_EQ(w.list_dependencies(tx, o.id).size(), 0u);
    cc.add_dependency(tx, o.id, before.id);
    w.create(tx, {"after", 3}, with_slug("after"));
  });
  EXPECT_EQ(w.list(ctx_).size(), 3u);
  EXPECT_EQ(w.list_dependencies(ctx_, o.id).size(), 1u);
}

// The same for the reads a call makes before it writes (is the write converged?) and
// for the relation lookups: each gives up at its caller's deadline, not at the lock's end.
TEST_F(PostgresStore, LookupsAndTheReadsBeforeAWriteGiveUpAtTheirCallersDeadline) {
  const auto schema = test_schema_for(dir_.file("lookups.db"));
  Beehive bh(postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = schema}));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh, widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  Widgets w(bh, widget_kind);
  auto o = w.create(ctx_, {"a", 1}, with_finalizers({"f"}));
  const std::map<std::string, std::function<void(const Context&)>> calls = {
      {"get_owner", [&](auto& ctx) { w.get_owner(ctx, o.id); }},
      {"list_dependencies", [&](auto& ctx) { w.list_dependencies(ctx, o.id); }},
      {"list_dependents", [&](auto& ctx) { cc.list_dependents(ctx, o.id); }},
      {"list_owned", [&](auto& ctx) { w.list_owned(ctx, o.id); }},
      {"update (converged)",
       [&](auto& ctx) {
         w.update(ctx, o.id, {"a", 1});
       }},
      {"update_status", [&](auto& ctx) { cc.update_status(ctx, o.id, 1, WidgetStatus{true}); }},
      {"set_condition",
       [&](auto& ctx) {
         cc.set_condition(ctx, o.id, {"Ready", ConditionStatus::True});
       }},
      {"add_finalizer", [&](auto& ctx) { cc.add_finalizer(ctx, o.id, "f"); }},
      {"add_dependency", [&](auto& ctx) { cc.add_dependency(ctx, o.id, o.id); }},
      {"has_incoming_refs", [&](auto& ctx) { cc.has_incoming_refs(ctx, o.id); }},
  };
  OpenTransaction other(schema, "LOCK TABLE objects, refs IN ACCESS EXCLUSIVE MODE");
  std::map<std::string, std::future<void>> running;
  for (auto& [name, call] : calls)
    running[name] = std::async(std::launch::async, [&call = call] {
      call(Context{}.with_timeout(std::chrono::milliseconds(300)));
    });
  for (auto& [name, f] : running)  // a call still waiting waits for the lock's end
    EXPECT_EQ(f.wait_for(5s), std::future_status::ready) << name << " waited past its deadline";
  other.commit();
  for (auto& [name, f] : running) {
    SCOPED_TRACE(name);
    EXPECT_ERRC(f.get(), errc::deadline_exceeded);
  }
  EXPECT_EQ(w.list_dependencies(ctx_, o.id).size(), 0u);  // reads run again
}

// A group commit sends its writes' statements with its COMMIT. When the database refuses
// one of them there (here a CHECK constraint the library knows nothing of), the group runs
// again with each write's outcome learnt before the next: the refused write fails alone,
// every other write of the group lands exactly once.
TEST_F(PostgresStore, AWriteTheDatabaseRefusesInAGroupFailsAloneAndTheOthersLandOnce) {
  Widgets w(bh(), widget_kind);
  w.create(ctx_, {"first", 1}, with_slug("first"));  // the statements are prepared
  run_sql(test_schema_for(db_path()),
          "ALTER TABLE objects ADD CONSTRAINT no_poison CHECK (spec NOT LIKE '%poison%')");
  auto transactions = [&] {
    caf::scoped_actor self{bh().store_writer()->home_system(), true};
    std::uint64_t n = 0;
    self->request(bh().store_writer(), caf::infinite, inspect_atom::value)
        .receive([&](const store_writer_state& s) { n = s.transactions; }, [](caf::error&) {});
    return n;
  };
  constexpr int threads = 8, each = 25;
  auto before = transactions();
  std::atomic<int> refused{0}, other_failures{0};
  run_together(threads, [&](int t) {
    for (int i = 0; i < each; ++i) {
      bool poison = t % 2 == 0 && i % 5 == 2;
      auto name = (poison ? "poison-" : "ok-") + std::to_string(t) + "-" + std::to_string(i);
      try {
        w.create(ctx_, {name, i}, with_slug(name));
      } catch (const Error& e) {
        if (poison && e.code() == errc::store)
          ++refused;
        else
          ++other_failures, ADD_FAILURE() << name << ": " << e.what();
      }
    }
  });
  EXPECT_EQ(refused, threads / 2 * (each / 5));
  EXPECT_EQ(other_failures, 0);
  // The writes shared transactions (else this tested the lone path).
  EXPECT_LT(transactions() - before, static_cast<std::uint64_t>(threads * each));
  auto all = w.list(ctx_);
  std::set<std::string> slugs;
  for (auto& o : all) {
    ASSERT_TRUE(o.slug);
    EXPECT_EQ(o.slug->find("poison"), std::string::npos);
    slugs.insert(*o.slug);
  }
  EXPECT_EQ(slugs.size(), all.size()) << "a write landed twice";
  EXPECT_EQ(all.size(), static_cast<std::size_t>(1 + threads * each - refused));
}

/// Round trips of the group engine's connection so far.
std::uint64_t round_trips(GroupEngine& g) {
  return dynamic_cast<store::pg::PgWriter&>(g.engine->writer()).round_trips();
}

// A write's statement joins the one the write before it queued (one statement instead
// of two) only when that is still the last one queued: never a savepoint queued since,
// whatever an earlier transaction left behind.
TEST_F(PostgresStore, AStatementJoinsOnlyTheStatementItsWriteQueued) {
  GroupEngine g(db_path());
  auto warm = g.commit({GroupEngine::create("warm")});
  ASSERT_TRUE(warm[0].reply) << warm[0].what;
  auto id = warm[0].reply->row.meta.id;
  auto before = round_trips(g);
  auto writes =
      g.commit({store::WriteOp{log_requeue_request{widget_kind, id}}, GroupEngine::create("b")});
  for (auto& w : writes) EXPECT_TRUE(w.reply) << w.what;
  // BEGIN, then the writes with the COMMIT: no attempt refused and run again.
  EXPECT_EQ(round_trips(g) - before, 2u);
}

// A write the database refuses inside its own work (here a status CHECK constraint,
// found when the write reads its row back) is rolled back to its savepoint, alone, on a
// connection that has not prepared that savepoint's release yet: the transaction is
// aborted then, and a release parsed before the rollback ran would be refused too,
// failing the whole group.
TEST_F(PostgresStore, AWriteRefusedInsideItsOwnWorkFailsAloneOnAFreshConnection) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"o", 1});
  run_sql(test_schema_for(db_path()),
          "ALTER TABLE objects ADD CONSTRAINT no_poison CHECK (status NOT LIKE '%poison%')");
  GroupEngine g(db_path());  // its connection has prepared nothing
  auto writes =
      g.commit({store::WriteOp{update_status_request{widget_kind, o.id, 1, R"({"poison":true})"}},
                GroupEngine::create("after")});
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_FALSE(writes[0].reply);
  EXPECT_EQ(writes[0].code, errc::store);
  EXPECT_NE(writes[0].what.find("no_poison"), std::string::npos) << writes[0].what;
  EXPECT_TRUE(writes[1].reply) << writes[1].what;
  EXPECT_EQ(w.get_by_slug(ctx_, "after").spec.color, "after");
  EXPECT_FALSE(w.get(ctx_, o.id).status.has_value());
}

// What a write costs in round trips, once its statements are prepared: a group of
// creates, BEGIN with the store's lock, then every write's statements with the COMMIT;
// an update, its row read with BEGIN and the lock, then the COMMIT.
TEST_F(PostgresStore, AGroupCommitAndAnUpdateCostTwoRoundTripsEach) {
  GroupEngine g(db_path());
  for (auto& w : g.commit({GroupEngine::create("warm-1"), GroupEngine::create("warm-2")}))
    ASSERT_TRUE(w.reply) << w.what;
  auto before = round_trips(g);
  auto writes = g.commit({GroupEngine::create("a"), GroupEngine::create("b"),
                          GroupEngine::create("c"), GroupEngine::create("d")});
  for (auto& w : writes) ASSERT_TRUE(w.reply) << w.what;
  EXPECT_EQ(round_trips(g) - before, 2u);

  auto id = writes[0].reply->row.meta.id;
  auto update = [&](int size) {
    return store::WriteOp{
        update_request{widget_kind, id, R"({"color":"a","size":)" + std::to_string(size) + "}"}};
  };
  g.engine->execute(update(2), {});  // its statements prepared
  before = round_trips(g);
  auto row = g.engine->execute(update(3), {}).row;
  EXPECT_EQ(round_trips(g) - before, 2u);
  EXPECT_EQ(row.meta.generation, 3);
  Widgets w(bh(), widget_kind);
  EXPECT_EQ(w.get(ctx_, id).spec.size, 3);
}

/// Whether a session of its own could take the store's write lock (its counters) within
/// `wait`: false while another transaction holds it for longer.
bool write_lock_free(const std::string& schema, std::chrono::milliseconds wait) {
  PGconn* c = PQconnectdb(std::getenv("BEEHIVE_TEST_PG"));
  EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  auto sql = "BEGIN; SET LOCAL lock_timeout = " + std::to_string(wait.count()) +
             "; SET LOCAL search_path TO \"" + schema +
             "\"; SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE";
  PGresult* r = PQexec(c, sql.c_str());
  bool taken = PQresultStatus(r) == PGRES_TUPLES_OK;
  PQclear(r);
  PQfinish(c);
  return taken;
}

/// A session of its own outside any transaction, for queries on the server's view of the
/// others (pg_stat_activity, which a transaction would see as of its first look).
class Probe {
 public:
  Probe() : c_(PQconnectdb(std::getenv("BEEHIVE_TEST_PG"))) {
    EXPECT_EQ(PQstatus(c_), CONNECTION_OK) << PQerrorMessage(c_);
  }
  ~Probe() { PQfinish(c_); }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  /// Whether `sql` returns `want` in its first cell.
  bool returns(const std::string& sql, const std::string& want) {
    return first_cell_is(c_, sql, want);
  }

 private:
  PGconn* c_;
};

/// Sessions named `app` waiting for a lock.
std::string lock_waiters(const std::string& app) {
  return "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app +
         "' AND wait_event_type = 'Lock'";
}

// Writes that keep coming begin their next transaction with the last commit: the next
// group costs one round trip, and its versions follow the last group's.
TEST_F(PostgresStore, ATransactionBegunWithTheLastCommitCostsTheNextGroupOneRoundTrip) {
  GroupEngine g(db_path());
  auto first = g.commit_beginning_ahead();
  ASSERT_TRUE(first[0].reply && first[1].reply);
  auto before = round_trips(g);
  auto second = g.commit({GroupEngine::create("c"), GroupEngine::create("d")});
  for (auto& w : second) ASSERT_TRUE(w.reply) << w.what;
  EXPECT_EQ(round_trips(g) - before, 1u) << "the next transaction was not begun ahead";
  EXPECT_EQ(second[0].reply->row.meta.resource_version,
            first[1].reply->row.meta.resource_version + 1);
  Widgets w(bh(), widget_kind);
  for (auto slug : {"a", "b", "c", "d"}) EXPECT_EQ(w.get_by_slug(ctx_, slug).spec.color, slug);
}

// A transaction begun ahead holds the store's write lock, which other processes wait for:
// the writer lets it go as soon as it is idle, and writes on afterwards.
TEST_F(PostgresStore, ATransactionBegunAheadLetsTheWriteLockGoWhenTheWriterIsIdle) {
  GroupEngine g(db_path());
  const auto schema = test_schema_for(db_path());
  g.engine->writer().begin_ahead();
  for (auto& w : g.commit({GroupEngine::create("a"), GroupEngine::create("b")}))
    ASSERT_TRUE(w.reply) << w.what;
  // The transaction begun ahead has run its statements (after the commit was answered).
  Probe probe;
  ASSERT_TRUE(eventually([&] {
    return probe.returns(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
        "'beehive " +
            schema + "' AND state = 'idle in transaction'",
        "1");
  })) << "the next transaction was not begun ahead";
  EXPECT_FALSE(write_lock_free(schema, 50ms));
  g.engine->writer().idle();
  EXPECT_TRUE(write_lock_free(schema, 5000ms));
  auto later = g.commit({GroupEngine::create("c")});
  ASSERT_TRUE(later[0].reply) << later[0].what;
  EXPECT_EQ(Widgets(bh(), widget_kind).list(ctx_).size(), 3u);
}

// Through the store: once callers writing at once stop, the writer is idle and the
// store's write lock is free for another process at once, not after the server's idle
// timeout (the lease, 10 s here; the probe waits 3 s at most).
TEST_F(PostgresStore, AWriterLetsTheWriteLockGoOnceWritesAtOnceStop) {
  Widgets w(bh(), widget_kind);
  const int threads = 8, each = 25;
  std::vector<std::thread> callers;
  std::atomic<int> failed{0};
  for (int t = 0; t < threads; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < each; ++i) {
        try {
          w.create(ctx_, {"w" + std::to_string(t), i});
        } catch (const std::exception&) {
          failed.fetch_add(1);
        }
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_TRUE(write_lock_free(test_schema_for(db_path()), 3000ms))
      << "the write lock is still held after the writes stopped";
  EXPECT_EQ(w.list(ctx_).size(), static_cast<std::size_t>(threads * each));
}

/// A caller that has given up already: its write is never applied.
struct GoneCaller final : store::WaitingCaller {
  bool abandoned() const override { return true; }
  bool claim() override { return false; }
};

// Another process that queued for the store's write lock during a commit gets it before
// the transaction begun with that commit, which takes the lock only if it is free: the
// commit is answered, the next write waits its turn (a write whose callers give up
// meanwhile writes nothing), then commits.
TEST_F(PostgresStore, AProcessThatQueuedForTheLockDuringACommitHasItBeforeTheNextWrite) {
  GroupEngine g(db_path());
  const auto schema = test_schema_for(db_path());
  for (auto& w : g.commit({GroupEngine::create("warm-1"), GroupEngine::create("warm-2")}))
    ASSERT_TRUE(w.reply) << w.what;
  g.engine->session_step(store::SessionCmd::begin);
  g.engine->execute(GroupEngine::create("in-session"), {});
  // Another process queues for the lock this session holds, as a beehive process's
  // write transaction does: the queue, then the counters.
  const auto other_app = "other " + schema, writer_app = "beehive " + schema;
  std::unique_ptr<OpenTransaction> other;
  std::thread taker([&] {
    other = std::make_unique<OpenTransaction>(
        schema, "SET LOCAL application_name = '" + other_app + "'; " +
                    store::pg::statement(store::pg::Q::lock_counters).sql);
  });
  std::thread writer;
  struct Join {
    store::WriteEngine& engine;
    std::thread& t;
    std::thread& w;
    std::unique_ptr<OpenTransaction>& other;
    ~Join() {
      engine.abort_session(false);  // on a failed assertion: lets `other` through
      if (t.joinable()) t.join();
      if (other) other->commit();
      if (w.joinable()) w.join();
    }
  } join{*g.engine, taker, writer, other};
  Probe probe;
  ASSERT_TRUE(eventually([&] { return probe.returns(lock_waiters(other_app), "1"); }));
  g.engine->writer().begin_ahead();
  g.engine->session_step(store::SessionCmd::commit);
  taker.join();  // `other` has the lock: the transaction begun ahead did not take it
  GoneCaller gone;
  auto op = GroupEngine::create("gave-up");
  std::vector<store::GroupedWrite> writes{{&op, nullptr, &gone}};
  g.engine->commit_group(writes, {});
  EXPECT_FALSE(writes[0].reply);
  std::vector<store::GroupedWrite> after;
  writer = std::thread([&] { after = g.commit({GroupEngine::create("after")}); });
  ASSERT_TRUE(eventually([&] { return probe.returns(lock_waiters(writer_app), "1"); }))
      << "the next write did not wait for the process that asked first";
  other->commit();
  writer.join();
  ASSERT_EQ(after.size(), 1u);
  ASSERT_TRUE(after[0].reply) << after[0].what;
  Widgets w(bh(), widget_kind);
  EXPECT_EQ(w.get_by_slug(ctx_, "in-session").spec.color, "in-session");
  EXPECT_ERRC(w.get_by_slug(ctx_, "gave-up"), errc::not_found);
  EXPECT_EQ(w.list(ctx_).size(), 4u);
}

// The connection of a transaction begun ahead may go before the writer takes it up: a
// read on the writer's connection (as publishing another process's commits makes) then
// connects anew rather than failing for a transaction nothing was written in, and the
// next group commits.
TEST_F(PostgresStore, ATransactionBegunAheadWhoseConnectionWentCostsTheNextCallsNothing) {
  GroupEngine g(db_path());
  for (auto& w : g.commit({GroupEngine::create("warm-1"), GroupEngine::create("warm-2")}))
    ASSERT_TRUE(w.reply) << w.what;
  faults::drop_after_begin_ahead = 1;
  g.engine->writer().begin_ahead();
  auto first = g.commit({GroupEngine::create("a"), GroupEngine::create("b")});
  EXPECT_EQ(faults::drop_after_begin_ahead.load(), 0) << "the fault was not reached";
  for (auto& w : first) ASSERT_TRUE(w.reply) << w.what;
  store::ReadOp read;
  read.what = store::ReadOp::get;
  read.gk = widget_kind;
  read.id = first[0].reply->row.meta.id;
  EXPECT_EQ(g.engine->read(read).rows.size(), 1u);
  auto next = g.commit({GroupEngine::create("c"), GroupEngine::create("d")});
  for (auto& w : next) ASSERT_TRUE(w.reply) << w.what;
  EXPECT_EQ(next[0].reply->row.meta.resource_version,
            first[1].reply->row.meta.resource_version + 1);
  EXPECT_EQ(Widgets(bh(), widget_kind).list(ctx_).size(), 6u);
}

// The server may end the session of a transaction begun ahead after a read took up its
// results (an operator, a restart): the next group connects anew and commits, with the
// versions the counters hold, not the ones read in the session that went.
TEST_F(PostgresStore, ATransactionBegunAheadWhoseSessionTheServerEndedIsNotTakenUp) {
  GroupEngine g(db_path());
  const auto schema = test_schema_for(db_path());
  auto first = g.commit_beginning_ahead();
  ASSERT_TRUE(first[0].reply && first[1].reply);
  store::ReadOp read;
  read.what = store::ReadOp::get;
  read.gk = widget_kind;
  read.id = first[0].reply->row.meta.id;
  EXPECT_EQ(g.engine->read(read).rows.size(), 1u);  // takes up what was begun ahead
  Probe probe;
  const auto ahead = "FROM pg_stat_activity WHERE application_name = 'beehive " + schema +
                     "' AND state = 'idle in transaction'";
  // Polled: the BEGIN sent with the COMMIT may not have reached the server yet.
  ASSERT_TRUE(eventually([&] {
    return probe.returns("SELECT bool_and(pg_terminate_backend(pid, 10000)) " + ahead, "t");
  }));
  // Meanwhile another process commits: the counters move on.
  auto theirs = Widgets(bh(), widget_kind).create(ctx_, {"theirs", 1});
  try {
    g.engine->read(read);  // finds the connection gone
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::store)) << e.what();
  }
  auto before = round_trips(g);
  auto next = g.commit({GroupEngine::create("c")});
  ASSERT_TRUE(next[0].reply) << next[0].what;
  // Its own BEGIN, then the COMMIT: no attempt on what the old session had begun.
  EXPECT_EQ(round_trips(g) - before, 2u);
  EXPECT_GT(next[0].reply->row.meta.resource_version, theirs.resource_version);
  EXPECT_EQ(Widgets(bh(), widget_kind).list(ctx_).size(), 6u);
}

// The same for a lone write (a within block's, a maintenance write), which has no group
// to run again: the session the server ended is noticed before the write is sent, and
// the write commits on a new connection.
TEST_F(PostgresStore, ALoneWriteAfterTheServerEndedTheTransactionBegunAheadCommits) {
  GroupEngine g(db_path());
  const auto schema = test_schema_for(db_path());
  auto first = g.commit_beginning_ahead();
  ASSERT_TRUE(first[0].reply && first[1].reply);
  Probe probe;
  const auto ahead = "FROM pg_stat_activity WHERE application_name = 'beehive " + schema +
                     "' AND state = 'idle in transaction'";
  // Polled: the BEGIN sent with the COMMIT may not have reached the server yet.
  ASSERT_TRUE(eventually([&] {
    return probe.returns("SELECT bool_and(pg_terminate_backend(pid, 10000)) " + ahead, "t");
  }));
  auto theirs = Widgets(bh(), widget_kind).create(ctx_, {"theirs", 1});
  store::WriteReply reply;
  ASSERT_NO_THROW(reply = g.engine->execute(GroupEngine::create("c"), {}));
  EXPECT_GT(reply.row.meta.resource_version, theirs.resource_version);
  EXPECT_EQ(Widgets(bh(), widget_kind).list(ctx_).size(), 6u);
}

// The statements of a group travel with its COMMIT: when the connection is lost before
// the COMMIT, nothing committed, and the group runs again on a new connection.
TEST_F(PostgresStore, AGroupWhoseConnectionIsLostBeforeItsCommitRunsAgainAndLandsOnce) {
  GroupEngine g(db_path());
  faults::drop_before_commit = 1;
  auto writes = g.commit(
      {GroupEngine::create("g-1"), GroupEngine::create("g-2"), GroupEngine::create("g-3")});
  EXPECT_EQ(faults::drop_before_commit.load(), 0) << "the fault was not reached";
  for (auto& w : writes) EXPECT_TRUE(w.reply) << w.what;
  EXPECT_EQ(g.engine->transactions(), 1u);
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0].changes.size(), 3u);
  Widgets w(bh(), widget_kind);
  EXPECT_EQ(w.list(ctx_).size(), 3u);
  for (auto slug : {"g-1", "g-2", "g-3"}) EXPECT_EQ(w.get_by_slug(ctx_, slug).spec.color, slug);
}

// A write the database refuses at the group's COMMIT (a constraint the library does not
// know) fails alone: the group runs again write by write; one commit, one record, with
// the others' changes only.
TEST_F(PostgresStore, AWriteRefusedAtTheGroupsCommitFailsAloneWithTheOthersCommittedOnce) {
  Widgets w(bh(), widget_kind);
  w.create(ctx_, {"first", 1});  // the tables exist
  run_sql(test_schema_for(db_path()),
          "ALTER TABLE objects ADD CONSTRAINT no_poison CHECK (spec NOT LIKE '%poison%')");
  GroupEngine g(db_path());
  auto missing = store::WriteOp{update_request{widget_kind, 999999, R"({"color":"x"})"}};
  auto writes = g.commit({GroupEngine::create("ok-1"), GroupEngine::create("poison"), missing,
                          GroupEngine::create("ok-2")});
  EXPECT_TRUE(writes[0].reply) << writes[0].what;
  EXPECT_FALSE(writes[1].reply);
  EXPECT_EQ(writes[1].code, errc::store);
  EXPECT_NE(writes[1].what.find("no_poison"), std::string::npos) << writes[1].what;
  EXPECT_FALSE(writes[2].reply);
  EXPECT_EQ(writes[2].code, errc::not_found);
  EXPECT_TRUE(writes[3].reply) << writes[3].what;
  EXPECT_EQ(g.engine->transactions(), 1u);
  ASSERT_EQ(g.records.size(), 1u);
  ASSERT_EQ(g.records[0].changes.size(), 2u);
  EXPECT_EQ(g.records[0].changes[0].row.meta.slug, "ok-1");
  EXPECT_EQ(g.records[0].changes[1].row.meta.slug, "ok-2");
  EXPECT_EQ(w.list(ctx_).size(), 3u);
  EXPECT_ERRC(w.get_by_slug(ctx_, "poison"), errc::not_found);
}

// A batched group leaves slugs to the database's unique constraint (no lookup round
// trip); a taken slug, stored before or earlier in the same group, is still
// already_exists for that create alone.
TEST_F(PostgresStore, TakenSlugsInABatchedGroupAreAlreadyExistsForThatCreateAlone) {
  Widgets w(bh(), widget_kind);
  w.create(ctx_, {"taken", 1}, with_slug("taken"));
  GroupEngine g(db_path());
  auto writes = g.commit({GroupEngine::create("s"), GroupEngine::create("s"),
                          GroupEngine::create("taken"), GroupEngine::create("t")});
  EXPECT_TRUE(writes[0].reply) << writes[0].what;
  EXPECT_FALSE(writes[1].reply);
  EXPECT_EQ(writes[1].code, errc::already_exists) << writes[1].what;
  EXPECT_FALSE(writes[2].reply);
  EXPECT_EQ(writes[2].code, errc::already_exists) << writes[2].what;
  EXPECT_TRUE(writes[3].reply) << writes[3].what;
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0].changes.size(), 2u);
  EXPECT_EQ(w.list(ctx_).size(), 3u);
  EXPECT_EQ(w.get_by_slug(ctx_, "taken").spec.size, 1);
}

// A role or connection string that turns synchronous_commit off would have the server
// report commits it has not yet written to disk (lost in a crash, after beehive reported
// them): every connection turns it back on, keeping a stronger level. And every
// connection, a reader's included, fails a call whose data the network stopped
// acknowledging within seconds (tcp_user_timeout), not the kernel's minutes.
TEST_F(PostgresStore, ConnectionsCommitDurablyAndGiveUpOnASilentNetworkInSeconds) {
  auto setting = [&](const std::string& extra, std::chrono::milliseconds stall_limit = {}) {
    store::pg::Connection c(std::string(std::getenv("BEEHIVE_TEST_PG")) + " " + extra,
                            test_schema_for(db_path()), std::chrono::seconds(5), stall_limit);
    auto sync = c.pipeline({{"", "SHOW synchronous_commit", {}}}).at(0).str(0, 0);
    std::string user_timeout;
    auto* opts = PQconninfo(c.raw());
    for (auto* o = opts; o && o->keyword; ++o)
      if (std::string_view(o->keyword) == "tcp_user_timeout" && o->val) user_timeout = o->val;
    PQconninfoFree(opts);
    return std::pair(sync, user_timeout);
  };
  using Seen = std::pair<std::string, std::string>;
  EXPECT_EQ(setting("options='-c synchronous_commit=off'"), Seen("on", "5000"));
  EXPECT_EQ(setting("options='-c synchronous_commit=remote_apply'").first, "remote_apply");
  EXPECT_EQ(setting("options='-c synchronous_commit=local'").first, "local");
  EXPECT_EQ(setting("", std::chrono::seconds(3)).second, "3000");  // the writer's: its stall limit
}

// The writer's connection bounds how long a paused process can hold a lock by its stall
// limit; the others (readers, the listener) leave the role's or the connection string's
// timeouts as they are: setting them to 0 switched off what a DBA set.
TEST_F(PostgresStore, OnlyTheConnectionsWithAStallLimitSetTheirOwnLockTimeouts) {
  auto timeouts = [&](const std::string& extra, std::chrono::milliseconds stall_limit) {
    store::pg::Connection c(std::string(std::getenv("BEEHIVE_TEST_PG")) + " " + extra,
                            test_schema_for(db_path()), std::chrono::seconds(5), stall_limit);
    auto r = c.pipeline({{"",
                          "SELECT current_setting('lock_timeout'), "
                          "current_setting('idle_in_transaction_session_timeout')",
                          {}}});
    return std::pair(r.at(0).str(0, 0), r.at(0).str(0, 1));
  };
  using Seen = std::pair<std::string, std::string>;
  const std::string dba = "options='-c lock_timeout=7s -c idle_in_transaction_session_timeout=9s'";
  EXPECT_EQ(timeouts(dba, {}), Seen("7s", "9s"));
  EXPECT_EQ(timeouts(dba, std::chrono::seconds(3)), Seen("3s", "3s"));
  EXPECT_EQ(timeouts("", std::chrono::seconds(3)), Seen("3s", "3s"));
}

// A session the server ends while statements begun ahead run: what was begun fails as
// lost, and the next statements run on a new session. (When libpq has read the FATAL
// but not yet the end of the stream it cannot leave pipeline mode: the connection then
// counts as lost too; that window is a race this test does not hit every time.)
TEST_F(PostgresStore, ASessionEndedByTheServerMidPipelineIsMadeAgain) {
  store::pg::Connection c(std::getenv("BEEHIVE_TEST_PG"), test_schema_for(db_path()),
                          std::chrono::seconds(5));
  auto pid = c.pipeline({{"", "SELECT pg_backend_pid()", {}}}).at(0).str(0, 0);
  c.exec("BEGIN");
  store::pg::Connection other(std::getenv("BEEHIVE_TEST_PG"), test_schema_for(db_path()),
                              std::chrono::seconds(5));
  auto killer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(100ms);  // a sleeping statement is a wait, not a settle
    other.exec("SELECT pg_terminate_backend(" + pid + ")");
  });
  // Begun ahead, as the writer begins its next transaction with a commit: the session
  // ends while they run, and they are read later.
  c.send_after({{"", "SELECT pg_sleep(2)", {}}, {"", "SELECT 2", {}}});
  c.pipeline({{"", "SELECT 1", {}}});
  killer.get();
  EXPECT_THROW(c.take_after(), Error);
  EXPECT_TRUE(c.lost());
  try {
    c.exec("SELECT 1");  // the transaction's next statement hears that it is gone, once
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::store)) << e.what();
  }
  EXPECT_EQ(c.pipeline({{"", "SELECT 3", {}}}).at(0).str(0, 0), "3");
}

// beehive-ctl's read session: the server refuses its writes, on the connection that
// replaces a lost one too.
TEST_F(PostgresStore, AReadOnlyConnectionStaysReadOnlyWhenMadeAgain) {
  store::pg::Connection c(std::getenv("BEEHIVE_TEST_PG"), test_schema_for(db_path()),
                          std::chrono::seconds(5));
  c.set_read_only();
  auto refused = [&] {
    try {
      c.exec("CREATE TABLE read_only_probe (x INTEGER)");
      return std::string("written");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(refused().find("read-only transaction"), std::string::npos);
  c.drop();
  try {
    c.exec("SELECT 1");  // a lost connection may fail its next use, once
  } catch (const Error&) {
  }
  EXPECT_NE(refused().find("read-only transaction"), std::string::npos);
}

// Processes opening one new schema at the same moment: one creates it, the others wait
// for it and use it; each gets a session of its own.
TEST_F(PostgresStore, ProcessesOpeningOneNewSchemaAtOnceAllGetItWithSessionsOfTheirOwn) {
  auto schema = test_schema_for(dir_.file("fresh.db"));
  std::mutex mu;
  std::set<std::int64_t> sessions;
  std::vector<std::string> errors;
  run_together(8, [&](int) {
    try {
      auto store = postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = schema});
      auto session = std::dynamic_pointer_cast<store::Backend>(store)->session();
      std::lock_guard g(mu);
      sessions.insert(session);
    } catch (const std::exception& e) {
      std::lock_guard g(mu);
      errors.push_back(e.what());
    }
  });
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(sessions.size(), 8u);
  Beehive bh(postgres::open(std::getenv("BEEHIVE_TEST_PG"), {.schema = schema}));
  auto o = Widgets(bh, widget_kind).create(ctx_, {"a", 1});
  EXPECT_EQ(Widgets(bh, widget_kind).get(ctx_, o.id).spec.size, 1);
}

// An open waits for another process's open (or migration) whatever lock_timeout the
// role or the connection string sets: replicas starting together must not fail for it.
TEST_F(PostgresStore, AnOpenWaitsForAnotherOpenWhateverTheLockTimeout) {
  auto schema = test_schema_for(dir_.file("waits.db"));
  OpenTransaction other(schema, "SELECT pg_advisory_xact_lock(hashtext('beehive:" + schema + "'))");
  auto opened = std::async(std::launch::async, [&] {
    return postgres::open(
        std::string(std::getenv("BEEHIVE_TEST_PG")) + " options='-c lock_timeout=100'",
        {.schema = schema});
  });
  EXPECT_EQ(opened.wait_for(1s), std::future_status::timeout);  // still waiting, past 100 ms
  other.commit();
  ASSERT_EQ(opened.wait_for(10s), std::future_status::ready);
  Beehive bh(opened.get());
  EXPECT_TRUE(Widgets(bh, widget_kind).list(ctx_).empty());
}

// Options PostgreSQL would misread are refused before anything is created: a schema name
// it would truncate to another's (63 bytes at most), a connect timeout of zero (libpq's
// "for ever", which would fail every connection here) or too large for a deadline, and
// a lease the server cannot enforce as the writer's lock and idle-transaction timeouts
// (0 is "none" to it, and it takes at most INT_MAX ms). A lease under 300 ms is refused
// too: leadership raised it to 300 ms while the writer's timeouts used it as given.
TEST_F(PostgresStore, OptionsPostgresWouldMisreadAreInvalidArguments) {
  const char* db = std::getenv("BEEHIVE_TEST_PG");
  auto base = test_schema_for(dir_.file("long.db"));
  auto longest = base + std::string(63 - base.size(), 'x');
  EXPECT_ERRC(postgres::open(db, {.schema = longest + "y"}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = ""}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = "$user"}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = "pg_beehive"}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = std::string("a\0b", 3)}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .connect_timeout = 0ms}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .connect_timeout = -5ms}),
              errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .lease = 0ms}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .lease = -1ms}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .lease = 299ms}), errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .lease = std::chrono::hours(24 * 30)}),
              errc::invalid_argument);
  EXPECT_ERRC(postgres::open(db, {.schema = base, .lease = std::chrono::milliseconds::max()}),
              errc::invalid_argument);
  EXPECT_ERRC(
      postgres::open(db, {.schema = base, .connect_timeout = std::chrono::milliseconds::max()}),
      errc::invalid_argument);
  EXPECT_EQ(query_test_store(dir_.file("long.db"),
                             "SELECT count(*) FROM pg_namespace WHERE nspname LIKE '" + base + "%'")
                .at(0)
                .at(0),
            "0")
      << "a refused open created a schema";
  // 63 bytes is a name PostgreSQL keeps whole.
  Beehive bh(postgres::open(db, {.schema = longest}));
  auto o = Widgets(bh, widget_kind).create(ctx_, {"a", 1});
  EXPECT_EQ(Widgets(bh, widget_kind).get(ctx_, o.id).spec.size, 1);
  run_sql(longest, "DROP SCHEMA \"" + longest + "\" CASCADE");
}

// A schema name in any language: its notification channel ("beehive_" and the name,
// clipped to PostgreSQL's 63 bytes) must stay valid UTF-8 where the clip falls inside a
// character, or no write could notify and no process could listen.
TEST_F(PostgresStore, ASchemaNamedInAnyLanguageServesWritesAndOtherProcessesWatches) {
  const char* db = std::getenv("BEEHIVE_TEST_PG");
  auto base = test_schema_for(dir_.file("utf8.db"));
  // "beehive_" is 8 bytes: the channel's 63rd byte is the first of an "é".
  auto schema = base + std::string(54 - base.size(), 'x') + "\xc3\xa9t\xc3\xa9";
  ASSERT_EQ(("beehive_" + schema).substr(62, 2), "\xc3\xa9");
  {
    Beehive writer(postgres::open(db, {.schema = schema}));
    Beehive watcher(postgres::open(db, {.schema = schema}));
    Widgets w(writer, widget_kind);
    auto watch = Widgets(watcher, widget_kind).watch_list(ctx_);
    auto o = w.create(ctx_, {"a", 1});
    EXPECT_EQ(Widgets(watcher, widget_kind).get(ctx_, o.id).spec.size, 1);
    bool seen = false;
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!seen && std::chrono::steady_clock::now() < until) {
      auto ch = watch.next_for(1s);
      seen = ch && ch->object.id == o.id;
    }
    EXPECT_TRUE(seen) << "the other process never saw the write";
  }
  run_sql(schema, "DROP SCHEMA \"" + schema + "\" CASCADE");
}

// A store's sessions are named after its schema as the server keeps the name (printable
// ASCII of 63 bytes at most), so that beehive-ctl finds them: other bytes and a backslash
// are spelt \xNN (no schema reads as another's escape), and the cut at 63 bytes never
// splits an escape.
TEST(PgSessionName, SpellsTheSchemaAsTheServerKeepsIt) {
  namespace pg = store::pg;
  EXPECT_EQ(pg::session_name("orders"), "beehive orders");
  EXPECT_EQ(pg::session_name("\xc3\xa9t\xc3\xa9"), "beehive \\xc3\\xa9t\\xc3\\xa9");
  EXPECT_EQ(pg::session_name("a\\xc3"), "beehive a\\x5cxc3");
  EXPECT_NE(pg::session_name("a\\xc3"), pg::session_name("a\xc3"));
  auto cut = pg::session_name(std::string(52, 'x') + "\xc3\xa9");
  EXPECT_EQ(cut, "beehive " + std::string(52, 'x'));  // no room for a whole \xc3
  EXPECT_EQ(pg::session_name(std::string(80, 'y')).size(), 63u);
}

/// Runs one statement on the test database outside any transaction (CREATE DATABASE).
void run_admin_sql(const std::string& sql) {
  PGconn* c = PQconnectdb(std::getenv("BEEHIVE_TEST_PG"));
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PGresult* r = PQexec(c, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
}

// Text is stored as the UTF-8 beehive was given, whatever client encoding the conninfo
// (or PGCLIENTENCODING) names: PostgreSQL must not re-encode it, or every other client
// of the database reads something else. A database whose encoding cannot hold every
// character is refused when opened, not at the first write of a character it lacks; one
// that stores bytes as given (SQL_ASCII) serves.
TEST_F(PostgresStore,
       TextIsStoredAsUtf8WhateverTheClientEncodingAndOnlyADatabaseThatHoldsItServes) {
  const std::string db = std::getenv("BEEHIVE_TEST_PG");
  const auto path = dir_.file("encoding.db");
  const std::string text = "\xe6\x97\xa5\xe6\x9c\xac \xe2\x9c\x93 \xc3\xa9";  // "日本 ✓ é"
  {
    Beehive bh(postgres::open(db + " client_encoding=LATIN1", {.schema = test_schema_for(path)}));
    Widgets w(bh, widget_kind);
    w.create(ctx_, {text, 1}, with_slug(text));
    EXPECT_EQ(w.get_by_slug(ctx_, text).spec.color, text);
  }
  auto stored = query_test_store(path, "SELECT slug, spec FROM objects");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0][0], text) << "re-encoded on the way in";
  EXPECT_EQ(nlohmann::json::parse(stored[0][1]).at("color"), text);

  const auto other = "beehive_encoding_" + std::to_string(::getpid());
  for (const std::string encoding : {"LATIN1", "SQL_ASCII"}) {
    SCOPED_TRACE(encoding);
    run_admin_sql("CREATE DATABASE " + other + " ENCODING '" + encoding +
                  "' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
    const auto conninfo = db + " dbname=" + other;
    if (encoding == "LATIN1") {
      EXPECT_ERRC_WITH(postgres::open(conninfo), errc::store, "LATIN1");
    } else {
      Beehive bh(postgres::open(conninfo));
      Widgets w(bh, widget_kind);
      w.create(ctx_, {text, 1}, with_slug(text));
      EXPECT_EQ(w.get_by_slug(ctx_, text).spec.color, text);
    }
    run_admin_sql("DROP DATABASE " + other + " WITH (FORCE)");
  }
}

// The store relies on READ COMMITTED: a write transaction that waited for the counters'
// lock reads them as the other process left them. A database, role or conninfo whose
// default isolation is stricter (a DBA's `ALTER DATABASE ... SET
// default_transaction_isolation`) must not turn a wait into a serialization failure:
// two processes writing at once, one leading with a controller (its writes check the
// lease, which its campaign renews meanwhile), lose no write.
TEST_F(PostgresStore, ADefaultIsolationStricterThanReadCommittedFailsNoWrite) {
  for (const std::string level : {"serializable", "repeatable read"}) {
    SCOPED_TRACE(level);
    // A space in `options` is escaped for its argument list, and that escape for the
    // conninfo's quoting.
    auto escaped = level;
    if (auto space = escaped.find(' '); space != std::string::npos)
      escaped.replace(space, 1, "\\\\ ");
    const auto conninfo = std::string(std::getenv("BEEHIVE_TEST_PG")) +
                          " options='-c default_transaction_isolation=" + escaped + "'";
    {  // the conninfo does set it
      PGconn* c = PQconnectdb(conninfo.c_str());
      PGresult* r = PQexec(c, "SHOW default_transaction_isolation");
      ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(c);
      EXPECT_EQ(std::string(PQgetvalue(r, 0, 0)), level);
      PQclear(r);
      PQfinish(c);
    }
    const auto schema = test_schema_for(dir_.file(level.substr(0, 6) + ".db"));
    Beehive leader(postgres::open(conninfo, {.schema = schema}));
    register_controller<WidgetSpec, WidgetStatus>(
        leader, widget_kind,
        [](const Context& ctx, ControllerClient<WidgetStatus>& cc,
           const Object<WidgetSpec, WidgetStatus>& o) {
          cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
          return Result{};
        });
    auto stop = leader.start(ctx_);
    Beehive other(postgres::open(conninfo, {.schema = schema}));  // another process
    Widgets a(leader, widget_kind), b(other, widget_kind);
    std::mutex mu;
    std::vector<std::string> failures;
    run_together(8, [&](int i) {
      for (int n = 0; n < 40; ++n) {
        try {
          auto& w = i % 2 ? b : a;
          auto o = w.create(ctx_, {"c", n});
          w.update(ctx_, o.id, {"c", n + 1});
        } catch (const Error& e) {
          std::lock_guard g(mu);
          failures.push_back(e.what());
        }
      }
    });
    EXPECT_EQ(failures, std::vector<std::string>{});
    EXPECT_TRUE(eventually([&] {
      auto all = a.list(ctx_);
      return all.size() == 320 && std::all_of(all.begin(), all.end(), [](const auto& o) {
               return o.status && o.status->ready;
             });
    })) << "the leader's controller did not settle every object";
    stop(ctx_);
  }
}

// A statement_timeout the DBA set (here through the conninfo) is the database's policy
// and applies to beehive's statements too, as the README says: a write waiting for
// another process's transaction fails at it with errc::store, writing nothing, well
// before the lease.
TEST_F(PostgresStore, ARolesStatementTimeoutBoundsAWaitForAnotherProcesssLock) {
  const auto conninfo =
      std::string(std::getenv("BEEHIVE_TEST_PG")) + " options='-c statement_timeout=300'";
  const auto schema = test_schema_for(dir_.file("timeout.db"));
  Beehive bh(postgres::open(conninfo, {.schema = schema}));
  Widgets w(bh, widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  {
    OpenTransaction other(
        schema, "SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE");
    auto began = std::chrono::steady_clock::now();
    EXPECT_ERRC_WITH(w.update(ctx_, o.id, {"a", 2}), errc::store, "statement timeout");
    EXPECT_LT(std::chrono::steady_clock::now() - began, 5s);
  }
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 1);
  EXPECT_EQ(w.update(ctx_, o.id, {"a", 3}).spec.size, 3);  // the lock gone, writes go on
}

TEST_F(PostgresStore, ASchemaNameThatIsNotUtf8IsAnInvalidArgument) {
  EXPECT_ERRC(postgres::open(std::getenv("BEEHIVE_TEST_PG"),
                             {.schema = test_schema_for(dir_.file("bad.db")) + "\xff"}),
              errc::invalid_argument);
}

TEST_F(PostgresStore, ASchemaFromANewerBuildIsRefused) {
  bh_.reset();
  store_.reset();
  auto schema = test_schema_for(db_path());
  run_sql(schema, "UPDATE beehive_schema SET version = 999");
  EXPECT_ERRC_WITH(open_test_store(db_path()), errc::store, "newer");
}

// A server older than PostgreSQL 13 lacks what the schema needs (gen_random_uuid): the
// open says so rather than failing on a missing function.
TEST_F(PostgresStore, AServerOlderThanThirteenIsRefusedSayingWhy) {
  EXPECT_ERRC_WITH(store::pg::require_server_version(120022), errc::store,
                   "PostgreSQL 12; beehive needs PostgreSQL 13 or later");
  EXPECT_NO_THROW(store::pg::require_server_version(130000));
}

// Schema 2 (the first with events_by_version) gains event retention's age index, the
// collector's index of collectible rows (schema 4) and the lease holder's lease (5).
TEST_F(PostgresStore, AnOlderSchemaIsMigratedForward) {
  auto o = Widgets(*bh_, widget_kind).create(ctx_, {"kept", 1});
  bh_.reset();
  store_.reset();
  auto schema = test_schema_for(db_path());
  run_sql(schema,
          "ALTER TABLE leadership DROP COLUMN lease_ms; DROP INDEX objects_collectible; "
          "DROP INDEX events_by_age; UPDATE beehive_schema SET version = 2");
  open();
  EXPECT_EQ(Widgets(*bh_, widget_kind).get(ctx_, o.id).spec.color, "kept");
  run_sql(schema, R"sql(DO $$ BEGIN
      IF (SELECT version FROM beehive_schema) <> 5 OR to_regclass('events_by_age') IS NULL
         OR to_regclass('objects_collectible') IS NULL
         OR (SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
             AND table_name = 'leadership' AND column_name = 'lease_ms') <> 1
      THEN RAISE EXCEPTION 'not migrated'; END IF; END $$)sql");
}

// A process paused (or cut off) while it opens the store, inside the transaction that
// creates or migrates the schema and holds the lock every open takes, holds the other
// processes' opens up for its lease, not for ever: the server ends its idle transaction,
// and its own open then fails with errc::store.
Gate* paused_open = nullptr;
std::atomic<bool> pause_armed{false};
void pause_the_first_open() {
  if (pause_armed.exchange(false)) paused_open->pass();
}

TEST_F(PostgresStore, AnOpenPausedInsideItsSchemaTransactionHoldsOthersUpForItsLeaseAtMost) {
  const char* db = std::getenv("BEEHIVE_TEST_PG");
  auto schema = test_schema_for(dir_.file("paused.db"));
  Gate gate;
  paused_open = &gate;
  pause_armed = true;
  store::pg::faults::inside_open_migration = pause_the_first_open;
  struct Disarm {
    Gate& gate;
    ~Disarm() {
      store::pg::faults::inside_open_migration = nullptr;
      gate.open();
    }
  } disarm{gate};
  auto paused = std::async(std::launch::async,
                           [&] { postgres::open(db, {.schema = schema, .lease = 1000ms}); });
  gate.wait_entered();
  auto other =
      std::async(std::launch::async, [&] { return postgres::open(db, {.schema = schema}); });
  ASSERT_EQ(other.wait_for(30s), std::future_status::ready)
      << "an open waited for a paused one's transaction";
  Beehive bh(other.get());
  auto o = Widgets(bh, widget_kind).create(ctx_, {"a", 1});
  EXPECT_EQ(Widgets(bh, widget_kind).get(ctx_, o.id).spec.size, 1);
  gate.open();
  EXPECT_ERRC(paused.get(), errc::store);
}

TEST_F(PostgresStore, AMalformedConnectionStringIsAnInvalidArgument) {
  for (const char* typo : {"host=/tmp port", "postgresql://[::1", "hots=/tmp dbname=x"}) {
    SCOPED_TRACE(typo);
    EXPECT_ERRC_WITH(postgres::open(typo), errc::invalid_argument, "malformed connection string");
  }
  // A bare word is a database name, which only the server can refuse.
  postgres::Options o;
  o.connect_timeout = std::chrono::milliseconds(1000);
  EXPECT_ERRC(postgres::open("no_such_database_here", o), errc::store);
}

TEST_F(PostgresStore, AnUnreachableServerIsAStoreErrorWithinTheConnectTimeout) {
  postgres::Options o;
  o.connect_timeout = std::chrono::milliseconds(1000);
  EXPECT_ERRC_WITH(postgres::open("host=/nonexistent-socket-dir port=1 dbname=x", o), errc::store,
                   "cannot connect");
}

// A server that accepts the connection and then never answers (hung, or a proxy in
// front of a dead one): opening fails within the connect timeout, to the millisecond
// rather than libpq's whole seconds.
TEST_F(PostgresStore, AServerThatNeverAnswersIsAStoreErrorWithinTheConnectTimeout) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);  // the kernel accepts; nobody answers
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  postgres::Options o;
  o.connect_timeout = std::chrono::milliseconds(300);
  auto began = std::chrono::steady_clock::now();
  EXPECT_ERRC_WITH(
      postgres::open(
          "host=127.0.0.1 port=" + std::to_string(ntohs(addr.sin_port)) + " dbname=x user=x", o),
      errc::store, "connect timeout");
  auto took = std::chrono::steady_clock::now() - began;
  EXPECT_GE(took, o.connect_timeout);
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  ::close(listener);
}

// A write whose caller gives up while it waits behind another process's transaction has
// its statement cancelled. Should the cancel request get no answer (the server cut off
// by a network that drops packets), the writer must not wait for it: it goes on waiting
// for the statement, and serves the next write once the other transaction ends.
TEST_F(PostgresStore, ACancelThatGetsNoAnswerDoesNotHoldUpTheWriter) {
  Widgets(bh(), widget_kind).create(ctx_, {"first", 1});  // the tables exist
  bh_.reset();
  store_.reset();
  CancelSwallowingProxy proxy;
  postgres::Options o;
  o.schema = test_schema_for(db_path());
  auto bh = std::make_unique<Beehive>(postgres::open(proxy.conninfo(), o));
  Widgets w(*bh, widget_kind);
  auto obj = w.create(ctx_, {"a", 1});
  ClosedFirst close_first{proxy};  // should the writer hang after all, let go of it before stopping

  OpenTransaction other(o.schema,
                        "SELECT value FROM beehive_meta WHERE key = 'resource_version' FOR UPDATE");
  EXPECT_ERRC(w.update(Context{}.with_timeout(std::chrono::milliseconds(200)), obj.id, {"a", 2}),
              errc::deadline_exceeded);
  EXPECT_TRUE(eventually([&] { return proxy.cancels_held() == 1; }))
      << "the writer never tried to cancel its wait";
  other.commit();
  auto next = w.update(Context{}.with_timeout(std::chrono::seconds(5)), obj.id, {"a", 3});
  EXPECT_EQ(next.spec.size, 3);
  EXPECT_EQ(w.get(ctx_, obj.id).spec.size, 3);
}

// A read whose connection has to be made again gives up at its caller's deadline, not
// at the connect timeout, when the server does not answer.
TEST_F(PostgresStore, AReadThatMustConnectAgainGivesUpAtItsDeadline) {
  auto o = Widgets(bh(), widget_kind).create(ctx_, {"first", 1});
  bh_.reset();
  store_.reset();
  CancelSwallowingProxy proxy;
  postgres::Options opts;
  opts.schema = test_schema_for(db_path());
  opts.connect_timeout = std::chrono::seconds(10);
  auto bh = std::make_unique<Beehive>(postgres::open(proxy.conninfo(), opts));
  Widgets w(*bh, widget_kind);
  ASSERT_EQ(w.get(ctx_, o.id).spec.color, "first");  // a reader connected
  ClosedFirst close_first{proxy};  // connects still hanging let go before the beehive goes
  proxy.hang_new_connections();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(w.get(Context{}.with_timeout(std::chrono::milliseconds(300)), o.id),
              errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// The listener's connection lost, it connects again; with the server gone silent that
// connect waits the connect timeout. Its release (a stop) does not wait it out.
TEST_F(PostgresStore, ReleasingTheListenerDoesNotWaitForItsConnect) {
  CancelSwallowingProxy proxy;
  ClosedFirst close_first{proxy};  // should the release hang after all, let go of it
  auto shared = std::make_shared<store::pg::SharedState>();
  shared->note_key = "a key";
  auto listener = std::make_unique<store::pg::Listener>(
      proxy.conninfo(), test_schema_for(db_path()), std::chrono::seconds(20), 1, shared);
  ASSERT_TRUE(eventually([&] { return shared->foreign_commits.load() > 0; }));  // connected
  proxy.hang_new_connections();  // cut: it connects again, and hangs
  ASSERT_TRUE(eventually([&] { return proxy.connections_hung() == 1; }));
  auto t0 = std::chrono::steady_clock::now();
  listener.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// With several hosts in the connection string, one that takes the connection and never
// answers (a frozen primary) costs its own connect timeout, and the next host is tried:
// given the whole list, libpq spent the whole timeout on the first.
TEST_F(PostgresStore, AHostThatNeverAnswersIsPassedOverForTheNextOne) {
  Widgets(bh(), widget_kind).create(ctx_, {"first", 1});
  CancelSwallowingProxy frozen;
  frozen.hang_new_connections();
  auto [host, port] = frozen.server();
  postgres::Options o;
  o.schema = test_schema_for(db_path());
  o.connect_timeout = std::chrono::milliseconds(500);
  auto store = postgres::open(frozen.conninfo_then(host, port), o);
  EXPECT_GE(frozen.connections_hung(), 1);
  {
    Beehive other(store);
    EXPECT_EQ(Widgets(other, widget_kind).list(ctx_).size(), 1u);
  }
  // Every host failing: each says why.
  EXPECT_ERRC_WITH(postgres::open(frozen.conninfo_then("127.0.0.1", "1"), o), errc::store,
                   "no answer within the connect timeout (500 ms); 127.0.0.1:1: ");
  frozen.close();
}

// The server ending an idle session (idle_session_timeout, an operator's
// pg_terminate_backend, a restart) just as a call sends its first statement: the
// goodbye had not arrived when the call looked, so the statement went on a dead session.
// A read runs once more on a new one, and so does a write's BEGIN (nothing of the write
// was sent): neither fails for it.
TEST_F(PostgresStore, ASessionEndedAsAnIdleCallSendsIsMadeAgainForIt) {
  auto a = Widgets(bh(), widget_kind).create(ctx_, {"first", 1});
  CancelSwallowingProxy proxy;
  ClosedFirst close_first{proxy};
  store::pg::PgReader reader(proxy.conninfo(), test_schema_for(db_path()), std::chrono::seconds(5),
                             /*session=*/1);
  ASSERT_TRUE(reader.get(a.id, 0).has_value());
  proxy.drop_next_sending("");  // the read's statement: nothing else goes on the reader
  auto again = reader.get(a.id, 0);
  EXPECT_EQ(proxy.dropped(), 1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->meta.id, a.id);

  bh_.reset();
  store_.reset();
  postgres::Options o;
  o.schema = test_schema_for(db_path());
  auto bh = std::make_unique<Beehive>(postgres::open(proxy.conninfo(), o));
  Widgets w(*bh, widget_kind);
  w.update(ctx_, a.id, {"second", 2});  // the writer's session is made, idle after
  proxy.drop_next_sending("bh_begin");
  EXPECT_EQ(w.update(ctx_, a.id, {"third", 3}).spec.size, 3);
  EXPECT_EQ(proxy.dropped(), 2);
  EXPECT_EQ(w.get(ctx_, a.id).spec.color, "third");
}

// A read that had to make its session anew and could not (the server out of reach) is
// not run again: a second connect would only double its wait.
TEST_F(PostgresStore, AReadThatCannotConnectIsNotRunAgain) {
  auto a = Widgets(bh(), widget_kind).create(ctx_, {"first", 1});
  CancelSwallowingProxy proxy;
  ClosedFirst close_first{proxy};
  store::pg::PgReader reader(proxy.conninfo(), test_schema_for(db_path()),
                             std::chrono::milliseconds(300), /*session=*/1);
  ASSERT_TRUE(reader.get(a.id, 0).has_value());
  proxy.hang_new_connections();  // its session cut, and no new one answered
  EXPECT_THROW(reader.get(a.id, 0), Error);
  EXPECT_EQ(proxy.connections_hung(), 1);
}

}  // namespace
}  // namespace beehive::test
