// The reconcile loop: wakes, work-queue semantics, backoff, requeue_after, resync,
// quarantine, concurrency. Time moves only through the manual clock.

#include <algorithm>
#include <condition_variable>
#include <future>

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>

#include "actors/atoms.hpp"
#include "controller_fixture.hpp"
#include "held_reader.hpp"
#include "pass_faults.hpp"

namespace beehive::test {
namespace {

class ReconcileTest : public ControllerTest {
 protected:
  /// Widgets on one worker: a reconcile of a "holds" widget waits at `gate`, and one of
  /// a widget `fails` picks throws (a retry in 1 s).
  Widgets one_worker(Gate& gate, std::function<bool(const WidgetSpec&)> fails) {
    recorder_->set_body([&gate, fails = std::move(fails)](auto&, auto&, auto& o) -> Result {
      if (o.spec.color == "holds") gate.pass();
      if (fails(o.spec)) throw std::runtime_error("boom");
      return {};
    });
    register_widgets(with_concurrency(1));
    return widgets();
  }
  /// Starts with widgets "early" and "late" and no resync, the first listing reading as
  /// if before `late` was created, and `meanwhile(controller, late)` run while that
  /// listing is out; settles, and expects `late` reconciled once, from a second listing.
  /// Returns early's passes.
  int start_with_a_listing_that_misses_late(
      const std::function<void(const caf::actor&, const Object<WidgetSpec, WidgetStatus>&)>&
          meanwhile);
  /// Widgets resynced every second and one widget that never settles (every resync
  /// queues it), started and settled; returns that widget.
  Object<WidgetSpec, WidgetStatus> start_with_an_unsettled_widget() {
    register_widgets(with_resync_interval(std::chrono::seconds(1)));
    auto o = widgets().create(ctx_, {"a", 1});
    start();
    settle();
    return o;
  }
  /// The widgets' controller's state (inspect_atom).
  controller_state widget_controller_state() {
    auto controller = *bh_->controller(widget_kind);
    caf::scoped_actor self{controller->home_system()};
    controller_state st;
    self->request(controller, std::chrono::seconds(10), inspect_atom::value)
        .receive([&](const controller_state& s) { st = s; },
                 [](caf::error& e) { ADD_FAILURE() << error_message(e); });
    return st;
  }
};

TEST_F(ReconcileTest, StartReconcilesEveryObjectOnce) {
  register_widgets();
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(w.create(ctx_, {"a", i}).id);
  Widgets(*bh_, gadget_kind).create(ctx_, {"other kind", 0});
  start();
  EXPECT_TRUE(eventually([&] { return recorder_->total() == 5; }));
  settle();
  EXPECT_EQ(recorder_->total(), 5);
  for (auto id : ids) EXPECT_EQ(recorder_->count(id), 1);
}

// The listing that starts a controller fails (the store unreadable for a while): it is
// tried again on the kind's backoff ladder (1 s, then 2 s, ...), and every object is
// reconciled once one succeeds.
TEST_F(ReconcileTest, AStartListingThatFailsIsTriedAgain) {
  register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  auto file = dir_.file("beehive.db");
  write_test_store(file, "ALTER TABLE objects RENAME TO objects_away");
  start();
  settle();  // idle: the listing failed, and waits for its retry
  EXPECT_EQ(recorder_->total(), 0);
  clock_->advance(1s);  // tried again: fails again, and waits twice as long
  settle();
  write_test_store(file, "ALTER TABLE objects_away RENAME TO objects");
  auto c = w.create(ctx_, {"c", 1});  // queued meanwhile: still idle until the retry
  clock_->advance(1s);
  settle();
  EXPECT_EQ(recorder_->total(), 0);
  clock_->advance(1s);
  settle();
  EXPECT_EQ(recorder_->count(a.id), 1);
  EXPECT_EQ(recorder_->count(b.id), 1);
  EXPECT_EQ(recorder_->count(c.id), 1);
  // Dispatching: a change is reconciled as usual.
  w.update(ctx_, a.id, {"a", 2});
  settle();
  EXPECT_EQ(recorder_->count(a.id), 2);
}

// A process that takes over as the leader while its start listing waits for a retry
// (the store was unreadable for a while) lists at once: a takeover reconciles what is
// unsettled then, not once the listing's backoff step ends.
TEST_F(ReconcileTest, ATakeoverWhileTheStartListingWaitsForItsRetryListsAtOnce) {
  register_widgets();
  auto a = widgets().create(ctx_, {"a", 1});
  auto file = dir_.file("beehive.db");
  write_test_store(file, "ALTER TABLE objects RENAME TO objects_away");
  start();
  settle();  // the listing failed, and waits for its retry (1 s)
  write_test_store(file, "ALTER TABLE objects_away RENAME TO objects");
  auto controller = caf::actor_cast<caf::actor>(*bh_->controller(widget_kind));
  caf::anon_send(controller, detail::leadership_atom::value, false);
  caf::anon_send(controller, detail::leadership_atom::value, true);
  settle();
  EXPECT_EQ(recorder_->count(a.id), 1);
}

TEST_F(ReconcileTest, CreateSpecChangeAndDeletionRequestWake) {
  register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1}, with_finalizers({"f"}));
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  w.update(ctx_, o.id, {"a", 2});
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }));
  EXPECT_EQ(recorder_->last(o.id).spec.size, 2);
  w.update(ctx_, o.id, {"a", 2});  // no-op write: no wake
  w.remove(ctx_, o.id);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 3; }));
  EXPECT_TRUE(recorder_->last(o.id).deletion_requested_at.has_value());
  settle();
  EXPECT_EQ(recorder_->count(o.id), 3);
}

