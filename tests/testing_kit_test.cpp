// The test kit (<beehive/testing.hpp>) as a user's test uses it: TestBeehive, settle,
// advance, the matchers and the printers. Nothing here waits by polling or sleeping:
// every check runs right after settle() returned.

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/actors.hpp>
#include <beehive/sqlite.hpp>
#include <beehive/testing.hpp>

#include <gtest/gtest-spi.h>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "actors/atoms.hpp"
#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;
using beehive::testing::HasCondition;
using beehive::testing::IsSettled;
using beehive::testing::TestBeehive;

/// A controller whose passes are counted per object; `fail_first` passes of each object
/// throw, and every successful pass reports its status and a Ready condition.
struct Counting {
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::map<ObjectID, int>> passes = std::make_shared<std::map<ObjectID, int>>();

  int of(ObjectID id) const {
    std::lock_guard lk(*mu);
    auto it = passes->find(id);
    return it == passes->end() ? 0 : it->second;
  }

  void register_on(Beehive& bh, int fail_first = 0, std::chrono::milliseconds requeue = 0ms,
                   const std::vector<Option>& opts = {}) {
    auto reconcile = [mu = mu, passes = passes, fail_first, requeue](
                         const Context& ctx, ControllerClient<WidgetStatus>& c,
                         const Object<WidgetSpec, WidgetStatus>& o) {
      int n;
      {
        std::lock_guard lk(*mu);
        n = ++(*passes)[o.id];
      }
      if (n <= fail_first) throw std::runtime_error("not yet");
      c.update_status(ctx, o.id, o.generation, WidgetStatus{true});
      c.set_condition(ctx, o.id, {"Ready", ConditionStatus::True, "Up", ""});
      return Result{requeue};
    };
    if (opts.empty())
      register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind, reconcile);
    else if (opts.size() == 1)
      register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind, reconcile, opts[0]);
    else
      register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind, reconcile, opts[0], opts[1]);
  }
};

/// Starts `t`, creates one widget and settles: the widget's id.
ObjectID start_with_one_widget(TestBeehive& t, Widgets& w) {
  t.start();
  auto id = w.create({}, {"red", 1}).id;
  t.settle();
  return id;
}

/// A TestBeehive (with `opts`) whose widgets' passes `c` counts (Counting::register_on),
/// started with one widget, `id`, whose first pass has run.
struct OneWidget {
  template <class... Opts>
  OneWidget(int fail_first, std::chrono::milliseconds requeue, Opts&&... opts)
      : t(std::forward<Opts>(opts)...) {
    c.register_on(t.beehive(), fail_first, requeue);
    id = start_with_one_widget(t, w);
  }
  TestBeehive t;
  Counting c;
  Widgets w{t.beehive(), widget_kind};
  ObjectID id = 0;
};

/// A started TestBeehive whose widgets' passes `c` counts.
struct Counted {
  Counted() {
    c.register_on(t.beehive());
    t.start();
  }
  TestBeehive t;
  Counting c;
  Widgets w{t.beehive(), widget_kind};
};

TEST(TestingKit, SettleReturnsOnceEveryPassACreateCausedHasRun) {
  Counted k;
  auto& [t, c, w] = k;
  std::vector<ObjectID> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(w.create({}, {"red", i}).id);
  t.settle();
  for (auto id : ids) {
    EXPECT_THAT(w.get({}, id), IsSettled());
    EXPECT_THAT(w.get({}, id), HasCondition("Ready", ConditionStatus::True));
    // One pass for the create: the status and condition writes wake nothing.
    EXPECT_EQ(c.of(id), 1);
  }
}

