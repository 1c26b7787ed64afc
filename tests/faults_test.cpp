// Fault injection: what a failing disk, a foreign lock holder and a broken connection do
// to a beehive. The store's file operations fail on demand through the fault VFS shim
// (tests/support/fault_vfs.hpp); a foreign process holds the write lock through
// tests/faults/lock_holder.cpp. What a user relies on: a failed write throws
// errc::store with SQLite's message and leaves nothing behind, no caller is told that
// a write landed when it did not, and the beehive keeps serving afterwards.

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <caf/send.hpp>

#include <beehive/actors.hpp>

#include "actors/root.hpp"  // private: restart_retry
#include "child_process.hpp"
#include "controller_fixture.hpp"
#include "support/fault_vfs.hpp"

#ifndef BEEHIVE_LOCK_HOLDER
#error "CMakeLists.txt defines BEEHIVE_LOCK_HOLDER, the path of the lock_holder program"
#endif

extern char** environ;

namespace beehive::test {
namespace {

/// Rows and edges as the file holds them, read around the beehive.
struct FileCounts {
  int objects = 0, refs = 0;
};

class FaultTest : public ControllerTest {
 protected:
  // Each test opens the store itself, with the options it needs.
  void SetUp() override {}
  void TearDown() override {
    close();
    // Shows in the XML report (--gtest_output=xml): the figures docs/reliability.md quotes.
    RecordProperty("faults_injected", vfs_.injected());
  }

  void open(sqlite::Options opts = {}) {
    store_options_ = opts;
    ControllerTest::open();
  }

  /// A controller that marks every widget ready; waits until it is registered.
  ControllerClient<WidgetStatus> register_ready_controller() {
    return register_controller<WidgetSpec, WidgetStatus>(
        *bh_, widget_kind,
        [](const Context& ctx, ControllerClient<WidgetStatus>& cc,
           const Object<WidgetSpec, WidgetStatus>& o) {
          if (!o.status || !o.status->ready) cc.update_status(ctx, o.id, o.generation, {true});
          return Result{};
        });
  }

  bool becomes_ready(ObjectID id) {
    return eventually([&] {
      auto s = widgets().get(ctx_, id).status;
      return s && s->ready;
    });
  }

  FileCounts file_counts() {
    SQLite::Database db(dir_.file("beehive.db").string(), SQLite::OPEN_READONLY);
    return {db.execAndGet("SELECT count(*) FROM objects").getInt(),
            db.execAndGet("SELECT count(*) FROM refs").getInt()};
  }

  bool has_slug(const std::string& slug) {
    try {
      widgets().get_by_slug(ctx_, slug);
      return true;
    } catch (const Error& e) {
      if (e.value() != errc::not_found) throw;
      return false;
    }
  }

  // Every connection the test opens goes through the shim; TearDown closes them first.
  fault::FaultVfs vfs_;
};

// --- failed writes -----------------------------------------------------------------------

// The tests of failed WAL appends run in both synchronous modes: SQLite syncs the WAL
// at each commit under FULL only.
class FaultSyncTest : public FaultTest, public ::testing::WithParamInterface<sqlite::Synchronous> {
 protected:
  void open() { FaultTest::open({.synchronous = GetParam()}); }
};

INSTANTIATE_TEST_SUITE_P(Modes, FaultSyncTest,
                         ::testing::Values(sqlite::Synchronous::normal, sqlite::Synchronous::full),
                         [](const auto& info) {
                           return info.param == sqlite::Synchronous::full ? "full" : "normal";
                         });

TEST_P(FaultSyncTest, AFailedCommitThrowsStoreWithSqlitesMessageAndLeavesNothing) {
  open();
  register_ready_controller();
  stop_ = bh_->start(ctx_);
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 1});
  ASSERT_TRUE(becomes_ready(owner.id));  // the controller is idle from here on
  auto before = file_counts();

  // The commit's append to the WAL fails: the create with its owner edge and finalizer.
  vfs_.arm({.op = fault::Op::write, .files = fault::files::wal});
  EXPECT_ERRC_WITH(w.create(ctx_, {"child", 2}, with_slug("child"), with_owner(owner.id),
                            with_finalizers({"acme.com/hold"})),
                   errc::store, "disk I/O error");
  EXPECT_EQ(vfs_.injected(), 1);

