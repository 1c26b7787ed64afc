// The PostgreSQL server itself crashing (an immediate stop: every session cut, no
// checkpoint) and coming back, three times, under 8 writing callers, a watch and a
// controller: no acknowledged write is lost, no write reported failed has committed,
// and once the server is back the process writes, watches and leads again on its own.
//
// On a server of its own (scripts/pg-test-server.sh), since crashing the shared one
// would fail the tests running beside it. Runs in the pg.* set (it fails, saying why, on
// SQLite).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <beehive/postgres.hpp>

#include "fixture.hpp"

#ifndef BEEHIVE_PG_TEST_SERVER
#error "BEEHIVE_PG_TEST_SERVER (scripts/pg-test-server.sh) is set by CMakeLists.txt"
#endif

namespace beehive::test {
namespace {

using namespace std::chrono_literals;

/// A throwaway server under `dir`, stopped and removed at the end.
class OwnServer {
 public:
  explicit OwnServer(std::filesystem::path dir) : dir_(std::move(dir)) {
    run("start");
    std::ifstream in(dir_ / "conninfo");
    std::getline(in, conninfo_);
  }
  ~OwnServer() { run("stop"); }
  const std::string& conninfo() const { return conninfo_; }
  void crash() { run("crash"); }
  void restart() { run("restart"); }

 private:
  void run(const std::string& what) {
    auto cmd = std::string("bash '") + BEEHIVE_PG_TEST_SERVER + "' " + what + " '" + dir_.string() +
               "' >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  std::filesystem::path dir_;
  std::string conninfo_;
};

/// What happened to each create: acknowledged, or failed with what error.
class Outcomes {
 public:
  void ack(const std::string& slug) {
    std::lock_guard g(mu_);
    acknowledged_.insert(slug);
    changed_.notify_all();
  }
  void fail(const std::string& slug, const Error& e) {
    std::lock_guard g(mu_);
    failed_[slug] = e.code().message() + ": " + e.what();
    changed_.notify_all();
  }
  /// Waits for `n` more acknowledgements (or failures) than now; false after `limit`.
  bool more_acks(std::size_t n, std::chrono::seconds limit) {
    std::unique_lock g(mu_);
    auto want = acknowledged_.size() + n;
    return changed_.wait_for(g, limit, [&] { return acknowledged_.size() >= want; });
  }
  bool more_failures(std::size_t n, std::chrono::seconds limit) {
    std::unique_lock g(mu_);
    auto want = failed_.size() + n;
    return changed_.wait_for(g, limit, [&] { return failed_.size() >= want; });
  }
  // Read once the writers have returned.
  const std::set<std::string>& acknowledged() const { return acknowledged_; }
  const std::map<std::string, std::string>& failed() const { return failed_; }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::set<std::string> acknowledged_;
  std::map<std::string, std::string> failed_;  // slug -> the error
};

/// A beehive on a server of its own, with a controller that marks each widget ready
/// (proof that the process leads), a watch on the widgets, and `writers` callers
/// creating them; and a second beehive on the store (another session, as another
/// process would be), never started, watching them too.
class PostgresServer : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_POSTGRES(); }
  void TearDown() override {
    stop_writing();
    if (stop_) stop_({});
  }

  /// `deadline`: each create's (none: they wait as long as it takes).
  void start(postgres::Options opts, int writers = 8,
             std::optional<std::chrono::milliseconds> deadline = std::nullopt) {
    server_ = std::make_unique<OwnServer>(dir_.file("server"));
    bh_ = std::make_unique<Beehive>(postgres::open(server_->conninfo(), opts));
    other_ = std::make_unique<Beehive>(postgres::open(server_->conninfo(), opts));
    cc_.emplace(register_controller<WidgetSpec, WidgetStatus>(
        *bh_, widget_kind,
        [](const Context& ctx, ControllerClient<WidgetStatus>& cc,
           const Object<WidgetSpec, WidgetStatus>& o) {
          cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
          return Result{};
        }));
    stop_ = bh_->start({});
    widgets_ = std::make_unique<Widgets>(*bh_, widget_kind);
    watch_.emplace(widgets_->watch_list({}));
    other_watch_.emplace(Widgets(*other_, widget_kind).watch_list({}));
    for (int t = 0; t < writers; ++t)
      writers_.emplace_back([this, t, deadline] {
        for (int i = 0; writing_; ++i) {
          // append(): GCC 12 sees an impossible length in "w" + to_string(t) (a false
          // -Wstringop-overflow).
          auto slug =
              std::string("w").append(std::to_string(t)).append("-").append(std::to_string(i));
          try {
            widgets_->create(deadline ? Context{}.with_timeout(*deadline) : Context{}, {"c", i},
                             with_slug(slug));
            out_.ack(slug);
          } catch (const Error& e) {
            if (!deadline || e.code() != make_error_code(errc::deadline_exceeded)) {
              EXPECT_EQ(e.code(), make_error_code(errc::store)) << e.what();
            }
            out_.fail(slug, e);
          }
        }
      });
  }

  void stop_writing() {
    writing_ = false;
    for (auto& t : writers_) t.join();
    writers_.clear();
  }

  /// The widgets in the database, by slug.
  std::set<std::string> stored() {
    std::set<std::string> slugs;
    for (auto& o : widgets_->list({})) slugs.insert(o.slug.value_or(""));
    return slugs;
  }

