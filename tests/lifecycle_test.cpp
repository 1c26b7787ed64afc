// Registration and lifecycle: start, stop, drain, store_in_use.

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <beehive/actors.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include "actors/root.hpp"          // private: restart_retry
#include "actors/spawn_faults.hpp"  // private: the thread a start cannot get
#include "beehive_core.hpp"         // private: next_timer
#include "controller_fixture.hpp"
#include "open_block.hpp"
#include "systems_left_running.hpp"  // private: the destructor that gave up
#include "writer_reopen_held.hpp"

namespace beehive::test {
namespace {

class LifecycleTest : public ControllerTest {
 protected:
  /// Starts with one widget whose pass waits at `gate`, ignoring its context (and so a
  /// stop's cancellation); returns once that pass has begun.
  void start_with_a_pass_stuck_at(Gate& gate) {
    recorder_->set_body([&gate](auto&, auto&, auto&) {
      gate.pass();
      return Result{};
    });
    register_widgets();
    widgets().create(ctx_, {"a", 1});
    start();
    gate.wait_entered();
  }
};

TEST_F(LifecycleTest, RegisterTwiceIsAlreadyRegistered) {
  register_widgets();
  EXPECT_ERRC(register_widgets(), errc::already_registered);
}

// Metrics and logs name a kind "Kind.group": a kind whose name reads as another's there
// is refused, rather than sharing its series.
TEST_F(LifecycleTest, AKindThatReadsAsAnotherRegisteredOneIsRefused) {
  register_widgets();  // Widget.acme.com
  auto noop = [](auto&, auto&, auto&) { return Result{}; };
  EXPECT_ERRC(
      (register_controller<WidgetSpec, WidgetStatus>(*bh_, GroupKind{"com", "Widget.acme"}, noop)),
      errc::invalid_argument);
  register_controller<WidgetSpec, WidgetStatus>(*bh_, GroupKind{"acme.org", "Widget"}, noop);
}

// An empty controller is refused when registered, not found out by the first pass (a null
// pointer would crash a worker; an empty function would fail every pass for ever).
TEST_F(LifecycleTest, RegisteringAnEmptyControllerIsInvalidArgument) {
  using Obj = Object<WidgetSpec, WidgetStatus>;
  struct Ctl {
    Result reconcile(const Context&, ControllerClient<WidgetStatus>&, const Obj&) { return {}; }
  };
  EXPECT_ERRC(
      (register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind, std::shared_ptr<Ctl>{})),
      errc::invalid_argument);
  EXPECT_ERRC(
      (register_controller<WidgetSpec, WidgetStatus>(
          *bh_, widget_kind,
          std::function<Result(const Context&, ControllerClient<WidgetStatus>&, const Obj&)>{})),
      errc::invalid_argument);
  register_widgets();  // nothing was registered
  start();
  auto o = widgets().create(ctx_, {"a", 1});
  settle();
  EXPECT_EQ(recorder_->count(o.id), 1);
}

// A stack dump or `top -H` of an application says which of beehive's threads is which:
// each detached actor names its thread (CAF would call every one "caf.actor").
TEST_F(LifecycleTest, BeehivesThreadsCarryTheirActorsNames) {
  register_widgets();
  start();
  auto o = widgets().create(ctx_, {"a", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  std::set<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.insert(name);
  }
  for (const char* name : {"bh.writer", "bh.store-read", "bh.reader", "bh.reconcile"})
    EXPECT_TRUE(names.count(name)) << name;
}

// An application that still holds an actor handle when it destroys a Beehive owning its
// actor system (CAF 0.17 ends that system only once every detached actor's handle is
// gone) gets its destructor back, after a grace period, with a warning: not a hang.
TEST_F(LifecycleTest, ABeehiveDestroyedWhileTheApplicationHoldsAnActorHandleReturns) {
  LogCapture log;
  open(with_logger(log.logger()));
  register_widgets();
  start();
  auto kept = actor_handles(*bh_);
  close();
  EXPECT_TRUE(log.contains("drop them before the Beehive"));
  EXPECT_EQ(detail::systems_left_running.exchange(0), 1);  // expected: not a failure
}

// A store serves one beehive until it stops (its session, write tokens and subscriptions
// are that beehive's): a second on the same Store is store_in_use meanwhile. Another open
// of the database serves a second beehive alongside, whose writes the first one hears.
TEST_F(LifecycleTest, AStoreServesOneBeehiveUntilItStops) {
  register_widgets();
  start();
  EXPECT_ERRC(Beehive{store_}, errc::store_in_use);
  Beehive client(open_test_store(dir_.file("beehive.db")));
  auto o = Widgets(client, widget_kind).create(ctx_, {"a", 1});
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  stop_(ctx_);
  Beehive next(store_);  // the first one stopped
  EXPECT_EQ(Widgets(next, widget_kind).get(ctx_, o.id).spec.color, "a");
}

TEST_F(LifecycleTest, RegisterAfterStartIsAlreadyStartedAndAfterStopIsStopped) {
  start();
  EXPECT_ERRC(register_widgets(), errc::already_started);
  stop_(ctx_);
  EXPECT_ERRC(register_widgets(), errc::stopped);
}

TEST_F(LifecycleTest, StartTwiceAndStartAfterStop) {
  start();
  EXPECT_ERRC(bh_->start(ctx_), errc::already_started);
  stop_(ctx_);
  stop_(ctx_);  // twice: a no-op
  EXPECT_ERRC(bh_->start(ctx_), errc::stopped);
}

TEST_F(LifecycleTest, CallsAfterStopAreStopped) {
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  stop_(ctx_);
  EXPECT_ERRC(w.get(ctx_, o.id), errc::stopped);
  EXPECT_ERRC(w.create(ctx_, {"b", 1}), errc::stopped);
  EXPECT_ERRC(w.remove(ctx_, o.id), errc::stopped);
}

TEST_F(LifecycleTest, CancelledStartContextAbortsStart) {
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto [cctx, cancel] = ctx_.with_cancel();
  cancel();
  EXPECT_ERRC(bh_->start(cctx), errc::cancelled);
  settle();
  EXPECT_EQ(recorder_->count(o.id), 0);
  start();  // a later start works
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
}

// Once begun, a start completes whatever its context does meanwhile: it ended stopped
// for good, which no later start could run. (Here the context is cancelled by the
// warning start logs for a database file others can read, a SQLite store's.)
TEST_F(LifecycleTest, AStartWhoseContextEndsWhileItRunsCompletes) {
  REQUIRE_SQLITE("the warning logged during start is about the SQLite file");
  auto [cctx, cancel] = ctx_.with_cancel();
  open(with_logger([cancel = cancel](LogLevel, std::string_view message, const LogFields&) {
    if (message.find("readable by") != std::string_view::npos) cancel();
  }));
  std::filesystem::permissions(dir_.file("beehive.db"), std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  stop_ = bh_->start(cctx);
  EXPECT_TRUE(cctx.done());
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  EXPECT_ERRC(bh_->start(ctx_), errc::already_started);
}

std::size_t threads_of_this_process() {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& t : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Each reconcile worker is a thread. A start the system refuses one (a process at its
// thread limit; injected here after two of four) failed to notice: it returned as if
// started, with no controller running. It now fails saying why, the workers that did
// spawn end, the store is not held (another beehive starts on it), and this beehive is
// stopped.
// The reader, the store writer and the watch hub are threads too. A beehive whose
// construction could not spawn one (the process at its thread limit) hung in its
// constructor for ever: the actors that did spawn kept the actor system from ending. It
// now throws saying why, and leaves nothing running; the store serves another beehive.
TEST_F(LifecycleTest, ABeehiveThatCannotSpawnItsActorsThrowsAndLeavesNothingRunning) {
  auto o = widgets().create(ctx_, {"a", 1});
  bh_.reset();  // the store serves one beehive at a time
  const auto threads = threads_of_this_process();
  for (int spawned : {0, 1, 2}) {
    detail::faults::open_spawns_before_failure = spawned;
    SCOPED_TRACE(spawned);
    EXPECT_ERRC_WITH([&] { Beehive failed(store_); }(), errc::store, "actor thread");
    detail::faults::open_spawns_before_failure = -1;
  }
  EXPECT_TRUE(eventually([&] { return threads_of_this_process() <= threads; }))
      << threads_of_this_process() << " threads, " << threads << " before";
  Beehive other(store_);
  Widgets w(other, widget_kind);
  EXPECT_EQ(w.update(ctx_, o.id, {"b", 2}).spec.color, "b");
}

// A restart that cannot get its threads (a process at its thread limit) leaves the
// supervisor up: it tries again every restart_retry, and meanwhile restarts the rest.
TEST_F(LifecycleTest, ARestartThatCannotSpawnAWorkerIsTriedAgainLater) {
  LogCapture log;
  open(with_logger(log.logger()));
  register_widgets(with_concurrency(2));
  auto w = widgets();
  start();
  // Fails at once, or after the first of its two workers; the next restart succeeds.
  auto restart_failing_after = [&](int spawns, const caf::actor& victim, const char* what) {
    SCOPED_TRACE(what);
    auto o = w.create(ctx_, {what, 1});
    ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
    detail::faults::worker_spawns_before_failure = spawns;
    caf::anon_send_exit(victim, caf::exit_reason::kill);
    ASSERT_TRUE(eventually([&] { return detail::faults::worker_spawns_before_failure == -1; }));
    ASSERT_TRUE(eventually([&] { return log.contains("cannot be restarted"); }));
    // Still supervising: a crash elsewhere is restarted.
    auto old_gc = bh_->gc();
    caf::anon_send_exit(old_gc, caf::exit_reason::kill);
    ASSERT_TRUE(eventually([&] { return bh_->gc() && bh_->gc() != old_gc; }));
    w.update(ctx_, o.id, {what, 2});
    settle();
    EXPECT_EQ(recorder_->count(o.id), 1);  // no controller until the retry
    clock_->advance(detail::restart_retry);
    EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }));
  };
  restart_failing_after(0, caf::actor_cast<caf::actor>(*bh_->controller(widget_kind)),
                        "controller");
  restart_failing_after(1, caf::actor_cast<caf::actor>(bh_->scheduler()), "scheduler");
}

// Near the clock's end the retry's due time saturates at it ("never", as every timer
// there): it overflowed into the past, so that the retry came at once (undefined
// behaviour, and no spacing between retries).
TEST_F(LifecycleTest, ARestartRetryAtTheEndOfTimeWaitsForTheClock) {
  LogCapture log;
  open(with_logger(log.logger()));
  register_widgets();
  auto w = widgets();
  start();
  auto o = w.create(ctx_, {"o", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  clock_->set(Time::max() - 500ms);
  settle();
  int before = recorder_->count(o.id);  // the resync that came due
  detail::faults::worker_spawns_before_failure = 0;
  caf::anon_send_exit(caf::actor_cast<caf::actor>(*bh_->controller(widget_kind)),
                      caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return log.contains("cannot be restarted"); }));
  w.update(ctx_, o.id, {"o", 2});
  settle();
  EXPECT_EQ(recorder_->count(o.id), before);  // no controller: the retry is not due
}

// A settle while the store writer is being restarted (its connection opening) waits for
// its successor and for the work that needed it: it used to count no writer as quiet and
// return while a pass waited to write.
TEST_F(LifecycleTest, SettleWaitsForAStoreWriterBeingRestarted) {
  LogCapture log;  // the supervisor logs the restart
  open(with_logger(log.logger()));
  Gate gate;
  recorder_->set_body([&](auto& ctx, auto& cc, auto& o) {
    gate.pass();
    cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
    return Result{};
  });
  register_widgets();
  auto o = widgets().create(ctx_, {"o", 1});
  start();
  gate.wait_entered();
  WriterReopenHeld held(*bh_);
  ASSERT_TRUE(held.writer_gone());  // opening its successor
  gate.open();                      // the pass's status write waits for the writer
  auto settled = std::async(std::launch::async, [&] { settle(); });
  // Not quiet while the writer is missing (a timed wait that only a wrong answer ends).
  EXPECT_EQ(settled.wait_for(100ms), std::future_status::timeout);
  held.release();
  settled.get();
  EXPECT_TRUE(widgets().get(ctx_, o.id).status->ready);
}

// A settle waiting for a writer being restarted is answered when the beehive stops
// meanwhile: the successor it waited for will not come.
TEST_F(LifecycleTest, ASettleWaitingForARestartingWriterEndsWithTheStop) {
  LogCapture log;  // the supervisor logs the restart
  open(with_logger(log.logger()));
  register_widgets();
  start();
  settle();
  WriterReopenHeld held(*bh_);
  ASSERT_TRUE(held.writer_gone());
  auto settled = std::async(std::launch::async, [&] { settle(); });
  EXPECT_EQ(settled.wait_for(100ms), std::future_status::timeout);
  stop_(ctx_.with_timeout(5s));
  stop_ = nullptr;
  ASSERT_EQ(settled.wait_for(10s), std::future_status::ready);
  EXPECT_ERRC(settled.get(), errc::stopped);
}

TEST_F(LifecycleTest, AStartThatCannotSpawnAWorkerFailsAndLeavesNothingRunning) {
  register_widgets(with_concurrency(4));
  auto o = widgets().create(ctx_, {"a", 1});
  const auto threads = threads_of_this_process();
  detail::faults::worker_spawns_before_failure = 2;
  EXPECT_ERRC_WITH(bh_->start(ctx_), errc::stopped, "worker thread");
  EXPECT_EQ(detail::faults::worker_spawns_before_failure.load(), -1);
  EXPECT_TRUE(eventually([&] { return threads_of_this_process() <= threads; }))
      << threads_of_this_process() << " threads, " << threads << " before the start";
  EXPECT_ERRC(bh_->start(ctx_), errc::stopped);
  EXPECT_EQ(recorder_->count(o.id), 0);

  Beehive other(store_);
  auto other_recorder = std::make_shared<Recorder>();
  register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind,
      [r = other_recorder](auto& ctx, auto& cc, auto& obj) { return (*r)(ctx, cc, obj); });
  auto stop_other = other.start(ctx_);
  EXPECT_TRUE(eventually([&] { return other_recorder->count(o.id) == 1; }));
  stop_other(ctx_);
}

/// What the store holds, down to each row version: SQLite's data_version as seen by a
/// connection of its own (it moves whenever another connection commits), or on
/// PostgreSQL every row's (ctid, xmin, xmax) in the schema's tables (an update, insert,
/// delete or row lock changes them). The leadership lease is left out: renewing it is a
/// standing PostgreSQL leader's one write.
class StoreFingerprint {
 public:
  explicit StoreFingerprint(std::filesystem::path path) : path_(std::move(path)) {
    if (!test_backend_is_postgres()) sqlite_.emplace(path_.string(), SQLite::OPEN_READONLY);
  }
  std::vector<std::vector<std::string>> take() {
    if (sqlite_) return {{std::to_string(sqlite_->execAndGet("PRAGMA data_version").getInt64())}};
    std::string sql;
    for (const char* table : {"beehive_meta", "objects", "conditions", "refs", "events", "labels",
                              "change_log", "write_tokens", "beehive_schema"}) {
      if (!sql.empty()) sql += " UNION ALL ";
      sql +=
          std::string("SELECT '") + table + "', ctid::text, xmin::text, xmax::text FROM " + table;
    }
    return query_test_store(path_, sql + " ORDER BY 1, 2");
  }