TEST(TestingKit, ABackoffRunsExactlyWhenAdvancePassesItsDueTime) {
  OneWidget one(/*fail_first=*/3, /*requeue=*/0ms);
  auto& [t, c, w, id] = one;
  EXPECT_EQ(c.of(id), 1);
  EXPECT_EQ(w.get_schedule({}, id).next_requeue_at, t.clock().now() + 1s);
  t.advance(999ms);
  EXPECT_EQ(c.of(id), 1);  // not due yet
  t.advance(1ms);
  EXPECT_EQ(c.of(id), 2);  // the 1 s retry; the next waits 2 s
  t.advance(2s);
  EXPECT_EQ(c.of(id), 3);
  t.advance(3999ms);
  EXPECT_EQ(c.of(id), 3);
  t.advance(1ms);
  EXPECT_EQ(c.of(id), 4);  // the 4 s retry succeeds
  EXPECT_THAT(w.get({}, id), IsSettled());
  t.advance(1h);  // nothing else is scheduled (the resync aside)
  EXPECT_EQ(w.get({}, id).observed_generation, 1);
  // The same ladder climbs within one advance: retries at 1, 3 and 7 s.
  auto other = w.create({}, {"blue", 1}).id;
  t.settle();
  ASSERT_EQ(c.of(other), 1);
  t.advance(7s);
  EXPECT_EQ(c.of(other), 4);
  EXPECT_THAT(w.get({}, other), IsSettled());
}

TEST(TestingKit, RequeueAfterAndResyncRunOnTheManualClock) {
  OneWidget one(/*fail_first=*/0, /*requeue=*/5s, with_resync_interval(1h));
  auto& [t, c, w, id] = one;
  EXPECT_EQ(c.of(id), 1);
  t.advance(4s);
  EXPECT_EQ(c.of(id), 1);
  t.advance(1s);
  EXPECT_EQ(c.of(id), 2);
  for (int i = 0; i < 10; ++i) t.advance(5s);
  EXPECT_EQ(c.of(id), 12);
}

TEST(TestingKit, AResyncReconcilesEveryUnsettledObjectOnce) {
  TestBeehive t(with_resync_interval(10min));
  auto passes = std::make_shared<std::map<ObjectID, int>>();
  auto mu = std::make_shared<std::mutex>();
  // "settles" records its generation; "pending" never does, so each resync retries it.
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind, [passes, mu](const Context& ctx, auto& c, const auto& o) {
        {
          std::lock_guard lk(*mu);
          ++(*passes)[o.id];
        }
        if (o.spec.color == "settles") c.update_status(ctx, o.id, o.generation, WidgetStatus{true});
        return Result{};
      });
  auto count = [&](ObjectID id) {
    std::lock_guard lk(*mu);
    return (*passes)[id];
  };
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto settles = w.create({}, {"settles", 1}).id;
  auto pending = w.create({}, {"pending", 1}).id;
  t.settle();
  t.advance(10min - 1ms);
  EXPECT_EQ(count(pending), 1);
  t.advance(1ms);
  EXPECT_EQ(count(pending), 2);
  EXPECT_EQ(count(settles), 1);
  t.advance(10min);
  EXPECT_EQ(count(pending), 3);
  EXPECT_EQ(count(settles), 1);
}

// An id queued several times runs once: a resync falling due with the object's own timer
// (requeue_after, a retry) queues what that timer's pass already reconciles, and ran it a
// second time at the same instant (and, for a retry, climbed the ladder twice).
TEST(TestingKit, AResyncFallingDueWithAnObjectsTimerRunsItOnce) {
  for (bool failing : {false, true}) {
    SCOPED_TRACE(failing ? "retries" : "requeue_after");
    TestBeehive t(with_resync_interval(failing ? 7s : 30s));
    auto mu = std::make_shared<std::mutex>();
    auto at = std::make_shared<std::vector<Time>>();
    register_controller<WidgetSpec, WidgetStatus>(
        t.beehive(), widget_kind, [mu, at, failing](const Context&, auto& c, auto&) -> Result {
          {
            std::lock_guard lk(*mu);
            at->push_back(c.now());
          }
          if (failing) throw std::runtime_error("down");
          return Result{10s};  // never settles: each resync lists it too
        });
    Widgets w(t.beehive(), widget_kind);
    t.start();
    const Time t0 = t.clock().now();
    w.create({}, {"red", 1});
    t.settle();
    t.advance(60s);
    std::vector<std::chrono::milliseconds> since;
    {
      std::lock_guard lk(*mu);
      for (auto x : *at)
        since.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(x - t0));
    }
    // requeue_after: every 10 s, the resyncs at 30 and 60 s among them. Retries: 1, 2,
    // 4 s apart, then the resyncs every 7 s (each one pass, its ladder one step).
    std::vector<std::chrono::milliseconds> expected =
        failing ? std::vector<std::chrono::milliseconds>{0s,  1s,  3s,  7s,  14s, 21s,
                                                         28s, 35s, 42s, 49s, 56s}
                : std::vector<std::chrono::milliseconds>{0s, 10s, 20s, 30s, 40s, 50s, 60s};
    EXPECT_EQ(since, expected);
  }
}