  /// Waits until each watch has seen every one of `want` marked ready by the
  /// controller: this process leads again, and both saw every commit.
  void expect_caught_up(const std::set<std::string>& want) {
    for (auto* watch : {&*watch_, &*other_watch_}) {
      std::set<std::string> seen, ready;
      auto until = std::chrono::steady_clock::now() + 60s;
      while (ready.size() < want.size() && std::chrono::steady_clock::now() < until) {
        auto ch = watch->next_for(1s);
        if (!ch) continue;
        auto slug = ch->object.slug.value_or("");
        seen.insert(slug);
        if (ch->object.status && ch->object.status->ready) ready.insert(slug);
      }
      EXPECT_EQ(seen, want) << (watch == &*watch_ ? "this" : "the other") << " watch";
      EXPECT_EQ(ready, want) << "not every widget was reconciled, or a watch missed it";
    }
    EXPECT_TRUE(bh_->is_leader());
  }

  TempDir dir_;
  std::unique_ptr<OwnServer> server_;
  std::unique_ptr<Beehive> bh_, other_;
  std::optional<ControllerClient<WidgetStatus>> cc_;
  Stop stop_;
  std::unique_ptr<Widgets> widgets_;
  std::optional<Stream<Change<WidgetSpec, WidgetStatus>>> watch_, other_watch_;
  Outcomes out_;
  std::atomic<bool> writing_{true};
  std::vector<std::thread> writers_;
};

// The server back within the time a commit's outcome is looked for (six connect
// timeouts): every caller learns exactly what happened to its write.
TEST_F(PostgresServer, ACrashedServerThatComesBackLosesNoAcknowledgedWriteAndNoOutcomeIsWrong) {
  start({.lease = 1000ms});
  for (int crash = 0; crash < 3; ++crash) {
    ASSERT_TRUE(out_.more_acks(100, 60s)) << "writes stalled";
    server_->crash();
    server_->restart();
  }
  ASSERT_TRUE(out_.more_acks(100, 60s)) << "writes did not resume";
  stop_writing();

  auto in_db = stored();
  for (auto& slug : out_.acknowledged()) EXPECT_TRUE(in_db.contains(slug)) << slug << " lost";
  for (auto& [slug, what] : out_.failed())
    EXPECT_FALSE(in_db.contains(slug)) << slug << " failed (" << what << ") but committed";
  EXPECT_EQ(in_db.size(), out_.acknowledged().size());
  expect_caught_up(in_db);
}

// The server down for longer: writes fail rather than wait for it, a write whose commit
// was in flight says that its outcome is unknown (and only such a write may have
// committed), and once the server is back the process sees every commit, those
// included, and leads again. The callers' deadlines (200 ms) are shorter than the time a
// lost commit is looked for (1.5 s): one that ends first wrote nothing.
TEST_F(PostgresServer, AServerDownPastTheResolutionTimeFailsWritesAndSaysWhichOutcomesAreUnknown) {
  start({.lease = 1000ms, .connect_timeout = 250ms}, 8, 200ms);
  ASSERT_TRUE(out_.more_acks(100, 60s)) << "writes stalled";
  server_->crash();
  ASSERT_TRUE(out_.more_failures(50, 30s)) << "writes did not fail while the server was down";
  server_->restart();
  ASSERT_TRUE(out_.more_acks(100, 60s)) << "writes did not resume";
  stop_writing();

  auto in_db = stored();
  for (auto& slug : out_.acknowledged()) EXPECT_TRUE(in_db.contains(slug)) << slug << " lost";
  int unknown = 0;
  for (auto& [slug, what] : out_.failed()) {
    if (what.find("outcome of this write is unknown") != std::string::npos) {
      ++unknown;
      continue;
    }
    EXPECT_FALSE(in_db.contains(slug)) << slug << " failed (" << what << ") but committed";
  }
  EXPECT_LE(unknown, 8) << "only the group in flight at the crash has an unknown outcome";
  expect_caught_up(in_db);
}

// A within block whose transaction a crash takes fails whole, whatever its code did
// with the failures inside; the next block commits once the server is back.
TEST_F(PostgresServer, AWithinBlockACrashCutsShortFailsWholeAndTheNextOneCommits) {
  start({.lease = 1000ms}, /*writers=*/0);
  auto& w = *widgets_;
  EXPECT_ERRC(cc_->within({},
                          [&](const Context& tx) {
                            w.create(tx, {"in", 1}, with_slug("in-1"));
                            server_->crash();
                            try {
                              w.create(tx, {"in", 2}, with_slug("in-2"));
                            } catch (const Error&) {  // swallowed: the block must fail anyway
                            }
                          }),
              errc::store);
  server_->restart();
  EXPECT_ERRC(w.get_by_slug({}, "in-1"), errc::not_found);
  EXPECT_ERRC(w.get_by_slug({}, "in-2"), errc::not_found);
  cc_->within({}, [&](const Context& tx) { w.create(tx, {"after", 1}, with_slug("after")); });
  EXPECT_EQ(w.get_by_slug({}, "after").spec.size, 1);
  expect_caught_up({"after"});
}

}  // namespace
}  // namespace beehive::test