  // Nothing of it: no row, no edge, the slug is free, the owner owns nothing.
  EXPECT_FALSE(has_slug("child"));
  EXPECT_EQ(w.list(ctx_).size(), 1u);
  EXPECT_TRUE(w.list_owned(ctx_, owner.id).empty());
  EXPECT_EQ(file_counts().objects, before.objects);
  EXPECT_EQ(file_counts().refs, before.refs);

  // The beehive keeps serving: the same write succeeds and the controller reconciles it.
  auto child = w.create(ctx_, {"child", 2}, with_slug("child"), with_owner(owner.id),
                        with_finalizers({"acme.com/hold"}));
  EXPECT_EQ(w.list_owned(ctx_, owner.id).size(), 1u);
  EXPECT_TRUE(becomes_ready(child.id));
  EXPECT_EQ(file_counts().refs, before.refs + 1);
}

TEST_F(FaultTest, AFailedSyncFailsTheWriteAndLeavesNothing) {
  open({.synchronous = sqlite::Synchronous::full});
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  vfs_.arm({.op = fault::Op::sync, .files = fault::files::wal});
  EXPECT_ERRC_WITH(w.update(ctx_, a.id, {"b", 2}), errc::store, "disk I/O error");
  EXPECT_EQ(vfs_.injected(), 1);
  auto now = w.get(ctx_, a.id);
  EXPECT_EQ(now.spec.color, "a");
  EXPECT_EQ(now.generation, 1);
  EXPECT_EQ(w.update(ctx_, a.id, {"c", 3}).generation, 2);
  EXPECT_EQ(w.get(ctx_, a.id).spec.color, "c");
}

// The failed commit's frames reached the WAL file before its sync failed: what a crash
// leaves (the database and its WAL, no shared index) must not hold the write either.
TEST_F(FaultTest, AWriteWhoseSyncFailedIsNotInWhatACrashLeaves) {
  open({.synchronous = sqlite::Synchronous::full});
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  vfs_.arm({.op = fault::Op::sync, .files = fault::files::wal});
  EXPECT_ERRC(w.update(ctx_, a.id, {"b", 2}), errc::store);
  auto crashed = dir_.file("crashed");
  std::filesystem::create_directory(crashed);
  for (auto* f : {"beehive.db", "beehive.db-wal"})
    if (std::filesystem::exists(dir_.file(f)))
      std::filesystem::copy_file(dir_.file(f), crashed / f);
  SQLite::Database db((crashed / "beehive.db").string(), SQLite::OPEN_READWRITE);
  SQLite::Statement q(db, "SELECT json_extract(spec, '$.color') FROM objects WHERE id = ?");
  q.bind(1, static_cast<std::int64_t>(a.id));
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getString(), "a");
}

// When the WAL cannot be cleared of the failed commit either (its sync fails again), the
// caller is told that the outcome is unknown rather than that nothing was written.
TEST_F(FaultTest, AWriteWhoseRemainsCannotBeClearedHasAnUnknownOutcome) {
  open({.synchronous = sqlite::Synchronous::full});
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  vfs_.arm({.op = fault::Op::sync, .files = fault::files::wal, .count = 2});
  EXPECT_ERRC_WITH(w.update(ctx_, a.id, {"b", 2}), errc::store, "could not be cleared");
  EXPECT_EQ(vfs_.injected(), 2);
  EXPECT_EQ(w.update(ctx_, a.id, {"c", 3}).spec.color, "c");  // the store goes on
}