 private:
  std::filesystem::path path_;
  std::optional<SQLite::Database> sqlite_;
};

// The performance rule "idle: no writes", as a test on both backends: a resync reads the
// kind's unsettled objects (there are none), the garbage collector and the event-log
// sweeps find nothing to do, and none of them writes.
TEST_F(LifecycleTest, AnIdleBeehiveWritesNothingThroughResyncsAndSweeps) {
  open(with_resync_interval(10s));
  recorder_->set_body([](const Context& ctx, ControllerClient<WidgetStatus>& cc,
                         const Object<WidgetSpec, WidgetStatus>& o) {
    cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
    cc.set_condition(ctx, o.id, {"Ready", ConditionStatus::True, "Reconciled"});
    return Result{};
  });
  register_widgets();
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(w.create(ctx_, {"a", i}).id);
  start();
  settle();
  StoreFingerprint store(dir_.file("beehive.db"));
  const auto before = store.take();
  const auto passes = recorder_->total();
  for (int i = 0; i < 6; ++i) {  // six resync (and GC) cadences
    clock_->advance(10s);
    settle();
  }
  EXPECT_EQ(store.take(), before) << "an idle beehive wrote";
  EXPECT_EQ(recorder_->total(), passes) << "a resync reconciled settled objects";
}

TEST_F(LifecycleTest, ClientsWorkBeforeStart) {
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 1);
  settle();
  EXPECT_EQ(recorder_->total(), 0);  // nothing reconciles before start
}