TEST(TestingKit, SettleWaitsForTheGarbageCollectorsCascade) {
  TestBeehive t;
  Counting c;
  c.register_on(t.beehive());
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto owner = w.create({}, {"owner", 1}).id;
  std::vector<ObjectID> children;
  for (int i = 0; i < 5; ++i) children.push_back(w.create({}, {"child", i}, with_owner(owner)).id);
  t.settle();
  w.remove({}, owner);
  t.settle();
  EXPECT_TRUE(w.list({}).empty());  // the owner and, by cascade, its children are gone
}

TEST(TestingKit, AFinalizerHoldsTheObjectUntilItsControllerRemovesIt) {
  TestBeehive t;
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind, [](const Context& ctx, auto& c, const auto& o) {
        if (o.deletion_requested_at && o.spec.color == "done")
          c.remove_finalizer(ctx, o.id, "acme.com/cleanup");
        return Result{};
      });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto held = w.create({}, {"busy", 1}, with_finalizers({"acme.com/cleanup"})).id;
  auto freed = w.create({}, {"done", 1}, with_finalizers({"acme.com/cleanup"})).id;
  t.settle();
  w.remove({}, held);
  w.remove({}, freed);
  t.settle();
  auto left = w.list({});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id, held);
  EXPECT_TRUE(left[0].deletion_requested_at.has_value());
}

TEST(TestingKit, SettleHandsEveryCommittedChangeToWatches) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto stream = w.watch_list({});
  std::vector<ObjectID> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(w.create({}, {"red", i}).id);
  t.settle();
  // Every change is in the stream already: reading it does not wait.
  for (auto id : ids) {
    auto c = stream.next_for(0ms);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->object.id, id);
  }
}

// Another writer's commits (a tool, a second beehive on the file) are work a settle
// waits for: the passes they wake have run, and watches have them, once it returns.
TEST(TestingKit, SettleWaitsForWhatAnotherWriterOfTheStoreCommitted) {
  Counted k;
  auto& [t, c, w] = k;
  auto stream = w.watch_list({});
  t.settle();
  Beehive tool(sqlite::open(t.path().string()));
  auto id = Widgets(tool, widget_kind).create({}, {"blue", 1}).id;
  t.settle();
  EXPECT_EQ(c.of(id), 1);
  EXPECT_THAT(w.get({}, id), IsSettled());
  auto change = stream.next_for(0ms);
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->object.id, id);
}

// settle ends with its context, at its deadline or when it is cancelled, while a
// reconcile is stuck.
TEST(TestingKit, SettleEndsWithItsContextWhileAReconcileIsStuck) {
  TestBeehive t;
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  register_controller<WidgetSpec, WidgetStatus>(t.beehive(), widget_kind, [&](auto&, auto&, auto&) {
    entered.set_value();
    released.wait();
    return Result{};
  });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  w.create({}, {"red", 1});
  entered.get_future().wait();
  EXPECT_ERRC(beehive::testing::settle(t.beehive(), Context{}.with_timeout(50ms)),
              errc::deadline_exceeded);
  auto [c, cancel] = Context{}.with_cancel();  // no deadline: only the cancel ends it
  auto settling =
      std::async(std::launch::async, [&, c = c] { beehive::testing::settle(t.beehive(), c); });
  EXPECT_EQ(settling.wait_for(50ms), std::future_status::timeout);  // not settled
  cancel();
  ASSERT_EQ(settling.wait_for(5s), std::future_status::ready) << "settle ignored its cancel";
  EXPECT_ERRC(settling.get(), errc::cancelled);
  release.set_value();
  t.settle();
}