TEST_F(ReconcileTest, StatusWritesDoNotWakeTheirOwnObject) {
  recorder_->set_body([](auto& ctx, auto& cc, auto& o) {
    cc.update_status(ctx, o.id, o.generation, WidgetStatus{o.spec.size % 2 == 0});
    cc.set_condition(ctx, o.id, {"Ready", ConditionStatus::True, "Fine", "", false});
    return Result{};
  });
  register_widgets();
  start();
  auto o = widgets().create(ctx_, {"a", 1});
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  settle();
  EXPECT_EQ(recorder_->count(o.id), 1);
}

TEST_F(ReconcileTest, AnIdQueuedTwiceRunsOnceAndAReAddDuringReconcileRunsOnceAfter) {
  std::promise<void> entered, release;
  auto release_f = release.get_future().share();
  ObjectID blocker = 0;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto& o) {
    if (o.id == blocker && o.spec.size == 0) {
      entered.set_value();
      release_f.wait();
    }
    return Result{};
  });
  register_widgets();  // one worker
  auto w = widgets();
  blocker = w.create(ctx_, {"blocker", 0}).id;
  start();
  entered.get_future().wait();
  auto other = w.create(ctx_, {"other", 1});
  for (int i = 2; i < 6; ++i) {
    w.update(ctx_, other.id, {"other", i});   // queued while the worker is busy
    w.update(ctx_, blocker, {"blocker", i});  // re-added while in flight
  }
  release.set_value();
  EXPECT_TRUE(eventually([&] { return recorder_->total() == 3; }));
  settle();
  EXPECT_EQ(recorder_->count(other.id), 1);
  EXPECT_EQ(recorder_->last(other.id).spec.size, 5);  // level-triggered: the latest state
  EXPECT_EQ(recorder_->count(blocker), 2);
  EXPECT_EQ(recorder_->last(blocker).spec.size, 5);
}

TEST_F(ReconcileTest, ErrorsBackOffExponentiallyUpToThirtySeconds) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("boom"); });
  register_widgets(with_resync_interval(0s));  // only the ladder wakes it
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  int expected = 1;
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == expected; }));
  for (auto step : {1s, 2s, 4s, 8s, 16s, 30s, 30s}) {
    ASSERT_TRUE(scheduled_at(o.id, clock_->now() + step)) << step.count();
    clock_->advance(step - 1ms);
    settle();
    EXPECT_EQ(recorder_->count(o.id), expected) << "fired early at step " << step.count();
    clock_->advance(1ms);
    ++expected;
    EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == expected; }))
        << "step " << step.count();
  }
}

TEST_F(ReconcileTest, MaxRetryIntervalCapsTheLadder) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw 42; });  // not a std::exception
  register_widgets(with_max_retry_interval(3s));
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  int expected = 1;
  for (auto step : {1s, 2s, 3s, 3s}) {
    EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == expected; }));
    ASSERT_TRUE(scheduled_at(o.id, clock_->now() + step)) << step.count();
    clock_->advance(step);
    ++expected;
  }
}

// A ladder without a cap (milliseconds::max()) doubles until it cannot, then stays at
// the cap: the next retry is never in the past, however many failures (requeues run the
// failing pass without waiting for its retry), with or without jitter.
TEST_F(ReconcileTest, AnUncappedLadderNeverOverflows) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("boom"); });
  register_widgets(with_resync_interval(0s),
                   with_backoff(1s, std::chrono::milliseconds::max(), 0.5));
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  settle();
  for (int failures = 1; failures <= 80; ++failures) {
    SCOPED_TRACE(failures);
    ASSERT_EQ(recorder_->count(o.id), failures);
    // Once the ladder reaches past the end of time the retry is never: nothing is
    // scheduled (the zero time).
    auto next = w.get_schedule(ctx_, o.id).next_requeue_at;
    EXPECT_TRUE(next > clock_->now() || next == Time{}) << to_millis(next);
    w.requeue(ctx_, o.id);
    ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == failures + 1; }));
    settle();
  }
}

TEST_F(ReconcileTest, BeehiveWideMaxRetryIntervalCapsEveryKindUnlessTheKindSetsItsOwn) {
  open(with_max_retry_interval(3s));
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("boom"); });
  auto via_recorder = [r = recorder_](auto& c, auto& cc, auto& o) { return (*r)(c, cc, o); };
  register_widgets(with_resync_interval(0s));  // the Beehive-wide cap
  const GroupKind user_kind{"acme.com", "User"};
  register_controller<WidgetSpec, WidgetStatus>(*bh_, gadget_kind, via_recorder,
                                                with_max_retry_interval(2s));  // its own
  register_controller<WidgetSpec, WidgetStatus>(*bh_, user_kind, via_recorder,
                                                with_max_retry_interval(0s));  // ignored
  Widgets gadgets(*bh_, gadget_kind), users(*bh_, user_kind);
  auto w = widgets().create(ctx_, {"w", 1});
  auto g = gadgets.create(ctx_, {"g", 1});
  auto u = users.create(ctx_, {"u", 1});
  start();
  auto all_at = [&](Time tw, Time tg, Time tu) {
    return eventually([&] {
      return widgets().get_schedule(ctx_, w.id).next_requeue_at == tw &&
             gadgets.get_schedule(ctx_, g.id).next_requeue_at == tg &&
             users.get_schedule(ctx_, u.id).next_requeue_at == tu;
    });
  };
  auto now = [&] { return clock_->now(); };
  ASSERT_TRUE(all_at(now() + 1s, now() + 1s, now() + 1s));
  clock_->advance(1s);
  ASSERT_TRUE(all_at(now() + 2s, now() + 2s, now() + 2s));
  clock_->advance(2s);
  ASSERT_TRUE(all_at(now() + 3s, now() + 2s, now() + 3s));  // 4 s capped: 3 s, 2 s, 3 s
  clock_->advance(2s);
  EXPECT_TRUE(all_at(now() + 1s, now() + 2s, now() + 1s));  // only the gadget retried
  clock_->advance(1s);
  EXPECT_TRUE(all_at(now() + 3s, now() + 1s, now() + 3s));  // still capped
  EXPECT_EQ(recorder_->count(w.id), 4);
  EXPECT_EQ(recorder_->count(g.id), 4);
  EXPECT_EQ(recorder_->count(u.id), 4);
}