TEST_F(LifecycleTest, SecondRunningBeehiveOnTheSameFileIsStoreInUse) {
  REQUIRE_SQLITE("the file's process claim; on PostgreSQL a second beehive is a standby");
  start();
  auto other_store = sqlite::open(dir_.file("beehive.db"));
  auto other = std::make_unique<Beehive>(other_store);
  EXPECT_ERRC(other->start(ctx_), errc::store_in_use);
  stop_(ctx_);
  auto other_stop = other->start(ctx_);  // free again once the first stopped
  other_stop(ctx_);
}

// A stop that gave up on a reconcile still running keeps the database claimed until
// that pass ends and the beehive goes: another beehive started on it meanwhile would
// reconcile the object the pass holds, at the same time.
TEST_F(LifecycleTest, AStopThatLeftAPassRunningKeepsTheDatabaseClaimed) {
  REQUIRE_SQLITE("the file's process claim; on PostgreSQL a second beehive is a standby");
  Gate gate;
  start_with_a_pass_stuck_at(gate);
  EXPECT_ERRC(stop_(Context{}.with_timeout(100ms)), errc::deadline_exceeded);
  auto other_store = sqlite::open(dir_.file("beehive.db"));
  auto other = std::make_unique<Beehive>(other_store);
  EXPECT_ERRC(other->start(ctx_), errc::store_in_use);
  gate.open();
  bh_.reset();  // waits for the pass, then lets the database go
  auto other_stop = other->start(ctx_);
  other_stop(ctx_);
}