// An actor a settle waits for that crashes answers the wait (CAF 0.17 answers no promise
// an actor dies holding): the settle goes on with its successor rather than hang until
// its deadline (or for ever).
TEST(TestingKit, SettleGoesOnWhenAnActorItWaitsForCrashes) {
  TestBeehive t;
  auto entered = std::make_shared<std::promise<void>>();
  std::promise<void> release;
  auto released = release.get_future().share();
  auto first = std::make_shared<std::atomic<bool>>(true);
  register_controller<WidgetSpec, WidgetStatus>(t.beehive(), widget_kind,
                                                [entered, released, first](auto&, auto&, auto&) {
                                                  if (first->exchange(false)) {
                                                    entered->set_value();
                                                    released.wait();
                                                  }
                                                  return Result{};
                                                });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  w.create({}, {"red", 1});
  entered->get_future().wait();
  auto settling = std::async(std::launch::async, [&] {
    beehive::testing::settle(t.beehive(), Context{}.with_timeout(30s));
  });
  caf::scoped_actor self{actor_system_of(t.beehive())};
  auto controller = *actor_handles(t.beehive()).controller(widget_kind);
  auto held = self->request(caf::actor_cast<caf::actor>(controller), 30s,
                            detail::settle_atom::value);    // busy: held
  caf::anon_send_exit(controller, caf::exit_reason::kill);  // a crash
  auto t0 = std::chrono::steady_clock::now();
  bool answered = false;
  std::move(held).receive([&](bool) { answered = true; }, [&](caf::error&) { answered = true; });
  EXPECT_TRUE(answered);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s) << "the held wait was never answered";
  release.set_value();
  EXPECT_NO_THROW(settling.get());
  EXPECT_NO_THROW(t.settle());
}

// A clock moved to its very end (advance(milliseconds::max()) saturates there) is the
// end of time: what was due fires once, and what would come after it never does. It
// used to fire the GC, the event sweep and every controller's resync over and over, so
// settle never returned.
TEST(TestingKit, AClockAdvancedToItsEndFiresWhatWasDueOnceAndSettles) {
  OneWidget one(/*fail_first=*/0, /*requeue=*/1h, with_event_retention(5, 1h),
                with_resync_interval(10min));
  auto& [t, c, w, id] = one;
  ASSERT_EQ(c.of(id), 1);
  // A jump (not TestBeehive::advance, which would step through an hourly requeue for
  // ever): each due timer fires once, at the end.
  t.clock().advance(std::chrono::milliseconds::max());
  t.settle();  // throws deadline_exceeded if it never settles
  EXPECT_EQ(t.clock().now(), Time::max());
  // Its requeue and its resync were both due: one pass or two, then nothing.
  int passes = c.of(id);
  EXPECT_GE(passes, 2);
  EXPECT_LE(passes, 3);
  t.settle();
  EXPECT_EQ(c.of(id), passes);
  // Writes go on at the end of time, and wake their controller.
  auto later = w.create({}, {"blue", 2}).id;
  t.settle();
  EXPECT_EQ(c.of(later), 1);
  EXPECT_THAT(w.get({}, later), IsSettled());
}