TEST_F(ReconcileTest, ANonStdExceptionIsRetriedWithoutRestartingTheController) {
  struct Log {
    std::mutex mu;
    std::vector<std::pair<std::string, LogFields>> entries;
    int count(const std::string& needle) {
      std::lock_guard lk(mu);
      return static_cast<int>(std::count_if(entries.begin(), entries.end(), [&](auto& e) {
        return e.first.find(needle) != std::string::npos;
      }));
    }
  };
  auto log = std::make_shared<Log>();
  open(with_logger([log](LogLevel, std::string_view m, const LogFields& f) {
    std::lock_guard lk(log->mu);
    log->entries.emplace_back(std::string(m), f);
  }));
  std::atomic<bool> fail{true};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto&) -> Result {
    if (fail) throw 42;
    return {};
  });
  register_widgets(with_resync_interval(0s));
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  settle();
  // A controller restarted from the store would list the object and reconcile it at once.
  ASSERT_EQ(recorder_->count(o.id), 1);
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 1s));
  clock_->advance(1s);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }));
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 2s));  // the ladder went on: state kept
  clock_->advance(2s);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 3; }));
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 4s));
  fail = false;
  w.requeue(ctx_, o.id);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 4; }));
  EXPECT_TRUE(scheduled_at(o.id, Time{}));  // a success clears it
  settle();
  EXPECT_EQ(recorder_->count(o.id), 4);
  close();
  EXPECT_EQ(log->count("restarted"), 0);
  EXPECT_EQ(log->count("reconcile failed; retrying with backoff"), 3);
  std::lock_guard lk(log->mu);
  for (auto& [message, fields] : log->entries) {
    if (message.find("reconcile failed") == std::string::npos) continue;
    EXPECT_NE(std::find(fields.begin(), fields.end(),
                        std::pair<std::string, std::string>{"reason", "unknown exception"}),
              fields.end());
  }
}

TEST_F(ReconcileTest, SuccessClearsTheBackoffAndAPlainRequeueKeepsIt) {
  std::atomic<bool> fail{true};
  std::atomic<int> successes{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto&) -> Result {
    if (fail) throw std::runtime_error("boom");
    ++successes;
    return {};
  });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 1s));
  clock_->advance(1s);
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 2s));
  w.requeue(ctx_, o.id);  // keeps the ladder: the next failure waits 4 s
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 4s));
  w.requeue(ctx_, o.id, with_reset_backoff());
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 1s));
  fail = false;
  clock_->advance(1s);
  ASSERT_TRUE(eventually([&] { return successes == 1; }));
  EXPECT_TRUE(scheduled_at(o.id, Time{}));  // success: nothing scheduled
  fail = true;
  w.update(ctx_, o.id, {"a", 2});
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 1s));  // the ladder starts over
}

// beehive-ctl requeue, and Client::requeue on a standby, reach the controller through the
// change log (here: another writer on the same store). A plain one keeps the backoff
// ladder; one asked with the backoff reset starts it over.
TEST_F(ReconcileTest, ARequeueThroughTheChangeLogResetsTheBackoffWhenAskedTo) {
  std::atomic<int> passes{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto&) -> Result {
    ++passes;
    throw std::runtime_error("boom");
  });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 1s));
  clock_->advance(1s);
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 2s));
  Beehive other(open_test_store(dir_.file("beehive.db")));
  caf::scoped_actor self{actor_system_of(other)};
  const auto log_requeue = [&](bool reset_backoff) {
    bool logged = false;
    self->request(other.store_writer(), 10s, log_requeue_request{widget_kind, o.id, reset_backoff})
        .receive([&](bool ok) { logged = ok; }, [](caf::error&) {});
    return logged;
  };
  ASSERT_TRUE(log_requeue(false));
  ASSERT_TRUE(eventually([&] { return passes == 3; }));
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 4s));  // the ladder went on
  ASSERT_TRUE(log_requeue(true));
  ASSERT_TRUE(eventually([&] { return passes == 4; }));
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 1s));  // and started over
}

TEST_F(ReconcileTest, RequeueAfterReconcilesAgainAndTheNewestScheduleWins) {
  std::atomic<int> delay_ms{10000};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body(
      [&](auto&, auto&, auto&) { return Result{std::chrono::milliseconds(delay_ms.load())}; });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 10s));
  delay_ms = 3000;
  w.update(ctx_, o.id, {"a", 2});  // reconciles now, returns 3 s: replaces the 10 s timer
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 3s));
  EXPECT_EQ(recorder_->count(o.id), 2);
  delay_ms = 0;
  clock_->advance(3s);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 3; }));
  clock_->advance(10s);  // the replaced 10 s timer never fires
  settle();
  EXPECT_EQ(recorder_->count(o.id), 3);
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});
}