TEST_F(LifecycleTest, StopWaitsForAnInFlightReconcile) {
  Gate gate;
  std::atomic<bool> finished{false};
  recorder_->set_body([&](auto&, auto&, auto&) {
    gate.pass();
    finished = true;
    return Result{};
  });
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  gate.wait_entered();
  auto stopping = std::async(std::launch::async, [&] { stop_(Context{}.with_timeout(10s)); });
  EXPECT_EQ(stopping.wait_for(50ms), std::future_status::timeout);
  EXPECT_ERRC(widgets().get(ctx_, o.id), errc::stopped);  // new calls are refused
  gate.open();
  stopping.get();
  EXPECT_TRUE(finished);
}

TEST_F(LifecycleTest, StopCancelsTheContextOfReconcilesInFlight) {
  LogCapture log;
  open(with_logger(log.logger()));
  std::promise<void> entered;
  std::promise<std::error_code> seen;
  std::atomic<bool> done_at_entry{true};
  auto w = widgets();
  recorder_->set_body([&](auto& rctx, auto& cc, auto& o) {
    done_at_entry = rctx.done();
    entered.set_value();
    // Blocks on its context alone, as a reconcile waiting on I/O with it would (a
    // watch opened after the cancellation refuses at once).
    try {
      auto events = w.watch_events(rctx, o.id);
      while (events.next()) {
      }
    } catch (const Error&) {
    }
    seen.set_value(rctx.error());
    // A write with the cancelled context fails and writes nothing; the pass fails.
    cc.update_status(rctx, o.id, o.generation, WidgetStatus{true});
    return Result{};
  });
  register_widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  entered.get_future().wait();
  EXPECT_FALSE(done_at_entry);
  stop_(Context{});  // no deadline: returns because the reconcile saw its context end
  EXPECT_EQ(seen.get_future().get(), make_error_code(errc::cancelled));
  EXPECT_EQ(recorder_->count(o.id), 1);  // not retried
  EXPECT_FALSE(log.contains("reconcile failed"));
  close();
  auto reopened_store = open_test_store(dir_.file("beehive.db"));
  Beehive reopened(reopened_store);
  EXPECT_FALSE(Widgets(reopened, widget_kind).get(ctx_, o.id).status.has_value());
}

// A reconcile that turns its context's cancellation into a TerminalError (as one that
// gives up on any failure would) has not failed for good: stop cancelled it. Nothing is
// logged or recorded as a terminal error.
TEST_F(LifecycleTest, ATerminalErrorRaisedBecauseStopCancelledThePassIsNotReported) {
  LogCapture log;
  open(with_logger(log.logger()));
  std::promise<void> entered;
  auto w = widgets();
  recorder_->set_body([&](auto& rctx, auto&, auto&) -> Result {
    entered.set_value();
    while (!rctx.done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    throw TerminalError("gave up: " + rctx.error().message());
  });
  register_widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  entered.get_future().wait();
  stop_(Context{});
  EXPECT_FALSE(log.contains("terminal error"));
  close();
  open();
  for (const auto& e : widgets().list_events(ctx_, o.id)) EXPECT_NE(e.reason, "TerminalError");
}

TEST_F(LifecycleTest, StopFromInsideAReconcileIsRefusedInsteadOfDeadlocking) {
  std::promise<std::error_code> refused;
  std::atomic<bool> once{false};
  std::promise<void> started;
  auto started_f = started.get_future().share();
  recorder_->set_body([&](auto&, auto&, auto&) {
    if (!once.exchange(true)) {
      started_f.wait();  // stop_ is set
      try {
        stop_(Context{});
        refused.set_value({});
      } catch (const Error& e) {
        refused.set_value(e.code());
      }
    }
    return Result{};
  });
  register_widgets();
  widgets().create(ctx_, {"a", 1});
  start();
  started.set_value();
  auto f = refused.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), make_error_code(errc::invalid_argument));
  EXPECT_NO_THROW(stop_(Context{}.with_timeout(10s)));
}

// The refusal is this beehive's own: a reconcile of one beehive may settle and stop
// another (an application that runs a control plane per tenant), and stopping one that
// already stopped is the no-op it is anywhere else.
TEST_F(LifecycleTest, AReconcileMayStopAnotherBeehive) {
  Beehive tenant(open_test_store(dir_.file("tenant.db")));
  Widgets(tenant, gadget_kind).create(ctx_, {"t", 1});
  auto stop_tenant = tenant.start(ctx_);
  std::promise<std::string> outcome;
  std::atomic<bool> once{false};
  recorder_->set_body([&](auto& rctx, auto&, auto&) {
    if (!once.exchange(true)) try {
        beehive::testing::settle(tenant, rctx);
        stop_tenant(rctx);
        stop_tenant(rctx);  // stopped already: a no-op
        EXPECT_ERRC(Widgets(tenant, gadget_kind).list(Context{}), errc::stopped);
        outcome.set_value("stopped");
      } catch (const Error& e) {
        outcome.set_value(e.what());
      }
    return Result{};
  });
  register_widgets();
  widgets().create(ctx_, {"a", 1});
  start();
  auto f = outcome.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), "stopped");
}

TEST_F(LifecycleTest, StopInsideAWithinBlockIsRefused) {
  auto cc = register_widgets();
  start();
  std::error_code code;
  cc.within(ctx_, [&](const Context& tx) {
    widgets().create(tx, {"a", 1});
    try {
      stop_(Context{});
    } catch (const Error& e) {
      code = e.code();
    }
  });
  EXPECT_EQ(code, make_error_code(errc::invalid_argument));
  EXPECT_EQ(widgets().list(ctx_).size(), 1u);
}