// advance passes time as it would pass: each timer fires at its own due time, in order
// across kinds, and what a pass arms within the advance fires within it too.
TEST(TestingKit, AdvanceStepsThroughEveryDueTimeInOrder) {
  TestBeehive t;
  std::mutex mu;
  std::vector<std::pair<Time, std::string>> passes;
  auto recording = [&](std::string name, std::chrono::milliseconds every) {
    return [&, name, every](const Context&, auto& c, auto&) {
      std::lock_guard lk(mu);
      passes.emplace_back(c.now(), name);
      return Result{every};
    };
  };
  register_controller<WidgetSpec, WidgetStatus>(t.beehive(), widget_kind, recording("widget", 1s));
  register_controller<WidgetSpec, WidgetStatus>(t.beehive(), gadget_kind, recording("gadget", 3s));
  Widgets w(t.beehive(), widget_kind);
  Widgets g(t.beehive(), gadget_kind);
  t.start();
  w.create({}, {"red", 1});
  g.create({}, {"g", 1});
  t.settle();
  const Time t0 = t.clock().now();
  {
    std::lock_guard lk(mu);
    passes.clear();
  }
  t.advance(10s);
  EXPECT_EQ(t.clock().now(), t0 + 10s);
  std::lock_guard lk(mu);
  // Widgets every second (10), gadgets every three (3), each seeing its due time as now.
  ASSERT_EQ(passes.size(), 13u);
  for (std::size_t i = 1; i < passes.size(); ++i)
    EXPECT_LE(passes[i - 1].first, passes[i].first) << "pass " << i << " ran out of order";
  int widgets = 0, gadgets = 0;
  for (auto& [at, name] : passes) {
    auto since = std::chrono::duration_cast<std::chrono::milliseconds>(at - t0);
    if (name == "widget") {
      EXPECT_EQ(since, (++widgets) * 1s);
    }
    if (name == "gadget") {
      EXPECT_EQ(since, (++gadgets) * 3s);
    }
  }
  EXPECT_EQ(widgets, 10);
  EXPECT_EQ(gadgets, 3);
}

// Housekeeping wakes every 30 s whatever the resync; advance steps over it (it runs at
// the times the other timers and the end land on), so an advance of months with long
// timers takes a few steps, and retention still holds at its end.
TEST(TestingKit, AnAdvanceOfMonthsStepsOverHousekeepingAndKeepsRetention) {
  TestBeehive t(with_resync_interval(24h), with_change_log_retention(3, 1min));
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 0});
  for (int i = 1; i <= 6; ++i) w.update({}, a.id, {"a", i});
  t.settle();
  t.advance(24h * 90);  // threw deadline_exceeded, stepping through every wake
  SQLite::Database db(t.path().string());
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM change_log").getInt(), 3);
}

// A timer re-arming every millisecond over a year would step for ever: the advance ends
// with deadline_exceeded, saying why, rather than hang the test.
TEST(TestingKit, AnAdvanceThatWouldNeverEndSaysSo) {
  OneWidget one(/*fail_first=*/0, /*requeue=*/1ms);
  auto& [t, c, w, id] = one;
  try {
    t.advance(24h * 365);
    ADD_FAILURE() << "advance ended";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::deadline_exceeded));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("stepped through"));
  }
}

// settle from inside a reconcile would wait for that reconcile: refused at once.
TEST(TestingKit, SettleFromInsideAReconcileIsRefused) {
  TestBeehive t;
  std::promise<bool> got;  // refused as invalid_argument
  std::atomic<bool> once{false};
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind, [&](const Context& ctx, auto&, auto&) {
        if (once.exchange(true)) return Result{};
        try {
          beehive::testing::settle(t.beehive(), ctx);
          got.set_value(false);
        } catch (const Error& e) {
          got.set_value(e.code() == make_error_code(errc::invalid_argument));
        }
        return Result{};
      });
  Widgets w(t.beehive(), widget_kind);
  start_with_one_widget(t, w);
  EXPECT_TRUE(got.get_future().get());
}

// A settle that a stop overlapped reports the stop, not a quiet it did not reach.
TEST(TestingKit, ASettleOverlappedByAStopThrowsStopped) {
  TestBeehive t;
  std::promise<void> entered;
  std::atomic<bool> once{false};
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind, [&](const Context& ctx, auto&, auto&) {
        if (!once.exchange(true)) {
          entered.set_value();
          while (!ctx.done()) std::this_thread::yield();  // until stop cancels it
        }
        return Result{};
      });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  w.create({}, {"red", 1});
  entered.get_future().wait();
  auto settling = std::async(std::launch::async, [&] {
    beehive::testing::settle(t.beehive(), Context{}.with_timeout(10s));
  });
  t.stop();
  EXPECT_ERRC(settling.get(), errc::stopped);
}