// A requeue_after so long it would come after the end of time is never: nothing is
// scheduled (the schedule reads as the zero time, not as a date in 2262), and it replaces
// a schedule the object had.
TEST_F(ReconcileTest, ARequeueAfterBeyondTheEndOfTimeSchedulesNothing) {
  std::atomic<bool> never{false};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto&) {
    return never ? Result{std::chrono::milliseconds::max()} : Result{10s};
  });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 10s));
  never = true;
  w.update(ctx_, o.id, {"a", 2});
  settle();
  EXPECT_EQ(recorder_->count(o.id), 2);
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});
  EXPECT_TRUE(widget_controller_state().timers.empty());
}

/// A pass that starts while an earlier pass's timer is pending replaces that timer, even
/// when the timer falls due while the new pass runs.
TEST_F(ReconcileTest, APassReplacesThePendingTimerItStartedUnder) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto& o) {
    if (o.spec.size == 1) return Result{5s};
    gate.pass();
    return Result{1h};
  });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 5s));
  w.update(ctx_, o.id, {"a", 2});  // reconciles now, while the 5 s timer is pending
  gate.wait_entered();
  EXPECT_TRUE(widget_controller_state().timers.empty());  // the running pass decides next
  clock_->advance(5s);  // when the old timer would have fallen due
  gate.open();
  settle();
  EXPECT_EQ(recorder_->count(o.id), 2);
  EXPECT_EQ(w.get_schedule(ctx_, o.id).next_requeue_at, clock_->now() + 1h);
}

TEST_F(ReconcileTest, ResyncRequeuesUnsettledAndDeletionPendingObjectsOnly) {
  recorder_->set_body([](auto& ctx, auto& cc, auto& o) {
    if (o.spec.color == "settles") cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
    return Result{};
  });
  register_widgets();
  auto w = widgets();
  auto settled = w.create(ctx_, {"settles", 1});
  auto unsettled = w.create(ctx_, {"never", 1});
  auto deleting = w.create(ctx_, {"settles", 1}, with_finalizers({"f"}));
  start();
  EXPECT_TRUE(eventually([&] { return recorder_->total() == 3; }));
  w.remove(ctx_, deleting.id);
  EXPECT_TRUE(eventually([&] { return recorder_->count(deleting.id) == 2; }));
  clock_->advance(29s);
  settle();
  EXPECT_EQ(recorder_->total(), 4);
  clock_->advance(1s);  // default resync: 30 s
  EXPECT_TRUE(eventually([&] { return recorder_->count(unsettled.id) == 2; }));
  EXPECT_TRUE(eventually([&] { return recorder_->count(deleting.id) == 3; }));
  EXPECT_EQ(recorder_->count(settled.id), 1);
  clock_->advance(30s);
  EXPECT_TRUE(eventually([&] { return recorder_->count(unsettled.id) == 3; }));
  EXPECT_EQ(recorder_->count(settled.id), 1);
}

TEST_F(ReconcileTest, ResyncIntervalFromTheBeehiveAndPerKind) {
  open(with_resync_interval(5s));
  register_widgets();
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [r = recorder_](auto& c, auto& cc, auto& o) { return (*r)(c, cc, o); },
      with_resync_interval(0s));  // disabled for gadgets
  auto w = widgets().create(ctx_, {"w", 1});
  auto g = Widgets(*bh_, gadget_kind).create(ctx_, {"g", 1});
  start();
  EXPECT_TRUE(eventually([&] { return recorder_->total() == 2; }));
  clock_->advance(5s);
  EXPECT_TRUE(eventually([&] { return recorder_->count(w.id) == 2; }));
  clock_->advance(1h);
  EXPECT_TRUE(eventually([&] { return recorder_->count(w.id) == 3; }));
  settle();
  EXPECT_EQ(recorder_->count(g.id), 1);
}

struct Picky {
  int v = 0;
};
void to_json(nlohmann::json& j, const Picky& p) { j = {{"v", p.v}}; }
void from_json(const nlohmann::json& j, Picky& p) { p.v = j.at("v").get<int>(); }

TEST_F(ReconcileTest, UndecodableRowsAreQuarantinedAndWarnedAboutAtEachResync) {
  std::atomic<int> calls{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  register_controller<Picky, WidgetStatus>(*bh_, widget_kind, [&](auto&, auto&, auto&) {
    ++calls;
    return Result{};
  });
  auto good = Client<Picky, WidgetStatus>(*bh_, widget_kind).create(ctx_, Picky{1});
  auto poison = widgets().create(ctx_, {"not a picky", 1});  // same kind, other shape
  ::testing::internal::CaptureStderr();
  start();
  ASSERT_TRUE(eventually([&] { return calls == 1; }));
  settle();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(widgets().get_schedule(ctx_, poison.id), Schedule{});  // no backoff
  clock_->advance(30s);
  ASSERT_TRUE(eventually([&] { return calls == 2; }));  // good is unsettled too
  settle();
  auto err = ::testing::internal::GetCapturedStderr();
  auto needle = "quarantined Widget.acme.com " + std::to_string(poison.id);
  size_t n = 0;
  for (auto p = err.find(needle); p != std::string::npos; p = err.find(needle, p + 1)) ++n;
  EXPECT_EQ(n, 2u) << err;
  (void)good;
}

TEST_F(ReconcileTest, WorkersRunDifferentIdsInParallel) {
  // Eight reconciles that each block until all eight run: more than the threads of
  // CAF's scheduler (max(cores, 4)), so only detached workers can all block at once.
  constexpr int n = 8;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::atomic<int> met{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto&) {
    std::unique_lock lk(mu);
    ++arrived;
    cv.notify_all();
    if (cv.wait_for(lk, 10s, [&] { return arrived >= n; })) ++met;
    return Result{};
  });
  register_widgets(with_concurrency(n));
  for (int i = 0; i < n; ++i) widgets().create(ctx_, {"a", i});
  start();
  EXPECT_TRUE(eventually([&] { return recorder_->total() == n; }, 15s));
  EXPECT_TRUE(eventually([&] { return met == n; }, 15s));
}