/// A within block on an application thread that is still open at stop's deadline: stop
/// returns at the deadline, the block is rolled back, and its later steps fail stopped.
TEST_F(LifecycleTest, StopReturnsAtItsDeadlineWhileAWithinBlockIsOpen) {
  auto cc = register_widgets();
  auto w = widgets();
  auto before = w.create(ctx_, {"before", 1});
  start();
  OpenBlock block(
      cc, ctx_,
      [&](const Context& tx) {
        w.update(tx, before.id, {"changed", 2});
        w.create(tx, {"inside", 1});
      },
      [&](const Context& tx) {
        w.create(tx, {"after stop", 1});
      });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(stop_(Context{}.with_timeout(200ms)), errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 200ms + 5s);
  EXPECT_ERRC(block.get(), errc::stopped);
  close();
  auto reopened_store = open_test_store(dir_.file("beehive.db"));
  Beehive reopened(reopened_store);
  Widgets again(reopened, widget_kind);
  auto all = again.list(ctx_);
  ASSERT_EQ(all.size(), 1u);  // nothing of the block
  EXPECT_EQ(all[0].spec.color, "before");
}

/// The same while the block writes back to back: the writer, busy with the block's
/// writes, still gets to stop's abort, so stop keeps its deadline and the block is rolled
/// back (it used to run until the block paused, then commit).
TEST_F(LifecycleTest, StopKeepsItsDeadlineWhileAWithinBlockWritesWithoutPause) {
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 0});
  start();
  std::atomic<bool> quit{false};
  std::promise<void> in;
  auto block = std::async(std::launch::async, [&] {
    cc.within(ctx_, [&](const Context& tx) {
      in.set_value();
      for (int i = 1; !quit; ++i) w.update(tx, o.id, {"busy", i});
    });
  });
  in.get_future().wait();
  auto stopping = std::async(std::launch::async, [&] { stop_(Context{}.with_timeout(200ms)); });
  auto status = stopping.wait_for(3s);  // 200 ms, and time to roll the block back
  quit = true;
  ASSERT_EQ(status, std::future_status::ready) << "stop overran its deadline";
  EXPECT_ERRC(stopping.get(), errc::deadline_exceeded);
  EXPECT_ERRC(block.get(), errc::stopped);
  close();
  auto reopened_store = open_test_store(dir_.file("beehive.db"));
  Beehive reopened(reopened_store);
  Widgets again(reopened, widget_kind);
  EXPECT_EQ(again.get(ctx_, o.id).spec.color, "o");  // nothing of the block
}

/// A stop called while another is in progress keeps to its own deadline, and so does a
/// registration: neither waits for the first stop to finish.
TEST_F(LifecycleTest, AStopDuringAnotherKeepsToItsOwnDeadline) {
  auto cc = register_widgets();
  start();
  // Held at most 10 s: the first stop has no deadline.
  OpenBlock block(
      cc, ctx_,
      [&](const Context& tx) {
        widgets().create(tx, {"inside", 1});
      },
      {}, 10s);
  auto stop = stop_;
  auto first = std::async(std::launch::async, [&] { stop(Context{}); });
  // The first stop is under way once a read is refused.
  ASSERT_TRUE(eventually([&] {
    try {
      widgets().list(ctx_);
      return false;
    } catch (const Error& e) {
      return e.value() == errc::stopped;
    }
  }));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(stop(Context{}.with_timeout(200ms)), errc::deadline_exceeded);
  auto [cancellable, cancel] = Context{}.with_cancel();
  cancel();
  EXPECT_ERRC(stop(cancellable), errc::cancelled);
  auto idle = [](auto&, auto&, auto&) { return Result{}; };
  EXPECT_ERRC((register_controller<WidgetSpec, WidgetStatus>(*bh_, {"acme.com", "Gadget"}, idle)),
              errc::stopped);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  block.get();
  first.get();
  EXPECT_NO_THROW(stop(Context{}.with_timeout(1s)));  // stopped: nothing left to do
}

/// The same with the block in a reconcile that ignores its cancelled context.
TEST_F(LifecycleTest, StopReturnsAtItsDeadlineWhileAReconcileHoldsAWithinBlockOpen) {
  Gate gate;
  std::promise<std::error_code> outcome;
  std::atomic<bool> once{false};
  recorder_->set_body([&](auto& rctx, auto& cc, auto& o) {
    if (once.exchange(true)) return Result{};
    try {
      cc.within(rctx, [&](const Context& tx) {
        cc.update_status(tx, o.id, o.generation, WidgetStatus{true});
        gate.pass();  // ignores the cancellation
        cc.update_status(tx, o.id, o.generation, WidgetStatus{false});
      });
      outcome.set_value({});
    } catch (const Error& e) {
      outcome.set_value(e.code());
    }
    return Result{};
  });
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  gate.wait_entered();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(stop_(Context{}.with_timeout(200ms)), errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 200ms + 5s);
  gate.open();
  auto f = outcome.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_NE(f.get(), std::error_code{});  // the block did not commit
  bh_.reset();                            // waits for the reconcile
  store_.reset();
  stop_ = nullptr;
  auto reopened_store = open_test_store(dir_.file("beehive.db"));
  Beehive reopened(reopened_store);
  EXPECT_FALSE(Widgets(reopened, widget_kind).get(ctx_, o.id).status.has_value());
}