TEST_P(FaultSyncTest, AGroupCommitThatFailsTellsNoCallerItsWriteLanded) {
  open();
  auto w = widgets();
  w.create(ctx_, {"warm", 0});
  // Several commits fail part-way through a burst of concurrent writes, whichever
  // group each write lands in.
  vfs_.arm({.op = fault::Op::write, .files = fault::files::wal, .skip = 4, .count = 3});
  constexpr int threads = 6, per_thread = 20;
  std::vector<std::future<std::vector<std::pair<std::string, std::optional<errc>>>>> runs;
  for (int t = 0; t < threads; ++t)
    runs.push_back(std::async(std::launch::async, [w, t]() mutable {
      std::vector<std::pair<std::string, std::optional<errc>>> out;
      for (int i = 0; i < per_thread; ++i) {
        auto slug =
            std::string("w").append(std::to_string(t)).append("-").append(std::to_string(i));
        try {
          w.create(Context{}.with_timeout(10s), {"x", i}, with_slug(slug));
          out.emplace_back(slug, std::nullopt);
        } catch (const Error& e) {
          out.emplace_back(slug, e.value());
        }
      }
      return out;
    }));
  int failed = 0, landed = 0;
  for (auto& r : runs) {
    ASSERT_EQ(r.wait_for(20s), std::future_status::ready) << "a caller hangs";
    for (auto& [slug, code] : r.get()) {
      if (code) {
        EXPECT_EQ(*code, errc::store) << slug;
        EXPECT_FALSE(has_slug(slug)) << slug << " failed but landed";
        ++failed;
      } else {
        EXPECT_TRUE(has_slug(slug)) << slug << " was acknowledged but is missing";
        ++landed;
      }
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_GE(landed, threads * per_thread - 3 * threads);
  EXPECT_EQ(vfs_.injected(), 3);
  EXPECT_EQ(file_counts().objects, landed + 1);
  w.create(ctx_, {"after", 1}, with_slug("after"));  // and it keeps serving
}

TEST_F(FaultTest, AFailureThatEndsTheTransactionFailsTheWholeWithinBlock) {
  open();
  auto cc = register_ready_controller();  // not started: no reconcile touches the file
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  {
    // Another connection commits: the writer must read pages from the file again in
    // its next transaction, which is where the read fault hits.
    SQLite::Database other(dir_.file("beehive.db").string(), SQLite::OPEN_READWRITE);
    other.exec("UPDATE beehive_meta SET value = value + 1 WHERE key = 'resource_version'");
  }
  std::optional<errc> first, second;
  EXPECT_ERRC(
      cc.within(ctx_,
                [&](const Context& tx) {
                  // The writer's reads fail (nothing else reads meanwhile).
                  vfs_.arm({.op = fault::Op::read, .threads = fault::Threads::any, .count = -1});
                  try {
                    w.create(tx, {"p", 1}, with_slug("p"));
                  } catch (const Error& e) {
                    first = e.value();
                  }
                  vfs_.clear();
                  // The block carries on after the failure; this write must not
                  // commit on its own.
                  try {
                    w.create(tx, {"q", 2}, with_slug("q"));
                  } catch (const Error& e) {
                    second = e.value();
                  }
                }),
      errc::store);
  EXPECT_EQ(first, errc::store);
  EXPECT_EQ(second, errc::store);
  EXPECT_GE(vfs_.injected(), 1);
  EXPECT_FALSE(has_slug("p"));
  EXPECT_FALSE(has_slug("q"));
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");
  EXPECT_EQ(file_counts().objects, 1);
  // The writer serves on, within blocks included.
  cc.within(ctx_, [&](const Context& tx) { w.create(tx, {"r", 3}, with_slug("r")); });
  EXPECT_TRUE(has_slug("r"));
}

// --- a foreign process holding the database ----------------------------------------------

/// The lock_holder process: holds the write lock from construction until release().
class ForeignLock {
 public:
  explicit ForeignLock(const std::filesystem::path& db)
      : child_(BEEHIVE_LOCK_HOLDER, {db.string()}) {
    if (child_.read_line() != "locked")
      throw std::runtime_error("lock_holder did not take the lock");
  }

  /// Commits and lets go; true when the process did so and exited cleanly.
  bool release() {
    if (!child_.write_line("")) return false;
    bool released = child_.read_line() == "released";
    return child_.wait() == 0 && released;
  }

 private:
  ChildProcess child_;
};

TEST_F(FaultTest, AForeignLockIsWaitedForWithinTheCallersDeadline) {
  open();
  auto cc = register_ready_controller();
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  ForeignLock lock(dir_.file("beehive.db"));

  // Reads do not wait for the lock.
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");

  // A within block whose deadline passes while it waits to begin gives up (and the
  // writer must not keep a session open for it).
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(cc.within(ctx_.with_timeout(100ms),
                        [&](const Context& tx) {
                          w.create(tx, {"inner", 1}, with_slug("inner"));
                        }),
              errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  // So does a write, which is not made later either.
  t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(w.create(ctx_.with_timeout(100ms), {"short", 1}, with_slug("short")),
              errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);

  // A caller with time to spare is served once the lock is released.
  auto late = std::async(std::launch::async, [w]() mutable {
    return w.create(Context{}.with_timeout(5s), {"late", 2}, with_slug("late")).id;
  });
  EXPECT_EQ(late.wait_for(150ms), std::future_status::timeout);  // still waiting for the lock
  ASSERT_TRUE(lock.release());
  ASSERT_EQ(late.wait_for(5s), std::future_status::ready);
  auto late_id = late.get();
  EXPECT_EQ(w.get(ctx_, late_id).spec.color, "late");

  EXPECT_FALSE(has_slug("short"));
  EXPECT_FALSE(has_slug("inner"));
  EXPECT_EQ(file_counts().objects, 2);
  // And the writer serves on.
  cc.within(ctx_, [&](const Context& tx) { w.create(tx, {"after", 3}, with_slug("after")); });
  EXPECT_TRUE(has_slug("after"));
}

TEST_F(FaultTest, AForeignLockHeldPastTheBusyTimeoutFailsTheWriteWithStore) {
  open({.busy_timeout = 200ms});
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  ForeignLock lock(dir_.file("beehive.db"));
  EXPECT_ERRC_WITH(w.create(ctx_, {"blocked", 1}, with_slug("blocked")), errc::store,
                   "database is locked");
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");
  ASSERT_TRUE(lock.release());
  EXPECT_FALSE(has_slug("blocked"));
  w.create(ctx_, {"blocked", 1}, with_slug("blocked"));
  EXPECT_TRUE(has_slug("blocked"));
}

// Opening takes the write lock for a moment (it starts the store's session): held by
// another process past the busy timeout, the open fails naming the file and the cause.
TEST_F(FaultTest, AnOpenBehindAForeignLockSaysWhichFileIsLockedAndWhy) {
  open();
  auto x = widgets().create(ctx_, {"x", 1});
  close();
  auto file = dir_.file("beehive.db");
  ForeignLock lock(file);
  sqlite::Options opts;
  opts.busy_timeout = 50ms;
  auto canonical = std::filesystem::canonical(file).string();
  EXPECT_ERRC_WITH(sqlite::open(file, opts), errc::store,
                   "sqlite: cannot open " + canonical + ": database is locked");
  EXPECT_ERRC_WITH(sqlite::open(file, opts), errc::store, "past busy_timeout, 50 ms");
  ASSERT_TRUE(lock.release());
  open();
  EXPECT_EQ(widgets().get(ctx_, x.id).spec.color, "x");
}

// SQLite takes the busy timeout as an int of milliseconds. A longer one was cast to
// garbage for readers and overflowed the writer's own wait into none, so a caller asking
// to wait for ever (milliseconds::max()) failed at once with "database is locked". Out
// of that range is refused before the file is touched; the longest allowed waits.
TEST_F(FaultTest, ABusyTimeoutOutsideSqlitesRangeIsRefusedAndTheLongestWaits) {
  const auto file = dir_.file("beehive.db");
  EXPECT_ERRC(sqlite::open(file, {.busy_timeout = -1ms}), errc::invalid_argument);
  EXPECT_ERRC(sqlite::open(file, {.busy_timeout = std::chrono::milliseconds::max()}),
              errc::invalid_argument);
  EXPECT_ERRC(sqlite::open(file, {.busy_timeout = 2147483648ms}), errc::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(file)) << "a refused open created the file";

  open({.busy_timeout = 2147483647ms});
  auto w = widgets();
  w.create(ctx_, {"x", 1});
  ForeignLock lock(file);
  auto waited = std::async(std::launch::async, [w]() mutable {
    return w.create(Context{}, {"waited", 2}).id;
  });
  EXPECT_EQ(waited.wait_for(300ms), std::future_status::timeout) << "it did not wait";
  ASSERT_TRUE(lock.release());
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(w.get(ctx_, waited.get()).spec.color, "waited");
}

// --- a full disk -------------------------------------------------------------------------

TEST_F(FaultTest, AFullDiskFailsWritesCleanlyAndRecoversOnceSpaceReturns) {
  open();
  auto cc = register_ready_controller();
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});

  // The disk fills up part-way through a run of writes.
  vfs_.set_free_space(128 * 1024);
  std::string big(2000, 'z');
  int made = 0;
  std::optional<Error> full;
  for (int i = 0; i < 1000 && !full; ++i) {
    try {
      w.create(ctx_, {big, i}, with_slug(std::string("f").append(std::to_string(i))));
      ++made;
    } catch (const Error& e) {
      full = e;
    }
  }
  ASSERT_TRUE(full) << "the disk never filled";
  EXPECT_EQ(full->value(), errc::store);
  EXPECT_NE(std::string(full->what()).find("database or disk is full"), std::string::npos)
      << full->what();
  EXPECT_GE(made, 1);
  EXPECT_FALSE(has_slug(std::string("f").append(std::to_string(made))));  // the one that failed

  // While it is full: every kind of write that needs room fails the same way, reads
  // work. (The failed create wrote part of its frames: a write small enough to fit in
  // what it left would land, as on a real disk; these need many more pages.)
  vfs_.set_free_space(0);
  const std::string huge(64 * 1024, 'h');
  EXPECT_ERRC_WITH(w.update(ctx_, x.id, {huge, 2}), errc::store, "database or disk is full");
  EXPECT_ERRC_WITH(cc.set_condition(ctx_, x.id, {"Ready", ConditionStatus::True, "R", huge}),
                   errc::store, "database or disk is full");
  EXPECT_ERRC_WITH(cc.within(ctx_,
                             [&](const Context& tx) {
                               w.create(tx, {huge, 1});
                             }),
                   errc::store, "database or disk is full");
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");
  EXPECT_TRUE(w.get(ctx_, x.id).conditions.empty());
  EXPECT_EQ(w.list(ctx_).size(), static_cast<std::size_t>(made + 1));

  // Space returns: writes succeed again, without reopening anything.
  vfs_.set_free_space(std::nullopt);
  EXPECT_EQ(w.update(ctx_, x.id, {"y", 2}).spec.color, "y");
  w.create(ctx_, {big, made}, with_slug(std::string("f").append(std::to_string(made))));
  cc.set_condition(ctx_, x.id, {"Ready", ConditionStatus::True, "R", "m"});
  EXPECT_EQ(w.get(ctx_, x.id).conditions.size(), 1u);
  EXPECT_EQ(file_counts().objects, made + 2);
}

// --- the writer ------------------------------------------------------------------------

// A writer that died and cannot be opened again serves no one meanwhile: a write, queued
// before or after, fails with errc::store and says why, instead of waiting for ever (a
// caller without a deadline) or until its deadline. The restart is tried again every
// restart_retry, and once the file opens the writes succeed again.
TEST_F(FaultTest, AWriterThatCannotBeRestartedFailsWritesUntilARetryRestartsIt) {
  LogCapture log;
  ControllerTest::open(with_logger(log.logger()));
  register_widgets();
  start();
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(x.id) == 1; }));
  vfs_.arm({.op = fault::Op::open, .files = fault::files::main_db, .count = -1});
  auto old = bh_->store_writer();
  caf::anon_send_exit(old, caf::exit_reason::kill);
  // Its replacement cannot open the file either: it fails at once, or at its first write.
  for (int i = 0; i < 3 && !log.contains("the store writer cannot be restarted"); ++i) {
    ASSERT_TRUE(eventually([&] { return bh_->store_writer() != old; }));
    old = bh_->store_writer();
    try {
      w.create(ctx_.with_timeout(10s), {"during", 1});
    } catch (const Error& e) {
      EXPECT_EQ(e.value(), errc::store) << e.what();
    }
  }
  ASSERT_TRUE(eventually([&] { return log.contains("the store writer cannot be restarted"); }));
  vfs_.clear();                           // the file opens again; no writer until the retry
  auto in_time = ctx_.with_timeout(10s);  // without the refusal, each write waits it out
  EXPECT_ERRC_WITH(w.create(in_time, {"y", 1}), errc::store, "cannot be restarted");
  EXPECT_ERRC_WITH(w.update(in_time, x.id, {"x", 2}), errc::store, "cannot be restarted");
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");  // reads go on

  // The retry's wake may be asked for after the log line: the clock moves until it came.
  ASSERT_TRUE(eventually([&] {
    if (bh_->store_writer()) return true;
    clock_->advance(detail::restart_retry);
    return false;
  }));
  w.update(in_time, x.id, {"x", 3});
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");
  EXPECT_EQ(w.get(ctx_, x.id).spec.size, 3);
  auto y = w.create(ctx_, {"y", 1});
  // The controller hears of the new writer's commits.
  EXPECT_TRUE(eventually([&] { return recorder_->count(y.id) == 1; }));
}