// A stop refused inside a within block can be asked again once the block ended.
TEST(TestingKit, AStopRefusedInsideAWithinBlockCanBeAskedAgain) {
  TestBeehive t;
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  t.start();
  t.settle();
  cc.within({}, [&](const Context&) { EXPECT_ERRC(t.stop(), errc::invalid_argument); });
  t.stop();
  EXPECT_ERRC(t.settle(), errc::stopped);
}

/// Starts `t` with a widget whose pass ignores its context and waits for `released`;
/// returns once that pass runs.
void start_with_a_pass_ignoring_stop(TestBeehive& t, std::shared_future<void> released) {
  auto entered = std::make_shared<std::promise<void>>();
  auto running = entered->get_future();
  register_controller<WidgetSpec, WidgetStatus>(t.beehive(), widget_kind,
                                                [entered, released](auto&, auto&, auto&) {
                                                  entered->set_value();
                                                  released.wait();  // ignores ctx
                                                  return Result{};
                                                });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  w.create({}, {"red", 1});
  running.wait();
}

/// A TestBeehive whose pass ignores its cancelled context, ended by its destructor or
/// (`stop_first`) by stop() (twice: the second a no-op): the test fails once rather than
/// hang, and the beehive and its database stay while the pass runs, and go once it
/// returns.
void expect_a_stuck_pass_to_fail_the_test(bool stop_first) {
  std::promise<void> release;
  auto released = release.get_future().share();
  std::filesystem::path dir;
  auto test_body = [&] {
    TestBeehive t;
    dir = t.path().parent_path();
    start_with_a_pass_ignoring_stop(t, released);
    if (stop_first) {
      t.stop();
      t.stop();
    }
  };
  EXPECT_NONFATAL_FAILURE(test_body(), "still running");
  EXPECT_TRUE(std::filesystem::exists(dir));  // left behind while the pass runs
  release.set_value();
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(dir); }, 10s));
}

TEST(TestingKit, ATestBeehiveWhosePassIgnoresStopFailsTheTestInsteadOfHanging) {
  expect_a_stuck_pass_to_fail_the_test(false);
}

TEST(TestingKit, ATestBeehiveStopWhosePassIgnoresItFailsTheTestInsteadOfHanging) {
  expect_a_stuck_pass_to_fail_the_test(true);
}

// A settle inside a within block waits for work that waits for the block: at its
// deadline it says so.
TEST(TestingKit, ASettleInsideAWithinBlockSaysWhatItWaitsIn) {
  Gate gate;
  TestBeehive t;
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind, [&](auto& ctx, auto& cc, auto& o) {
        gate.pass();
        cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});  // waits for the block
        return Result{};
      });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  w.create({}, {"red", 1});
  gate.wait_entered();
  cc.within({}, [&](const Context&) {
    gate.open();
    EXPECT_ERRC_WITH(beehive::testing::settle(t.beehive(), Context{}.with_timeout(300ms)),
                     errc::deadline_exceeded, "within block");
  });
  t.settle();
  EXPECT_THAT(w.list({}).at(0), IsSettled());
}

// Once unsubscribe returns, the listener is not running and never runs again.
TEST(TestingKit, AClockListenerUnsubscribedIsNotRunningOnceUnsubscribeReturns) {
  ManualClock clock;
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  std::atomic<int> calls{0};
  int token = clock.subscribe([&] {
    if (calls++ == 0) {
      entered.set_value();
      released.wait();
    }
  });
  auto advancing = std::async(std::launch::async, [&] { clock.advance(1s); });
  entered.get_future().wait();
  auto unsubscribing = std::async(std::launch::async, [&] { clock.unsubscribe(token); });
  EXPECT_EQ(unsubscribing.wait_for(100ms), std::future_status::timeout)
      << "unsubscribe returned while its listener ran";
  release.set_value();
  unsubscribing.get();
  advancing.get();
  clock.advance(1s);
  EXPECT_EQ(calls, 1);
}