TEST_F(LifecycleTest, StopDispatchesNothingMoreOnceItBegins) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->hold(gate, "blocker");
  register_widgets(with_concurrency(1));
  auto w = widgets();
  auto blocker = w.create(ctx_, {"blocker", 0});
  start();
  gate.wait_entered();
  std::vector<ObjectID> queued;
  for (int i = 0; i < 5; ++i) queued.push_back(w.create(ctx_, {"queued", i}).id);
  for (auto id : queued) EXPECT_TRUE(scheduled_at(id, clock_->now()));  // behind the blocker
  auto controller = *bh_->controller(widget_kind);
  auto dispatching = [&] {
    caf::scoped_actor self{controller->home_system()};
    bool out = true;
    self->request(controller, std::chrono::seconds(10), inspect_atom::value)
        .receive([&](const controller_state& st) { out = st.dispatching; }, [](caf::error&) {});
    return out;
  };
  EXPECT_TRUE(dispatching());
  auto stopping = std::async(std::launch::async, [&] { stop_(Context{}.with_timeout(10s)); });
  // The blocker is released once the controller has acknowledged the drain; if it went
  // on dispatching, the next queued id would run (and stop would wait for it).
  EXPECT_TRUE(eventually([&] { return !dispatching(); }, 2s));  // well within stop's 10 s
  gate.open();
  EXPECT_NO_THROW(stopping.get());
  EXPECT_EQ(recorder_->count(blocker.id), 1);  // the one in flight completed
  for (auto id : queued) EXPECT_EQ(recorder_->count(id), 0) << id;
  EXPECT_EQ(recorder_->total(), 1);
}

// Stop cancels the reconciles in flight before the controllers hear that it stopped
// dispatching: a pass that ends on the cancellation must not hand the worker the next
// queued object, whose reconcile would start with its context already ended. A race,
// so the test runs it many times.
TEST_F(LifecycleTest, NoReconcileStartsOnceStopHasCancelledTheOnesInFlight) {
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE(round);
    open();
    std::atomic<int> started_after_cancel{0};
    std::promise<void> entered;
    std::atomic<bool> first{true};
    recorder_->set_body([&](auto& rctx, auto&, auto& o) {
      if (rctx.done()) ++started_after_cancel;
      if (o.spec.color == "blocker" && first.exchange(false)) {
        entered.set_value();
        while (!rctx.done()) std::this_thread::sleep_for(100us);  // until stop cancels it
      }
      return Result{};
    });
    auto stop_first = stop_before_locals();
    register_widgets(with_concurrency(1));
    auto w = widgets();
    w.create(ctx_, {"blocker", 0});
    start();
    entered.get_future().wait();
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(scheduled_at(w.create(ctx_, {"queued", i}).id, clock_->now()));
    stop_(Context{}.with_timeout(10s));
    stop_ = nullptr;
    EXPECT_EQ(started_after_cancel.load(), 0);
  }
}

TEST_F(LifecycleTest, StuckReconcileMakesStopThrowDeadlineExceeded) {
  std::promise<void> entered;
  std::promise<void> release;
  auto release_f = release.get_future().share();
  recorder_->set_body([&](auto&, auto&, auto&) {
    entered.set_value();
    release_f.wait();
    return Result{};
  });
  register_widgets();
  widgets().create(ctx_, {"a", 1});
  start();
  entered.get_future().wait();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(stop_(Context{}.with_timeout(100ms)), errc::deadline_exceeded);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms + 5s);  // gives up at the deadline
  EXPECT_ERRC(widgets().list(ctx_), errc::stopped);              // stopped either way
  stop_(ctx_);                                                   // a second stop is a no-op
  release.set_value();
  bh_.reset();  // waits for the released reconcile, before the locals it uses go away
}

/// A stop whose context has no deadline but is cancelled while a reconcile ignores its
/// own cancellation: stop gives up when the cancel comes, as at a deadline, and says so.
TEST_F(LifecycleTest, AStopCancelledWhileAReconcileIsStuckThrowsCancelledAndStops) {
  Gate gate;
  start_with_a_pass_stuck_at(gate);
  auto [c, cancel] = Context{}.with_cancel();
  auto stopping = std::async(std::launch::async, [&, c = c] { stop_(c); });
  ASSERT_TRUE(eventually([&] {  // draining once it refuses calls
    try {
      widgets().list(ctx_);
      return false;
    } catch (const Error& e) {
      return e.code() == make_error_code(errc::stopped);
    }
  }));
  EXPECT_EQ(stopping.wait_for(100ms), std::future_status::timeout);  // it waits for the pass
  cancel();
  ASSERT_EQ(stopping.wait_for(5s), std::future_status::ready) << "stop ignored its cancel";
  EXPECT_ERRC(stopping.get(), errc::cancelled);
  EXPECT_ERRC(widgets().list(ctx_), errc::stopped);
  stop_(ctx_);  // a second stop is a no-op
  gate.open();
  bh_.reset();  // waits for the released reconcile
}

/// The same for a within block left open on another thread: a stop with a context
/// already cancelled rolls it back at once.
TEST_F(LifecycleTest, AStopWithACancelledContextRollsBackAnOpenWithinBlock) {
  auto cc = register_widgets();
  auto w = widgets();
  start();
  OpenBlock block(
      cc, ctx_,
      [&](const Context& tx) {
        w.create(tx, {"inside", 1});
      },
      [&](const Context& tx) {
        w.create(tx, {"after stop", 1});
      });
  auto [c, cancel] = Context{}.with_cancel();
  cancel();
  auto stopping = std::async(std::launch::async, [&, c = c] { stop_(c); });
  ASSERT_EQ(stopping.wait_for(5s), std::future_status::ready) << "stop hung on the open block";
  EXPECT_ERRC(stopping.get(), errc::cancelled);
  EXPECT_ERRC(block.get(), errc::stopped);
  close();
  open();
  EXPECT_TRUE(widgets().list(ctx_).empty());  // nothing of the block
}