// A pass that fails is checked for its object still being there; a read failing then
// leaves the pass's own error the one reported (it was replaced by the read's).
TEST_F(FaultTest, APassWhoseFollowUpReadFailsReportsItsOwnError) {
  LogCapture log;
  ControllerTest::open(with_logger(log.logger()));
  std::atomic<bool> once{false};
  recorder_->set_body([&](auto& ctx, auto& cc, auto& o) -> Result {
    if (once.exchange(true)) return Result{};
    cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});  // the next read rereads
    vfs_.arm({.op = fault::Op::read,
              .files = fault::files::main_db | fault::files::wal,
              .threads = fault::Threads::this_one,
              .count = -1});
    throw std::runtime_error("backend 503");
  });
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return log.contains("reconcile failed"); }));
  vfs_.clear();
  EXPECT_TRUE(log.contains("backend 503"));
  EXPECT_TRUE(widgets().get(ctx_, o.id).status->ready);
}

// --- read connections --------------------------------------------------------------------

// The count of a kind's objects (beehive_objects) that cannot be read at start (the
// reader's connection fails to open) is read again after the kind's first retry
// interval; meanwhile the gauges say nothing rather than count only the commits since.
TEST_F(FaultTest, AKindsObjectCountThatFailedToReadIsReadAgain) {
  auto prom = std::make_shared<PrometheusMetrics>();
  ControllerTest::open(with_metrics(prom), with_logger(stderr_logger(LogLevel::error)));
  register_widgets(with_resync_interval(0ms), with_backoff(1s));
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 0});
  // The reader opens its first connection now: the count, asked for first, fails; the
  // listing that queues the objects, asked for next, opens another.
  vfs_.arm(
      {.op = fault::Op::open, .files = fault::files::main_db, .threads = fault::Threads::others});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(a.id) == 1; }));
  EXPECT_EQ(vfs_.injected(), 1);
  w.create(ctx_, {"b", 0});
  settle();
  auto objects = [&] { return prom->value(metric::objects, {{"kind", "Widget.acme.com"}}); };
  EXPECT_EQ(objects(), 0);  // not 1, the commit since
  clock_->advance(1s);
  EXPECT_TRUE(eventually([&] { return objects() == 2; }));
}