TEST_F(ReconcileTest, NoIdIsEverReconciledConcurrently) {
  std::mutex mu;
  std::set<ObjectID> running;
  std::atomic<int> overlaps{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto& o) {
    {
      std::lock_guard lk(mu);
      if (!running.insert(o.id).second) ++overlaps;
    }
    // Hold the id for a while (yielding, so the other workers run meanwhile): a second
    // dispatch of it in this window would be caught.
    auto until = std::chrono::steady_clock::now() + 200us;
    while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
    {
      std::lock_guard lk(mu);
      running.erase(o.id);
    }
    return Result{};
  });
  register_widgets(with_concurrency(4));
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(w.create(ctx_, {"a", 0}).id);
  start();
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      for (int i = 1; i <= 60; ++i) {
        w.update(ctx_, ids[(i + t) % ids.size()], {"a", i * 10 + t});
        w.requeue(ctx_, ids[i % ids.size()]);
      }
    });
  for (auto& t : writers) t.join();
  // Every object ends reconciled at its latest spec.
  for (auto id : ids) {
    auto latest = w.get(ctx_, id).spec.size;
    EXPECT_TRUE(eventually([&] { return recorder_->last(id).spec.size == latest; }));
  }
  EXPECT_EQ(overlaps, 0);
}

TEST_F(ReconcileTest, RequeueChecksTheIdAndTheController) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_ERRC(w.requeue(ctx_, o.id), errc::no_controller);
  auto g = Widgets(*bh_, gadget_kind).create(ctx_, {"g", 1});
  EXPECT_ERRC(w.requeue(ctx_, g.id), errc::not_found);
  EXPECT_ERRC(w.requeue(ctx_, 424242), errc::not_found);
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});
}

// Requeue returns once the object is queued: its schedule says "now" as soon as the call
// returns, while the kind's only worker is busy with another object and the requeued one
// waits in the queue (it was due for a retry in 1 s).
TEST_F(ReconcileTest, RequeueReturnsOnceTheObjectIsQueued) {
  Gate gate;
  std::atomic<bool> fail{true};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  auto w = one_worker(gate, [&](const WidgetSpec& s) { return s.color == "fails" && fail; });
  auto failing = w.create(ctx_, {"fails", 1});
  start();
  settle();
  ASSERT_EQ(w.get_schedule(ctx_, failing.id).next_requeue_at, clock_->now() + 1s);
  w.create(ctx_, {"holds", 1});  // takes the only worker
  gate.wait_entered();
  for (int i = 0; i < 5; ++i) {
    w.requeue(ctx_, failing.id);
    EXPECT_EQ(w.get_schedule(ctx_, failing.id).next_requeue_at, clock_->now());
  }
  fail = false;
  gate.open();
  settle();
  EXPECT_EQ(w.get_schedule(ctx_, failing.id), Schedule{});
  EXPECT_EQ(recorder_->count(failing.id), 2);
}

// Stop waits for the passes in flight; meanwhile the controller queues nothing more: a
// retry or a resync that falls due neither queues objects nor lists the kind.
TEST_F(ReconcileTest, ADrainingControllerQueuesNothingMore) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](auto&, auto&, auto& o) -> Result {
    if (o.spec.color == "holds") gate.pass();
    if (o.spec.color == "fails") throw std::runtime_error("boom");
    return {};
  });
  register_widgets(with_concurrency(1), with_resync_interval(1s));
  auto w = widgets();
  auto failing = w.create(ctx_, {"fails", 1});
  start();
  settle();
  ASSERT_EQ(w.get_schedule(ctx_, failing.id).next_requeue_at, clock_->now() + 1s);
  w.create(ctx_, {"holds", 1});
  gate.wait_entered();
  auto before = widget_controller_state();
  auto stopping = std::async(std::launch::async, [&] { stop_(Context{}); });
  // Draining (the root asked it for its passes) once it no longer dispatches.
  ASSERT_TRUE(eventually([&] { return !widget_controller_state().dispatching; }));
  clock_->advance(1s);  // the retry and the resync fall due
  ASSERT_TRUE(eventually([&] { return widget_controller_state().timers.empty(); }));
  auto during = widget_controller_state();
  EXPECT_EQ(during.queue_length, 0u);
  EXPECT_EQ(during.resync_listings, before.resync_listings);
  gate.open();
  ASSERT_EQ(stopping.wait_for(10s), std::future_status::ready);
  stopping.get();
  stop_ = nullptr;
}

// Two deleting widgets, one depending on the other, collected in one GC pass: the
// collection wakes the dependent, which goes in the same commit. It is not queued again
// (a pass for nothing, and its schedule reading "now" while the worker is busy).
TEST_F(ReconcileTest, AnObjectRemovedInTheCommitThatWakesItIsNotQueuedAgain) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->hold(gate, "holds");
  auto cc = register_widgets(with_concurrency(1));
  auto w = widgets();
  auto target = w.create(ctx_, {"target", 1});
  auto dependent = w.create(ctx_, {"dependent", 1});
  cc.add_dependency(ctx_, dependent.id, target.id);
  start();
  settle();
  w.create(ctx_, {"holds", 1});  // takes the only worker: the removals stay queued
  gate.wait_entered();
  cc.within(ctx_, [&](const Context& tx) {  // one commit: the GC finds both at once
    w.remove(tx, dependent.id);
    w.remove(tx, target.id);
  });
  ASSERT_TRUE(eventually([&] { return gone(w, ctx_, dependent.id) && gone(w, ctx_, target.id); }));
  EXPECT_TRUE(eventually([&] {
    return w.get_schedule(ctx_, dependent.id) == Schedule{} &&
           w.get_schedule(ctx_, target.id) == Schedule{};
  }));
  gate.open();
  settle();
}