// A within block can outlive stop (stop gave up on it and rolled it back): a watch it
// opens afterwards throws stopped, as any watch opened after stop does. One hung until
// its context ended: the watch was handed to the watch hub that had gone.
TEST_F(LifecycleTest, AWatchOpenedInABlockThatOutlivedStopIsStopped) {
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  std::map<std::string, std::error_code> got;
  OpenBlock block(
      cc, ctx_, [](const Context&) {},
      [&](const Context& tx) {
        auto bounded = tx.with_timeout(10s);  // the test ends, the bug or not
        auto opening = [&](const std::string& name, const std::function<void()>& open) {
          try {
            open();
            got[name] = {};
          } catch (const Error& e) {
            got[name] = e.code();
          }
        };
        opening("watch", [&] { w.watch(bounded, o.id); });
        opening("watch_list", [&] { w.watch_list(bounded); });
        opening("watch_events", [&] { w.watch_events(bounded, o.id); });
        opening("watch_schedule", [&] { w.watch_schedule(bounded, o.id); });
      });
  EXPECT_ERRC(stop_(Context{}.with_timeout(200ms)), errc::deadline_exceeded);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(block.get(), errc::stopped);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "a watch waited for its deadline";
  ASSERT_EQ(got.size(), 4u);
  for (auto& [name, code] : got) EXPECT_EQ(code, make_error_code(errc::stopped)) << name;
}

// A stop that gives up at once (its context already ended) while no within block is
// open must not claim that it rolled one back: a caller would redo work that committed.
TEST_F(LifecycleTest, AStopThatGivesUpWithNoBlockOpenDoesNotClaimARollback) {
  auto w = widgets();
  w.create(ctx_, {"kept", 1});
  start();
  auto [c, cancel] = Context{}.with_cancel();
  cancel();
  try {
    stop_(c);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("within block"), std::string::npos) << e.what();
  }
  stop_ = nullptr;
}

// A stop given a context that has already ended gives up at once, but with nothing in
// flight it drained all the same: it returns, not "reconciles still running".
TEST_F(LifecycleTest, AStopGivenAnEndedContextWithNothingInFlightReturns) {
  register_widgets();
  widgets().create(ctx_, {"a", 1});
  start();
  settle();
  EXPECT_NO_THROW(stop_(Context{}.with_timeout(-1ms)));
  stop_ = nullptr;
  close();
  open();
  register_widgets();
  start();
  settle();
  auto [c, cancel] = Context{}.with_cancel();
  cancel();
  EXPECT_NO_THROW(stop_(c));
  stop_ = nullptr;
}

TEST_F(LifecycleTest, DestructorStopsARunningBeehive) {
  register_widgets(with_concurrency(2));
  for (int i = 0; i < 10; ++i) widgets().create(ctx_, {"a", i});
  start();
  bh_.reset();  // must not hang or crash
  stop_(ctx_);  // the stop function outliving its beehive is a no-op
  stop_ = nullptr;
}

TEST_F(LifecycleTest, DestructorWaitsForAnInFlightReconcile) {
  Gate gate;
  std::atomic<bool> finished{false}, destroyed{false}, destroyed_before_release{true};
  std::atomic<bool> cancelled_seen{false};
  recorder_->set_body([&](auto& rctx, auto&, auto&) {
    gate.pass();
    cancelled_seen = rctx.done();  // the destructor's stop cancelled it
    finished = true;
    return Result{};
  });
  register_widgets();
  widgets().create(ctx_, {"a", 1});
  start();
  gate.wait_entered();
  // Destroyed on this thread while another releases the reconcile a little later.
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    destroyed_before_release = destroyed.load();
    gate.open();
  });
  bh_.reset();
  destroyed = true;
  releaser.join();
  EXPECT_FALSE(destroyed_before_release);  // it waited for the reconcile
  EXPECT_TRUE(finished);                   // and returned only after it
  EXPECT_TRUE(cancelled_seen);
  stop_(ctx_);  // outliving its beehive: a no-op
  stop_ = nullptr;
}

TEST_F(LifecycleTest, ABeehiveMayBeDestroyedOnAnotherThread) {
  // CAF 0.17 alone hangs destroying a system while another thread that spawned in it
  // lives; the beehive's calls let their threads go of it.
  register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(a.id) == 1; }));
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([stop = std::exchange(stop_, nullptr), bh = std::move(bh_), store = std::move(store_),
               done]() mutable {
    stop(Context{});
    bh.reset();
    store.reset();
    *done = true;
  }).detach();
  EXPECT_TRUE(eventually([&] { return done->load(); }, 10s));
}

// The test kit's advance reads the timers from the test's thread; a thread that did so
// and lives on must not keep a Beehive that owns its actor system from ending it.
TEST_F(LifecycleTest, ABeehiveWhoseTimersWereReadOnAThreadThatLivesOnEndsItsSystem) {
  register_widgets();
  start();
  std::promise<void> read, release;
  std::thread reading([&, done = release.get_future()] {
    bh_->core()->next_timer();
    read.set_value();
    done.wait();
  });
  read.get_future().wait();
  close();
  EXPECT_EQ(detail::systems_left_running.exchange(0), 0);
  release.set_value();
  reading.join();
}

// Deadline::max() as a stop's deadline means "no deadline" in practice: the stop waits
// for the running pass (it gave up at once: the deadline overflowed in the actors' clock).
TEST_F(LifecycleTest, AStopWithTheLatestDeadlineWaitsForThePass) {
  Gate gate;
  recorder_->hold(gate, "held");
  register_widgets();
  auto o = widgets().create(ctx_, {"held", 1});
  start();
  gate.wait_entered();
  auto stopping = std::async(std::launch::async, [&] {
    std::exchange(stop_, nullptr)(Context{}.with_deadline(Context::Deadline::max()));
  });
  EXPECT_EQ(stopping.wait_for(200ms), std::future_status::timeout) << "stop gave up at once";
  gate.open();
  stopping.get();  // no deadline_exceeded
  EXPECT_EQ(recorder_->count(o.id), 1);
}

TEST_F(LifecycleTest, ControllerAcceptsASharedPtrToAController) {
  struct Counting : Controller<WidgetSpec, WidgetStatus> {
    std::atomic<int> n{0};
    Result reconcile(const Context&, ControllerClient<WidgetStatus>&,
                     const Object<WidgetSpec, WidgetStatus>&) override {
      ++n;
      return {};
    }
  };
  auto c = std::make_shared<Counting>();
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind, c);
  widgets().create(ctx_, {"a", 1});
  start();
  EXPECT_TRUE(eventually([&] { return c->n == 1; }));
}