// A stopped beehive reconciles nothing, and says so: what was scheduled reads as the
// zero Schedule (it went on reporting timers that would never fire).
TEST(TestingKit, NothingIsScheduledOnceTheBeehiveStopped) {
  OneWidget one(/*fail_first=*/0, /*requeue=*/1h);
  auto& [t, c, w, id] = one;
  EXPECT_EQ(w.get_schedule({}, id).next_requeue_at, t.clock().now() + 1h);
  t.stop();
  EXPECT_EQ(w.get_schedule({}, id), Schedule{});
}

TEST(TestingKit, SettleAfterStopThrowsStopped) {
  TestBeehive t;
  t.start();
  t.settle();
  t.stop();
  EXPECT_ERRC(beehive::testing::settle(t.beehive(), Context{}.with_timeout(1s)), errc::stopped);
}

TEST(TestingKit, TheDatabaseIsRemovedWithTheTestBeehive) {
  std::filesystem::path path;
  {
    TestBeehive t;
    path = t.path();
    Widgets(t.beehive(), widget_kind).create({}, {"red", 1});
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.parent_path()));
}

TEST(TestingKit, ATestInspectsTheActorsOfABeehiveThatOwnsItsActorSystem) {
  // The TestBeehive's Beehive(store): no application system to send from.
  OneWidget one(/*fail_first=*/1, /*requeue=*/0ms);
  auto& [t, c, w, id] = one;
  caf::scoped_actor self{actor_system_of(t.beehive())};
  auto controller = actor_handles(t.beehive()).controller(widget_kind);
  ASSERT_TRUE(controller.has_value());
  controller_state st;
  self->request(*controller, caf::infinite, inspect_atom::value)
      .receive([&](const controller_state& s) { st = s; },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_EQ(st.queue_length, 0u);
  ASSERT_EQ(st.backoff.size(), 1u);  // the failed pass waits on its backoff timer
  EXPECT_EQ(st.backoff[0].first, id);
  EXPECT_EQ(st.backoff[0].second, 1s);
}

TEST(TestingKit, MatchersExplainWhatDiffers) {
  ObjectMeta m;
  m.generation = 2;
  m.observed_generation = 1;
  m.conditions.push_back({"Ready", ConditionStatus::False, "Down", ""});
  EXPECT_THAT(m, ::testing::Not(IsSettled()));
  EXPECT_THAT(m, HasCondition("Ready", ConditionStatus::False));
  EXPECT_THAT(m, ::testing::Not(HasCondition("Ready", ConditionStatus::True)));
  EXPECT_THAT(m, ::testing::Not(HasCondition("Synced", ConditionStatus::True)));
  EXPECT_EQ(
      ::testing::DescribeMatcher<const ObjectMeta&>(HasCondition("Ready", ConditionStatus::True)),
      "has condition Ready=True");
  ::testing::StringMatchResultListener why;
  EXPECT_FALSE(::testing::ExplainMatchResult(IsSettled(), m, &why));
  EXPECT_EQ(why.str(), "generation 2, observed generation 1");
  m.observed_generation = 2;
  EXPECT_THAT(m, IsSettled());
}

TEST(TestingKit, HasConditionIgnoresAConditionObservedAtAnOlderGeneration) {
  // After a spec change, Ready=True reported for the previous spec says nothing of this one.
  ObjectMeta m;
  m.generation = 3;
  m.conditions.push_back({"Ready", ConditionStatus::True, "Up", "", false, 2});
  EXPECT_THAT(m, ::testing::Not(HasCondition("Ready", ConditionStatus::True)));
  ::testing::StringMatchResultListener why;
  EXPECT_FALSE(
      ::testing::ExplainMatchResult(HasCondition("Ready", ConditionStatus::True), m, &why));
  EXPECT_EQ(why.str(), "its Ready condition was observed at generation 2, the object is at 3");
  m.conditions[0].observed_generation = 3;
  EXPECT_THAT(m, HasCondition("Ready", ConditionStatus::True));
  m.conditions[0].observed_generation = 0;  // not given: nothing to compare
  EXPECT_THAT(m, HasCondition("Ready", ConditionStatus::True));
}

TEST(TestingKit, ValuesPrintReadably) {
  using ::testing::PrintToString;
  auto t = from_millis(1764612245123);  // 2025-12-01T18:04:05.123Z
  EXPECT_EQ(PrintToString(t), "2025-12-01T18:04:05.123Z");
  EXPECT_EQ(PrintToString(std::chrono::milliseconds(1500)), "1500 ms");
  EXPECT_EQ(PrintToString(std::chrono::seconds(2)), "2000 ms");
  EXPECT_EQ(PrintToString(widget_kind), "Widget.acme.com");
  EXPECT_EQ(PrintToString(Schedule{}), "nothing scheduled");
  EXPECT_EQ(PrintToString(Schedule{t}), "next reconcile at 2025-12-01T18:04:05.123Z");
  EXPECT_EQ(PrintToString(Condition{"Ready", ConditionStatus::True, "Up", "all good"}),
            "Ready=True reason=Up message=\"all good\"");
  EXPECT_EQ(PrintToString(errc::not_found), "errc::not_found");
  Object<WidgetSpec, WidgetStatus> o;
  o.id = 7;
  o.group = "acme.com";
  o.kind = "Widget";
  o.generation = 1;
  o.spec = {"red", 3};
  EXPECT_EQ(PrintToString(o),
            "Widget.acme.com/7 generation=1 observed=none rv=0 spec={\"color\":\"red\",\"size\":3} "
            "status=none");
  Change<WidgetSpec, WidgetStatus> c{ChangeType::Modified, o};
  EXPECT_EQ(PrintToString(c).rfind("Modified Widget.acme.com/7", 0), 0u);
  Event e;
  e.id = 3;
  e.object_id = 7;
  e.reason = "Up";
  e.count = 2;
  e.first_at = t;
  e.last_at = t;
  EXPECT_NE(PrintToString(e).find("reason=Up"), std::string::npos);
  EXPECT_NE(PrintToString(e).find("first_at=2025-12-01T18:04:05.123Z"), std::string::npos);
  Condition observed{"Ready", ConditionStatus::False, "Down", "", false, 4, t};
  EXPECT_EQ(PrintToString(observed),
            "Ready=False reason=Down observed=4 since 2025-12-01T18:04:05.123Z");
  o.labels = {{"tier", "web"}, {"env", "prod"}};
  EXPECT_NE(PrintToString(o).find(" labels={env=prod,tier=web}"), std::string::npos);
  EXPECT_EQ(PrintToString(Result{}), "Result{}");
  EXPECT_EQ(PrintToString(Result{std::chrono::seconds(5)}), "Result{requeue_after=5000ms}");
  EXPECT_EQ(PrintToString(Result::requeue_now()), "Result::requeue_now()");
  EXPECT_EQ(PrintToString(EventSpec{"conn", EventType::Warning, "ProbeFailed", "timed out"}),
            "Warning category=conn reason=ProbeFailed message=\"timed out\"");
  EXPECT_EQ(PrintToString(EventSpec{"", EventType::Normal, "R", "m", {{"n", 1}}}),
            "Normal reason=R message=\"m\" detail={\"n\":1}");
  EXPECT_EQ(PrintToString(EventSpec{"", EventType::Normal, "R", "m", "\xff"}),
            "Normal reason=R message=\"m\" detail=<not JSON: a string that is not UTF-8>");
  EXPECT_EQ(PrintToString(EventFilter{}), "events (all)");
  EventFilter f;
  f.reason = "Up";
  f.limit = 3;
  EXPECT_EQ(PrintToString(f), "events reason=Up limit=3");
  EXPECT_EQ(PrintToString(LogLevel::warning), "warning");
  Page<WidgetSpec, WidgetStatus> page{{o}, "bh2.x.y"};
  EXPECT_EQ(PrintToString(page).rfind("page of 1 [Widget.acme.com/7", 0), 0u);
  EXPECT_NE(PrintToString(page).find("continue=bh2.x.y"), std::string::npos);
}

}  // namespace
}  // namespace beehive::test