// An object requeued (or changed) while its own pass runs is queued behind that pass: its
// schedule reads now, and a schedule watch hears of it, rather than "nothing scheduled"
// until the pass ends.
TEST_F(ReconcileTest, AnObjectQueuedBehindItsOwnRunningPassIsScheduledNow) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  auto w = one_worker(gate, [](const WidgetSpec&) { return false; });
  auto o = w.create(ctx_, {"holds", 1});
  start();
  gate.wait_entered();
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});  // running: nothing scheduled
  auto schedules = w.watch_schedule(ctx_, o.id);
  ASSERT_EQ(schedules.next_for(5s), Schedule{});  // the snapshot
  w.requeue(ctx_, o.id);
  EXPECT_EQ(w.get_schedule(ctx_, o.id).next_requeue_at, clock_->now());
  auto seen = schedules.next_for(5s);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->next_requeue_at, clock_->now());
  gate.open();
  settle();
  EXPECT_EQ(recorder_->count(o.id), 2);  // the requeue's pass ran
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});
}

// A requeue waits for the controller within its context, as other blocking calls do:
// behind a check of the id that is slow to come, it ends at the deadline, and the object
// is left as it was (still due for its retry, not queued).
TEST_F(ReconcileTest, ARequeueWhoseContextEndsFirstLeavesTheObjectAsItWas) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("boom"); });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  settle();
  const auto retry = clock_->now() + 1s;
  ASSERT_EQ(w.get_schedule(ctx_, o.id).next_requeue_at, retry);
  {
    HeldReader held(*bh_->core(), 10s);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_ERRC(w.requeue(ctx_.with_timeout(50ms), o.id), errc::deadline_exceeded);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  }
  settle();
  EXPECT_EQ(w.get_schedule(ctx_, o.id).next_requeue_at, retry);
  EXPECT_EQ(recorder_->count(o.id), 1);
}

/// Arms detail::faults::listing_read (and, if given, reconcile_pass) for a test's
/// scope: cleared before the beehive goes, however the test ends.
struct ListingFault {
  explicit ListingFault(std::function<void(std::vector<std::pair<ObjectID, std::int64_t>>&)> f,
                        std::function<void(bool)> pass = {}) {
    detail::faults::listing_read = std::move(f);
    detail::faults::reconcile_pass = std::move(pass);
  }
  ~ListingFault() {
    detail::faults::listing_read = nullptr;
    detail::faults::reconcile_pass = nullptr;
  }
};

int ReconcileTest::start_with_a_listing_that_misses_late(
    const std::function<void(const caf::actor&, const Object<WidgetSpec, WidgetStatus>&)>&
        meanwhile) {
  register_widgets(with_resync_interval(0ms));  // no resync would find it
  auto w = widgets();
  auto early = w.create(ctx_, {"early", 1});
  auto late = w.create(ctx_, {"late", 2});
  std::atomic<int> listings{0};
  ListingFault fault([&](auto& ids) {
    if (listings++ > 0) return;
    std::erase_if(ids, [&](const auto& e) { return e.first == late.id; });
    meanwhile(caf::actor_cast<caf::actor>(*bh_->controller(widget_kind)), late);
  });
  auto stop_first = stop_before_locals();  // before the fault is disarmed
  start();
  settle();
  EXPECT_EQ(recorder_->count(late.id), 1);
  EXPECT_EQ(listings.load(), 2);
  return recorder_->count(early.id);
}

// Other processes' changes lost unheard (the change log trimmed past what this process
// had read) while the first listing is out: that listing may have been read before
// them, and an object they created is then in neither. The controller lists again once
// that listing ends. Here the listing reads as if before `late` existed, and the loss
// reaches the controller before the listing does.
TEST_F(ReconcileTest, ChangesLostWhileTheFirstListingIsOutAreListedAgain) {
  auto early_passes = start_with_a_listing_that_misses_late([](auto& controller, auto& late) {
    commit_record lost;
    lost.lost_through = late.resource_version;
    caf::anon_send(controller, lost);
  });
  EXPECT_EQ(early_passes, 2);  // listed again, it starts over as a takeover does
}

// Taking over as the leader while the start listing is out: what was created while this
// process did not lead was not queued (a standby queues nothing), and the listing may
// have been read before it; it lists again once the listing ends. Here the listing
// leaves `late` out, as one read before its creation, and the process stops and starts
// leading while it is out.
TEST_F(ReconcileTest, ATakeoverWhileTheFirstListingIsOutListsAgain) {
  start_with_a_listing_that_misses_late([](auto& controller, auto&) {
    caf::anon_send(controller, detail::leadership_atom::value, false);
    caf::anon_send(controller, detail::leadership_atom::value, true);
  });
}