TEST_F(FaultTest, AFailingReadConnectionIsReplaced) {
  open({.read_connections = 1});
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "x");
  w.update(ctx_, x.id, {"y", 2});  // the reader must read the changed pages again

  // The read connection's file goes bad: this read fails, and so would every later one
  // on that connection.
  vfs_.arm({.op = fault::Op::read, .threads = fault::Threads::this_one, .poison = true});
  EXPECT_ERRC_WITH(w.get(ctx_, x.id), errc::store, "disk I/O error");
  vfs_.clear();
  // The next read runs on a fresh connection.
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "y");
  EXPECT_EQ(w.list(ctx_).size(), 1u);

  // A replacement that cannot be opened fails the read; the one after opens fine.
  vfs_.arm({.op = fault::Op::read, .threads = fault::Threads::this_one, .poison = true});
  w.update(ctx_, x.id, {"z", 3});
  EXPECT_ERRC(w.get(ctx_, x.id), errc::store);
  vfs_.clear();
  vfs_.arm(
      {.op = fault::Op::open, .files = fault::files::main_db, .threads = fault::Threads::this_one});
  EXPECT_ERRC_WITH(w.get(ctx_, x.id), errc::store, "unable to open database file");
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "z");
  EXPECT_GE(vfs_.injected(), 3);
}

}  // namespace
}  // namespace beehive::test