TEST(LifecycleCycleTest, AControllerHoldingAClientDoesNotKeepTheStoreOpen) {
  TempDir dir;
  std::weak_ptr<Store> weak;
  {
    auto store = open_test_store(dir.file("c.db"));
    weak = store;
    Beehive bh(store);
    Widgets gadgets(bh, gadget_kind);  // wired once, as the reference suggests
    register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind, [gadgets](auto&, auto&, auto&) {
      (void)gadgets;
      return Result{};
    });
    store.reset();
    bh.start(Context{})(Context{});
  }
  EXPECT_TRUE(weak.expired());
  // A closed SQLite store checkpoints and removes its WAL file.
  if (!test_backend_is_postgres()) {
    EXPECT_FALSE(std::filesystem::exists(dir.file("c.db-wal")));
  }
}

// A controller is dropped when its beehive ends; its destructor may still use a Client
// (here: a write, told `stopped`), which must not find the beehive's registry locked.
TEST(LifecycleCycleTest, AControllerWhoseEndUsesAClientDoesNotHangTheBeehivesEnd) {
  TempDir dir;
  auto told = std::make_shared<std::atomic<int>>(0);  // 1: stopped, 2: another error
  struct WritesOnItsEnd {
    Widgets w;
    std::shared_ptr<std::atomic<int>> told;
    ~WritesOnItsEnd() {
      try {
        w.create(Context{}, {"late", 1});
      } catch (const Error& e) {
        *told = e.code() == errc::stopped ? 1 : 2;
      }
    }
  };
  auto ended = std::make_shared<std::atomic<bool>>(false);
  std::thread([store = open_test_store(dir.file("c.db")), told, ended]() mutable {
    {
      Beehive bh(store);
      auto end = std::make_shared<WritesOnItsEnd>(WritesOnItsEnd{Widgets(bh, widget_kind), told});
      register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind, [end](auto&, auto&, auto&) {
        (void)end;
        return Result{};
      });
      end = nullptr;
      bh.start(Context{})(Context{});
    }
    *ended = true;
  }).detach();
  ASSERT_TRUE(eventually([&] { return ended->load(); }, 10s)) << "the beehive's end hangs";
  EXPECT_EQ(told->load(), 1);
}

/// Whether a beehive may start on the database at `file` (no other one runs on it).
bool startable(const std::filesystem::path& file) {
  try {
    Beehive again(open_test_store(file));
    again.start(Context{})(Context{});
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A beehive destroyed inside a within block of another beehive stops (stop itself is
// refused there, but a destructor has no one to refuse) and lets its database go.
TEST(LifecycleCycleTest, ABeehiveDestroyedInsideAnotherBeehivesWithinBlockStops) {
  TempDir dir;
  Beehive outer(open_test_store(dir.file("outer.db")));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      outer, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto ended = std::make_shared<std::atomic<bool>>(false);
  std::thread([&cc, &dir, ended] {
    cc.within(Context{}, [&](const Context&) {
      auto inner = std::make_unique<Beehive>(open_test_store(dir.file("inner.db")));
      Widgets(*inner, widget_kind).create(Context{}, {"i", 1});
      auto stop = inner->start(Context{});
      inner.reset();
    });
    *ended = true;
  }).detach();
  ASSERT_TRUE(eventually([&] { return ended->load(); }, 10s)) << "the destructor hangs";
  EXPECT_TRUE(startable(dir.file("inner.db")));
}

// A beehive destroyed inside one of its own reconciles or within blocks cannot wait for
// it there: it stops on another thread once that returns, lets its database go, and
// ends (its store is closed).
TEST(LifecycleCycleTest, ABeehiveDestroyedInsideItsOwnReconcileStopsOnceItReturns) {
  TempDir dir;
  auto store = open_test_store(dir.file("self.db"));
  std::weak_ptr<Store> weak = store;
  auto owner = std::make_shared<std::unique_ptr<Beehive>>(std::make_unique<Beehive>(store));
  store.reset();
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  register_controller<WidgetSpec, WidgetStatus>(**owner, widget_kind,
                                                [owner, destroyed](auto&, auto&, auto&) {
                                                  if (!destroyed->exchange(true)) owner->reset();
                                                  return Result{};
                                                });
  Widgets(**owner, widget_kind).create(Context{}, {"a", 1});
  (*owner)->start(Context{});
  ASSERT_TRUE(eventually([&] { return destroyed->load(); }, 10s));
  EXPECT_TRUE(eventually([&] { return weak.expired(); }, 10s)) << "it never ended";
  EXPECT_TRUE(startable(dir.file("self.db")));
}

TEST(LifecycleCycleTest, ABeehiveDestroyedInsideItsOwnWithinBlockStopsOnceTheBlockEnds) {
  TempDir dir;
  auto store = open_test_store(dir.file("self.db"));
  std::weak_ptr<Store> weak = store;
  auto bh = std::make_unique<Beehive>(store);
  store.reset();
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(*bh, widget_kind);
  bh->start(Context{});
  auto ended = std::make_shared<std::atomic<bool>>(false);
  // The clients go with the thread (they hold the beehive's runtime).
  std::thread([&bh, cc = std::move(cc), w = std::move(w), ended]() mutable {
    cc.within(Context{}, [&](const Context& tx) {
      w.create(tx, {"before", 1});
      bh.reset();
      w.create(tx, {"after", 2});  // the block goes on to its end, and commits
    });
    *ended = true;
  }).detach();
  ASSERT_TRUE(eventually([&] { return ended->load(); }, 10s)) << "the destructor hangs";
  EXPECT_TRUE(eventually([&] { return weak.expired(); }, 10s)) << "it never ended";
  Beehive again(open_test_store(dir.file("self.db")));
  EXPECT_EQ(Widgets(again, widget_kind).list(Context{}).size(), 2u);
}

}  // namespace
}  // namespace beehive::test