// A listing read before an object's removal does not queue it again once the removal
// was heard: no pass runs for an object that is gone. Here the removal (a deletion
// request the GC completes at once) happens while the first listing, which read the
// object, waits to reach the controller.
TEST_F(ReconcileTest, AListingReadBeforeARemovalDoesNotQueueTheRemovedObject) {
  register_widgets(with_resync_interval(0ms));
  auto w = widgets();
  auto kept = w.create(ctx_, {"kept", 1});
  auto removed = w.create(ctx_, {"removed", 2});
  std::atomic<int> listings{0}, passes{0};
  ListingFault fault(
      [&](auto& ids) {
        if (listings++ > 0) return;
        ASSERT_EQ(ids.size(), 2u);
        w.remove(ctx_, removed.id);
        ASSERT_TRUE(eventually([&] { return gone(w, ctx_, removed.id); }));
        // The writer sends a commit's record on before it takes the next write: once
        // this one is done, the removal's record is ahead of the listing's reply.
        Widgets(*bh_, gadget_kind).create(ctx_, {"fence", 1});
      },
      [&](bool begins) { passes += begins; });
  auto stop_first = stop_before_locals();  // before the fault is disarmed
  start();
  settle();
  EXPECT_EQ(recorder_->count(kept.id), 1);
  EXPECT_EQ(passes.load(), 1);  // kept's alone
  EXPECT_EQ(w.get_schedule(ctx_, removed.id), Schedule{});
}

// A pass that requeues another kind's object hands that kind's controller work without
// a commit, possibly after it answered settle's round as idle: settle waits for the pass
// the requeue caused all the same. Here the widget's pass waits until settle's round has
// asked both controllers (its own holds the request), then requeues the gadget, whose
// pass waits at a gate: settle must not return while it does.
TEST_F(ReconcileTest, SettleWaitsForThePassARequeueFromAnotherPassCaused) {
  Gate requeue_now, gadget_held;
  auto stop_first = stop_before_locals();
  struct Open {
    Gate &a, &b;
    ~Open() {
      a.open();
      b.open();
    }
  } open_gates{requeue_now, gadget_held};  // before the beehive stops, however it ends
  std::atomic<int> gadget_passes{0};
  register_controller<WidgetSpec, WidgetStatus>(*bh_, gadget_kind, [&](auto&, auto&, auto&) {
    if (++gadget_passes == 2) gadget_held.pass();
    return Result{};
  });
  Widgets gadgets(*bh_, gadget_kind);
  auto g = gadgets.create(ctx_, {"g", 1});
  recorder_->set_body([&](auto& ctx, auto&, auto&) {
    requeue_now.pass();
    gadgets.requeue(ctx, g.id);
    return Result{};
  });
  register_widgets();
  start();
  settle();
  ASSERT_EQ(gadget_passes.load(), 1);
  auto w = widgets().create(ctx_, {"w", 1});
  requeue_now.wait_entered();
  auto settled = std::async(std::launch::async, [&] { settle(); });
  ASSERT_TRUE(eventually([&] { return widget_controller_state().settle_waiting; }));
  requeue_now.open();
  gadget_held.wait_entered();
  EXPECT_EQ(settled.wait_for(300ms), std::future_status::timeout)
      << "settle returned while the gadget's pass ran";
  gadget_held.open();
  settled.get();
  EXPECT_EQ(gadget_passes.load(), 2);
  EXPECT_EQ(recorder_->count(w.id), 1);
}

// The finalizer pattern, with a pass that also asks to be reconciled again in a day: the
// GC collects the object once its last finalizer is gone, and nothing of it stays
// scheduled (a missing id reads as the zero Schedule, and its watch hears so).
TEST_F(ReconcileTest, NothingStaysScheduledForAnObjectOnceItIsCollected) {
  recorder_->set_body([](auto& ctx, auto& cc, auto& o) {
    if (o.deletion_requested_at) cc.remove_finalizer(ctx, o.id, "acme.com/cleanup");
    return Result{24h};
  });
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1}, with_finalizers({"acme.com/cleanup"}));
  start();
  settle();
  ASSERT_EQ(w.get_schedule(ctx_, o.id).next_requeue_at, clock_->now() + 24h);
  auto schedules = w.watch_schedule(ctx_, o.id);
  ASSERT_EQ(schedules.next_for(5s), Schedule{clock_->now() + 24h});
  w.remove(ctx_, o.id);
  settle();
  ASSERT_EQ(recorder_->count(o.id), 2);
  EXPECT_ERRC(w.get(ctx_, o.id), errc::not_found);
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});
  EXPECT_EQ(schedules.next_for(0ms), Schedule{});  // conflated: the latest value
  auto st = widget_controller_state();
  EXPECT_TRUE(st.timers.empty());
  EXPECT_TRUE(st.backoff.empty());
  EXPECT_EQ(st.queue_length, 0u);
  clock_->advance(24h);
  settle();
  EXPECT_EQ(recorder_->count(o.id), 2);
}

// A leader that steps down stops scheduling: what it had queued or timed is the new
// leader's to do, so its clients read no time for it, its schedule watches hear the zero
// Schedule, and a pass in flight at the step-down (here one that fails, as a deposed
// leader's writes do) schedules no retry. The step-down arrives as the root delivers it.
TEST_F(ReconcileTest, ALeaderThatStepsDownReportsNothingScheduled) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  auto w = one_worker(gate, [](const WidgetSpec& s) { return s.color != "waits"; });
  auto retrying = w.create(ctx_, {"retries", 1});
  start();
  settle();
  ASSERT_EQ(w.get_schedule(ctx_, retrying.id).next_requeue_at, clock_->now() + 1s);
  auto running = w.create(ctx_, {"holds", 1});  // takes the only worker
  gate.wait_entered();
  auto waiting = w.create(ctx_, {"waits", 1});
  ASSERT_TRUE(scheduled_at(waiting.id, clock_->now()));  // queued behind it
  std::vector<Stream<Schedule>> watches;
  for (auto id : {retrying.id, waiting.id}) {
    watches.push_back(w.watch_schedule(ctx_, id));
    ASSERT_NE(watches.back().next_for(5s), Schedule{});
  }

  auto controller = caf::actor_cast<caf::actor>(*bh_->controller(widget_kind));
  caf::scoped_actor self{controller->home_system()};
  self->send(controller, detail::leadership_atom::value, false);
  controller_state st;  // asked after the step-down (one sender's messages keep their order)
  self->request(controller, 10s, inspect_atom::value)
      .receive([&](const controller_state& s) { st = s; },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  EXPECT_EQ(st.queue_length, 0u);
  EXPECT_TRUE(st.timers.empty());
  for (auto id : {retrying.id, running.id, waiting.id})
    EXPECT_EQ(w.get_schedule(ctx_, id), Schedule{}) << id;
  for (auto& s : watches) EXPECT_EQ(s.next_for(5s), Schedule{});

  gate.open();  // the pass in flight fails
  settle();
  EXPECT_EQ(w.get_schedule(ctx_, running.id), Schedule{});
  self->request(controller, 10s, inspect_atom::value)
      .receive([&](const controller_state& s) { st = s; },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  EXPECT_TRUE(st.timers.empty());
  EXPECT_TRUE(st.in_flight.empty());
  clock_->advance(1s);  // the retry it had timed is not its own any more
  settle();
  EXPECT_EQ(recorder_->count(retrying.id), 1);
  EXPECT_EQ(recorder_->count(waiting.id), 0);
}

// A resync lists the kind's unsettled objects on the reader. Behind a listing that
// outlasts the interval (a slow store) the ticks do not pile listings up: one runs, and
// the ticks that came meanwhile fold into one more, however many intervals passed.
TEST_F(ReconcileTest, ResyncListingsDoNotPileUpBehindASlowListing) {
  auto o = start_with_an_unsettled_widget();
  auto controller = *bh_->controller(widget_kind);
  auto scheduler = bh_->scheduler();
  caf::scoped_actor self{controller->home_system()};
  auto listings = [&] { return widget_controller_state().resync_listings; };
  auto next_wake = [&] {
    Time t{};
    self->request(scheduler, 10s, inspect_atom::value)
        .receive([&](const scheduler_state& s) { t = s.earliest; },
                 [](caf::error& e) { ADD_FAILURE() << error_message(e); });
    return t;
  };
  const auto before = listings();
  const auto passes = recorder_->count(o.id);
  {
    HeldReader held(*bh_->core(), 60s);
    for (int i = 0; i < 20; ++i) {
      clock_->advance(1s);
      // The controller took this tick (and asked for the next one) before the test moves on.
      ASSERT_TRUE(eventually([&] { return next_wake() == clock_->now() + 1s; })) << i;
    }
    EXPECT_EQ(listings() - before, 1u);
  }
  settle();
  EXPECT_EQ(listings() - before, 2u);
  EXPECT_GT(recorder_->count(o.id), passes);  // and the listings did queue it
}

// A process that does not lead lists nothing at its resync ticks: it would queue none of
// what it read (a standby stays idle, rather than reading every kind each interval).
TEST_F(ReconcileTest, AProcessThatDoesNotLeadListsNothingAtItsResyncTicks) {
  auto o = start_with_an_unsettled_widget();
  auto controller = caf::actor_cast<caf::actor>(*bh_->controller(widget_kind));
  auto listings = [&] { return widget_controller_state().resync_listings; };
  caf::anon_send(controller, detail::leadership_atom::value, false);
  const auto before = listings();  // asked after the step down (queued after it)
  const auto passes = recorder_->count(o.id);
  clock_->advance(5s);
  settle();
  EXPECT_EQ(listings(), before);
  EXPECT_EQ(recorder_->count(o.id), passes);
  caf::anon_send(controller, detail::leadership_atom::value, true);
  settle();
  clock_->advance(1s);
  settle();
  EXPECT_GT(listings(), before);  // leading again: its ticks list
  EXPECT_GT(recorder_->count(o.id), passes);
}

/// The finalizer pattern: a pass removes its finalizer from an object being deleted, and
/// the GC collects the object before the pass's next write. The pass ends as done: no
/// error logged, no retry.
TEST_F(ReconcileTest, APassWhoseObjectWasCollectedMeanwhileEndsAsDone) {
  LogCapture log;
  open(with_logger(log.logger()));
  auto stop_first = stop_before_locals();
  auto w = widgets();
  std::atomic<bool> wrote_after_collection{false};
  recorder_->set_body([&](auto& rctx, auto& cc, auto& o) {
    if (!o.deletion_requested_at) return Result{};
    cc.remove_finalizer(rctx, o.id, "acme.com/cleanup");
    eventually([&] {  // the GC collects it once the last finalizer is gone
      try {
        w.get(Context{}, o.id);
        return false;
      } catch (const Error&) {
        return true;
      }
    });
    wrote_after_collection = true;
    cc.update_status(rctx, o.id, o.generation, WidgetStatus{true});  // not_found
    return Result{};
  });
  register_widgets();
  auto o = w.create(ctx_, {"a", 1}, with_finalizers({"acme.com/cleanup"}));
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  w.remove(ctx_, o.id);
  ASSERT_TRUE(eventually([&] { return wrote_after_collection.load(); }));
  auto state = [&] { return widget_controller_state(); };
  ASSERT_TRUE(eventually([&] { return state().in_flight.empty(); }));
  EXPECT_TRUE(state().backoff.empty());
  EXPECT_TRUE(state().timers.empty());
  EXPECT_EQ(recorder_->count(o.id), 2);
  EXPECT_FALSE(log.contains("reconcile failed"));
}

}  // namespace
}  // namespace beehive::test
