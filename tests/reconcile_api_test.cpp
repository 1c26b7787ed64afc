// The reconcile API of issue 24: terminal errors, requeue_now, backoff and rate limits
// per kind, owns and watches, the pass's own tools (now, log), add_finalizer, condition
// generations and transition times, and create_or_update's create options. Time moves
// only through the manual clock.

#include <limits>
#include <set>

#include <SQLiteCpp/SQLiteCpp.h>
#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"
#include "schema_downgrade.hpp"

namespace beehive::test {
namespace {

using Gadgets = Client<WidgetSpec, WidgetStatus>;

/// The object's runs in the "reconcile" category, newest first.
std::vector<Event> events_of(Widgets& w, const Context& ctx, ObjectID id) {
  return w.list_events(ctx, id, with_event_category("reconcile"));
}

class ReconcileApiTest : public ControllerTest {
 protected:
  /// Starts a beehive whose widgets always fail, with `backoff`, and checks that the
  /// first retries of twelve widgets fall in [lo, hi] from now, and not all at one time.
  void first_retries_jittered_within(Option backoff, std::chrono::milliseconds lo,
                                     std::chrono::milliseconds hi) {
    recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("no"); });
    register_widgets(std::move(backoff), with_resync_interval(std::chrono::seconds(0)));
    start();
    auto w = widgets();
    std::vector<ObjectID> ids;
    for (int i = 0; i < 12; ++i) ids.push_back(w.create(ctx_, {"a", i}).id);
    auto t0 = clock_->now();
    std::set<Time> seen;
    for (auto id : ids) {
      // Queued, it reads as now: wait for the retry its first pass armed.
      ASSERT_TRUE(eventually([&] { return w.get_schedule(ctx_, id).next_requeue_at > t0; }));
      auto at = w.get_schedule(ctx_, id).next_requeue_at;
      EXPECT_GE(at, t0 + lo);
      EXPECT_LE(at, t0 + hi);
      seen.insert(at);
    }
    EXPECT_GT(seen.size(), 1u);  // twelve equal draws: not jitter
  }
  /// A started beehive whose widgets always fail terminally, and one widget that did
  /// once (its mark set, its event recorded, settled).
  ObjectID a_terminally_failed_widget() {
    recorder_->set_body([](auto&, auto&, auto&) -> Result { throw TerminalError("never"); });
    register_widgets(with_resync_interval(std::chrono::seconds(10)));
    start();
    auto w = widgets();
    auto o = w.create(ctx_, {"a", 1});
    EXPECT_TRUE(eventually([&] { return events_of(w, ctx_, o.id).size() == 1; }));
    settle();
    EXPECT_EQ(recorder_->count(o.id), 1);
    return o.id;
  }
};

// -- 1. TerminalError ---------------------------------------------------------------------

TEST_F(ReconcileApiTest, ATerminalErrorIsNotRetriedAndIsRecordedAsAWarningEvent) {
  LogCapture log;
  open(with_logger(log.logger()));
  recorder_->set_body([](auto&, auto&, auto& o) -> Result {
    if (o.spec.size == 1) throw TerminalError("size 1 can never work");
    return {};
  });
  register_widgets(with_resync_interval(10s));
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  ASSERT_TRUE(eventually([&] { return events_of(w, ctx_, o.id).size() == 1; }));
  auto e = events_of(w, ctx_, o.id).front();
  EXPECT_EQ(e.type, EventType::Warning);
  EXPECT_EQ(e.reason, "TerminalError");
  EXPECT_EQ(e.message, "size 1 can never work");
  EXPECT_TRUE(log.contains("terminal error"));
  EXPECT_TRUE(scheduled_at(o.id, Time{}));  // no backoff armed
  // Unsettled, so every resync would queue it again: a terminal error keeps it out.
  for (int i = 0; i < 4; ++i) {
    clock_->advance(10s);
    settle();
  }
  EXPECT_EQ(recorder_->count(o.id), 1);
  EXPECT_EQ(events_of(w, ctx_, o.id).front().count, 1);
  EXPECT_FALSE(log.contains("retrying with backoff"));
  // A new spec reconciles it again (and it fails terminally again: one more event).
  w.update(ctx_, o.id, {"b", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }));
  ASSERT_TRUE(eventually([&] { return events_of(w, ctx_, o.id).front().count == 2; }));
  clock_->advance(10s);
  settle();
  EXPECT_EQ(recorder_->count(o.id), 2);
  // So does a requeue by hand.
  w.requeue(ctx_, o.id);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 3; }));
  // And a spec that works settles it for good.
  w.update(ctx_, o.id, {"b", 2});
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 4; }));
}

// Only a success or a requeue with reset_backoff clears the ladder: a terminal error is a
// failure too, so the failures after its mark is lifted go on climbing where the earlier
// ones left off.
TEST_F(ReconcileApiTest, ATerminalErrorKeepsTheObjectsPlaceOnTheBackoffLadder) {
  std::atomic<int> passes{0};
  recorder_->set_body([&](auto&, auto&, auto&) -> Result {
    if (++passes == 4) throw TerminalError("never");
    throw std::runtime_error("down");
  });
  auto stop_first = stop_before_locals();  // `passes` outlives every reconcile
  register_widgets(with_resync_interval(0s));
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  for (auto step : {1s, 2s, 4s}) {  // three failures: 1 s, 2 s, 4 s
    ASSERT_TRUE(scheduled_at(o.id, clock_->now() + step)) << step.count();
    clock_->advance(step);
  }
  settle();
  ASSERT_EQ(passes.load(), 4);  // the terminal error
  EXPECT_EQ(w.get_schedule(ctx_, o.id), Schedule{});
  w.update(ctx_, o.id, {"b", 1});  // lifts the mark; the pass fails again
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 8s));
  EXPECT_EQ(passes.load(), 5);
}

// A requeue that comes through the change log (beehive-ctl requeue, Client::requeue on a
// standby: here another writer on the same store) lifts a terminal mark too.
TEST_F(ReconcileApiTest, ARequeueFromAnotherProcessLiftsATerminalMark) {
  auto id = a_terminally_failed_widget();
  Beehive other(open_test_store(dir_.file("beehive.db")));
  caf::scoped_actor self{actor_system_of(other)};
  bool logged = false;
  self->request(other.store_writer(), 10s, log_requeue_request{widget_kind, id})
      .receive([&](bool ok) { logged = ok; }, [](caf::error&) {});
  ASSERT_TRUE(logged);
  EXPECT_TRUE(eventually([&] { return recorder_->count(id) == 2; }));
}

// A requeue this process logged is its own: when it reads another process's commits
// from the change log later, it does not take the requeue for theirs and run it again.
TEST_F(ReconcileApiTest, ARequeueThisProcessLoggedIsNotRunAgainWhenOthersCommitsAreRead) {
  register_widgets();
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  auto y = w.create(ctx_, {"y", 1});
  start();
  settle();
  ASSERT_EQ(recorder_->count(x.id), 1);
  caf::scoped_actor self{actor_system_of(*bh_)};
  bool logged = false;
  self->request(bh_->store_writer(), 10s, log_requeue_request{widget_kind, x.id})
      .receive([&](bool ok) { logged = ok; }, [](caf::error&) {});
  ASSERT_TRUE(logged);
  ASSERT_TRUE(eventually([&] { return recorder_->count(x.id) == 2; }));
  settle();
  Beehive other(open_test_store(dir_.file("beehive.db")));
  Widgets theirs(other, widget_kind);
  theirs.update(ctx_, y.id, {"y", 2});
  ASSERT_TRUE(eventually([&] { return recorder_->count(y.id) == 2; }));
  settle();
  EXPECT_EQ(recorder_->count(x.id), 2);
}

// Client::requeue on a beehive that never starts (a tool, or a client beside the
// application on its store) reaches the running one's controller the same way.
TEST_F(ReconcileApiTest, ARequeueFromABeehiveThatNeverStartsReachesTheRunningController) {
  auto id = a_terminally_failed_widget();
  Beehive tool(open_test_store(dir_.file("beehive.db")));
  Widgets unregistered(tool, widget_kind);
  EXPECT_ERRC(unregistered.requeue(ctx_, id), errc::no_controller);
  register_controller<WidgetSpec, WidgetStatus>(tool, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  Widgets theirs(tool, widget_kind);
  theirs.requeue(ctx_, id, with_reset_backoff());
  EXPECT_TRUE(eventually([&] { return recorder_->count(id) == 2; }));
  EXPECT_ERRC(theirs.requeue(ctx_, id + 1000), errc::not_found);
}

// The event is the failure's one trace, and its message is whatever the exception says:
// bytes that are not UTF-8 (a Latin-1 file name) and any length. The event log takes
// neither as given (invalid_argument), so the message is repaired and cut to fit rather
// than the event lost.
TEST_F(ReconcileApiTest, ATerminalErrorsEventKeepsAMessageOfAnyBytesAndLength) {
  const std::string latin1 = "cannot open /srv/caf\xe9.conf";
  const std::string huge = std::string(70 * 1024, 'x') + "\xe2\x9c\x93";
  recorder_->set_body([&](auto&, auto&, auto& o) -> Result {
    throw TerminalError(o.spec.size == 1 ? latin1 : huge);
  });
  register_widgets();
  start();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 2});
  ASSERT_TRUE(eventually([&] {
    return events_of(w, ctx_, a.id).size() == 1 && events_of(w, ctx_, b.id).size() == 1;
  }));
  EXPECT_EQ(events_of(w, ctx_, a.id).front().message, "cannot open /srv/caf\xef\xbf\xbd.conf");
  auto cut = events_of(w, ctx_, b.id).front().message;
  EXPECT_LE(cut.size(), 64u * 1024);
  EXPECT_GT(cut.size(), 64u * 1024 - 8);
  EXPECT_EQ(cut.substr(0, 100), huge.substr(0, 100));
  EXPECT_EQ(cut.substr(cut.size() - 3), "\xe2\x80\xa6");  // marked as cut
}

// Another process (another writer on the store) changes a target's conditions: the
// dependents are reconciled here, as for this process's own changes.
TEST_F(ReconcileApiTest, AnotherProcesssConditionChangeWakesTheDependents) {
  auto cc = register_widgets(with_resync_interval(0s));
  start();
  auto w = widgets();
  auto target = w.create(ctx_, {"target", 1});
  auto dependent = w.create(ctx_, {"dependent", 1});
  cc.add_dependency(ctx_, dependent.id, target.id);  // a new edge: one pass (or two)
  settle();
  const int before = recorder_->count(dependent.id);
  Beehive other(open_test_store(dir_.file("beehive.db")));
  auto theirs = register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  theirs.set_condition(ctx_, target.id, {"Ready", ConditionStatus::True});
  EXPECT_TRUE(eventually([&] { return recorder_->count(dependent.id) == before + 1; }));
  EXPECT_EQ(recorder_->count(target.id), 1);  // its own conditions do not wake it
}

// An edge another process adds wakes its dependent here, where its controller runs (the
// pass that added it may have read the target before a change no edge carried).
TEST_F(ReconcileApiTest, AnotherProcesssNewDependencyWakesTheDependent) {
  register_widgets(with_resync_interval(0s));
  start();
  auto w = widgets();
  auto target = w.create(ctx_, {"target", 1});
  auto dependent = w.create(ctx_, {"dependent", 1});
  settle();
  const int before = recorder_->count(dependent.id);
  Beehive other(open_test_store(dir_.file("beehive.db")));
  auto theirs = register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  theirs.add_dependency(ctx_, dependent.id, target.id);
  EXPECT_TRUE(eventually([&] { return recorder_->count(dependent.id) == before + 1; }));
  theirs.add_dependency(ctx_, dependent.id, target.id);  // exists: wakes no one
  settle();
  EXPECT_EQ(recorder_->count(dependent.id), before + 1);
  EXPECT_EQ(recorder_->count(target.id), 1);
}

TEST_F(ReconcileApiTest, ATerminalErrorIsNotLiftedByADependencyWake) {
  recorder_->set_body([](auto& ctx, auto& cc, auto& o) -> Result {
    if (o.spec.color == "target") {
      cc.set_condition(ctx, o.id,
                       {"Ready", o.spec.size % 2 ? ConditionStatus::True : ConditionStatus::False});
      return {};
    }
    throw TerminalError("never");
  });
  auto cc = register_widgets(with_resync_interval(0s));
  start();
  auto w = widgets();
  auto target = w.create(ctx_, {"target", 1});
  auto dependent = w.create(ctx_, {"dependent", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(dependent.id) == 1; }));
  cc.add_dependency(ctx_, dependent.id, target.id);
  w.update(ctx_, target.id, {"target", 2});  // its condition flips: the dependent is woken
  ASSERT_TRUE(eventually([&] { return recorder_->count(target.id) == 2; }));
  settle();
  EXPECT_EQ(recorder_->count(dependent.id), 1);
}

// -- 2. requeue_now -----------------------------------------------------------------------

TEST_F(ReconcileApiTest, RequeueNowRunsAgainPacedByTheLadderWithoutAnError) {
  LogCapture log;
  open(with_logger(log.logger()));
  std::atomic<int> asks{3};
  auto stop_first = stop_before_locals();
  recorder_->set_body([&](auto&, auto&, auto&) -> Result {
    if (asks-- > 0) return Result::requeue_now();
    return {};
  });
  register_widgets(with_resync_interval(0s));
  start();
  auto o = widgets().create(ctx_, {"a", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 1s));
  clock_->advance(1s);
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }));
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 2s));
  clock_->advance(2s);
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 3; }));
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 4s));
  clock_->advance(4s);
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 4; }));
  EXPECT_TRUE(scheduled_at(o.id, Time{}));  // the pass that did not ask cleared it
  settle();
  EXPECT_EQ(recorder_->count(o.id), 4);
  EXPECT_FALSE(log.contains("reconcile failed"));
}

// -- 3. with_backoff, with_rate_limit ------------------------------------------------------

TEST_F(ReconcileApiTest, WithBackoffSetsTheLaddersBaseAndCap) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("no"); });
  register_widgets(with_backoff(2s, 5s), with_resync_interval(0s));
  start();
  auto o = widgets().create(ctx_, {"a", 1});
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 2s));
  clock_->advance(2s);
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 4s));
  clock_->advance(4s);
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 5s));
  clock_->advance(5s);
  EXPECT_TRUE(scheduled_at(o.id, clock_->now() + 5s));
}

TEST_F(ReconcileApiTest, BackoffJitterStaysWithinItsFractionOfTheStep) {
  first_retries_jittered_within(with_backoff(10s, 30s, 0.2), 8s, 12s);
}

// At the ladder's cap, jitter only shortens a step: no retry waits longer than `max`.
TEST_F(ReconcileApiTest, BackoffJitterNeverPassesTheCap) {
  first_retries_jittered_within(with_backoff(10s, 10s, 0.2), 8s, 10s);
}

// Each worker is a thread: with_concurrency(INT_MAX) tried to spawn threads until the
// system refused one.
TEST_F(ReconcileApiTest, MoreWorkersThanMaxConcurrencyIsAnInvalidArgument) {
  EXPECT_ERRC(with_concurrency(max_concurrency + 1), errc::invalid_argument);
  EXPECT_ERRC(with_concurrency(std::numeric_limits<int>::max()), errc::invalid_argument);
  EXPECT_NO_THROW(with_concurrency(max_concurrency));
}

TEST_F(ReconcileApiTest, BadBackoffAndRateLimitValuesAreInvalidArguments) {
  EXPECT_ERRC(with_backoff(0s, 1s), errc::invalid_argument);
  EXPECT_ERRC(with_backoff(2s, 1s), errc::invalid_argument);
  EXPECT_ERRC(with_backoff(1s, 2s, 1.0), errc::invalid_argument);
  EXPECT_ERRC(with_backoff(1s, 2s, -0.1), errc::invalid_argument);
  EXPECT_ERRC(with_rate_limit(0, 1), errc::invalid_argument);
  // No limit at all is no option (with a ManualClock it spun without end).
  EXPECT_ERRC(with_rate_limit(std::numeric_limits<double>::infinity(), 1), errc::invalid_argument);
  EXPECT_ERRC(with_rate_limit(std::numeric_limits<double>::quiet_NaN(), 1), errc::invalid_argument);
  EXPECT_ERRC(with_rate_limit(1, 0), errc::invalid_argument);
}

TEST_F(ReconcileApiTest, ARateLimitPacesEveryPassOfTheKind) {
  register_widgets(with_rate_limit(1.0, 2), with_resync_interval(0s));
  auto w = widgets();
  for (int i = 0; i < 5; ++i) w.create(ctx_, {"a", i});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->total() == 2; }));  // the burst
  settle();
  EXPECT_EQ(recorder_->total(), 2);
  clock_->advance(500ms);
  settle();
  EXPECT_EQ(recorder_->total(), 2);
  clock_->advance(500ms);
  ASSERT_TRUE(eventually([&] { return recorder_->total() == 3; }));
  settle();
  EXPECT_EQ(recorder_->total(), 3);
  clock_->advance(2s);  // two more tokens
  ASSERT_TRUE(eventually([&] { return recorder_->total() == 5; }));
}

// A clock at its epoch is a time like any other: the bucket is not refilled at every pass.
TEST_F(ReconcileApiTest, ARateLimitHoldsOnAClockStartedAtItsEpoch) {
  clock_ = std::make_shared<ManualClock>(Time{});
  open();
  register_widgets(with_rate_limit(1.0, 2), with_resync_interval(0s));
  auto w = widgets();
  for (int i = 0; i < 5; ++i) w.create(ctx_, {"a", i});
  start();
  settle();
  EXPECT_EQ(recorder_->total(), 2);  // the burst
  clock_->advance(1s);
  settle();
  EXPECT_EQ(recorder_->total(), 3);
}

// At the time line's end no token comes due any more: what is queued there runs, and the
// beehive settles (the controller and the scheduler woke each other at once, for ever).
TEST_F(ReconcileApiTest, ARateLimitAtTheClocksEndLetsTheQueueRunAndSettles) {
  register_widgets(with_rate_limit(1.0, 1), with_resync_interval(0s));
  auto w = widgets();
  for (int i = 0; i < 3; ++i) w.create(ctx_, {"a", i});
  start();
  settle();
  EXPECT_EQ(recorder_->total(), 1);  // the burst
  clock_->advance(std::chrono::milliseconds::max());
  settle();  // throws deadline_exceeded if it never settles
  EXPECT_EQ(recorder_->total(), 3);
}

// A rate of one pass per ages: the wait for the next token lies past the clock's range,
// and converting it overflowed into an arbitrary time (the limit could be bypassed or
// the queue spun). The next token is simply never due.
TEST_F(ReconcileApiTest, ARateOfOnePassPerAgesNeverGivesASecondPass) {
  register_widgets(with_rate_limit(1e-300, 1), with_resync_interval(0s));
  auto w = widgets();
  for (int i = 0; i < 3; ++i) w.create(ctx_, {"a", i});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->total() == 1; }));  // the burst
  settle();
  clock_->advance(24h * 365 * 100);
  settle();
  EXPECT_EQ(recorder_->total(), 1);
}

// -- 4. with_owns, with_watches -------------------------------------------------------------

TEST_F(ReconcileApiTest, AnyChangeOfAnOwnedObjectReconcilesItsOwner) {
  std::atomic<int> owned_seen{-1};  // children the owner's last pass saw
  auto stop_first = stop_before_locals();
  recorder_->set_body([&](auto& ctx, auto& cc, auto& o) {
    if (o.spec.color == "owner") owned_seen = static_cast<int>(cc.list_owned(ctx, o.id).size());
    return Result{};
  });
  register_widgets(with_owns(gadget_kind), with_resync_interval(0s));
  auto gadget_status = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [](auto&, auto&, auto&) { return Result{}; }, with_resync_interval(0s));
  start();
  auto w = widgets();
  Gadgets g(*bh_, gadget_kind);
  auto owner = w.create(ctx_, {"owner", 1});
  auto other = w.create(ctx_, {"other", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 1; }));
  auto child = g.create(ctx_, {"child", 1}, with_owner(owner.id), with_finalizers({"f"}));
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 2; }));  // created
  g.update(ctx_, child.id, {"child", 2});
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 3; }));  // spec
  gadget_status.update_status(ctx_, child.id, 2, WidgetStatus{true});
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 4; }));  // status
  gadget_status.set_condition(ctx_, child.id, {"Ready", ConditionStatus::True});
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 5; }));  // conditions
  g.remove(ctx_, child.id);
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 6; }));  // deletion
  EXPECT_EQ(owned_seen, 1);
  // The GC removes the child once its finalizer goes: the removal wakes the owner too,
  // so a pass of the owner sees it gone.
  gadget_status.remove_finalizer(ctx_, child.id, "f");
  ASSERT_TRUE(eventually([&] { return owned_seen == 0; }));
  settle();
  auto after = recorder_->count(owner.id);
  // An unowned gadget wakes nobody; the other widget never woke.
  g.create(ctx_, {"orphan", 1});
  settle();
  EXPECT_EQ(recorder_->count(owner.id), after);
  EXPECT_EQ(recorder_->count(other.id), 1);
}

TEST_F(ReconcileApiTest, WithoutWithOwnsAChildsChangeDoesNotWakeItsOwner) {
  register_widgets(with_resync_interval(0s));
  start();
  auto owner = widgets().create(ctx_, {"owner", 1});
  ASSERT_TRUE(eventually([&] { return recorder_->count(owner.id) == 1; }));
  Gadgets g(*bh_, gadget_kind);
  auto child = g.create(ctx_, {"child", 1}, with_owner(owner.id));
  g.update(ctx_, child.id, {"child", 2});
  settle();
  EXPECT_EQ(recorder_->count(owner.id), 1);
}

TEST_F(ReconcileApiTest, AWatchedKindsChangeReconcilesTheMappedIdsAndAThrowingMapIsLogged) {
  LogCapture log;
  open(with_logger(log.logger()));
  // A gadget names the widget it concerns by its size; a negative size makes map throw.
  register_widgets(with_resync_interval(0s),
                   with_watches(gadget_kind, [](const ObjectMeta& m) -> std::vector<ObjectID> {
                     if (m.slug && *m.slug == "bad") throw std::runtime_error("map failed");
                     return {m.generation == 1 ? ObjectID(1) : ObjectID(2)};
                   }));
  start();
  auto w = widgets();
  auto first = w.create(ctx_, {"first", 1});
  auto second = w.create(ctx_, {"second", 1});
  ASSERT_EQ(first.id, 1);
  ASSERT_EQ(second.id, 2);
  ASSERT_TRUE(eventually([&] { return recorder_->count(second.id) == 1; }));
  Gadgets g(*bh_, gadget_kind);
  auto gadget = g.create(ctx_, {"x", 1});  // generation 1: widget 1
  ASSERT_TRUE(eventually([&] { return recorder_->count(first.id) == 2; }));
  g.update(ctx_, gadget.id, {"x", 2});  // generation 2: widget 2, and widget 1 it left
  ASSERT_TRUE(eventually(
      [&] { return recorder_->count(second.id) == 2 && recorder_->count(first.id) == 3; }));
  g.create(ctx_, {"x", 3}, with_slug("bad"));
  ASSERT_TRUE(eventually([&] { return log.contains("map failed"); }));
  g.update(ctx_, gadget.id, {"x", 3});  // still served after the throw
  ASSERT_TRUE(eventually([&] { return recorder_->count(second.id) == 3; }));
  EXPECT_EQ(recorder_->count(first.id), 3);
}

// A watched object that moves from one id to another wakes both: the one it left may have
// to notice (controller-runtime maps the old object and the new). Right after start too:
// what it mapped to is learnt from a listing then.
TEST_F(ReconcileApiTest, AWatchedObjectThatMovesToAnotherIdWakesTheOneItLeftToo) {
  auto stop_first = stop_before_locals();
  register_widgets(with_resync_interval(0s),
                   with_watches(gadget_kind, [](const ObjectMeta& m) -> std::vector<ObjectID> {
                     auto it = m.labels.find("for");
                     if (it == m.labels.end()) return {};
                     return {std::stoll(it->second)};
                   }));
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  Gadgets g(*bh_, gadget_kind);
  auto gadget = g.create(ctx_, {"x", 1}, with_labels({{"for", std::to_string(a.id)}}));
  start();
  settle();
  ASSERT_EQ(recorder_->count(a.id), 1);
  ASSERT_EQ(recorder_->count(b.id), 1);
  g.set_labels(ctx_, gadget.id, {{"for", std::to_string(b.id)}});  // learnt at start
  settle();
  EXPECT_EQ(recorder_->count(a.id), 2);
  EXPECT_EQ(recorder_->count(b.id), 2);
  g.set_labels(ctx_, gadget.id, {{"for", std::to_string(a.id)}});  // learnt from a change
  settle();
  EXPECT_EQ(recorder_->count(a.id), 3);
  EXPECT_EQ(recorder_->count(b.id), 3);
  g.set_labels(ctx_, gadget.id, {});  // for nobody now: the one it left still hears of it
  settle();
  EXPECT_EQ(recorder_->count(a.id), 4);
  EXPECT_EQ(recorder_->count(b.id), 3);
}

// A controller slower than the commits (here: a map it runs that blocks) takes what they
// woke in one batch once it catches up, each object once, rather than a message per
// commit: what waits for it is bounded by the objects written, not by the write rate.
TEST_F(ReconcileApiTest, AControllerSlowerThanTheCommitsTakesThemFoldedPerObject) {
  Gate gate;
  std::atomic<int> maps{0};
  auto stop_first = stop_before_locals();
  register_widgets(with_resync_interval(0s),
                   with_watches(gadget_kind, [&](const ObjectMeta&) -> std::vector<ObjectID> {
                     if (++maps == 1) gate.pass();  // the first holds the controller
                     return {ObjectID(1)};
                   }));
  start();
  auto w = widgets().create(ctx_, {"watcher", 1});
  ASSERT_EQ(w.id, 1);
  ASSERT_TRUE(eventually([&] { return recorder_->count(w.id) == 1; }));
  Gadgets g(*bh_, gadget_kind);
  auto gadget = g.create(ctx_, {"x", 0});
  gate.wait_entered();
  for (int i = 1; i <= 300; ++i) g.update(ctx_, gadget.id, {"x", i});
  gate.open();
  settle();
  // The held one, then the 300 updates folded into one change (a take racing the
  // updates may split them once).
  EXPECT_LE(maps.load(), 3);
  EXPECT_GE(recorder_->count(w.id), 2);
}

// -- 5. now, log --------------------------------------------------------------------------

TEST_F(ReconcileApiTest, APassReadsTheBeehivesClockAndLogsWithItsKindAndId) {
  LogCapture log;
  open(with_logger(log.logger()));
  std::atomic<bool> clock_matches{false};
  auto stop_first = stop_before_locals();
  recorder_->set_body([&](auto& ctx, auto& cc, auto&) {
    clock_matches = cc.now() == clock_->now();
    cc.log(ctx, LogLevel::info, "looked at it", {{"answer", "42"}});
    return Result{};
  });
  auto cc = register_widgets();
  start();
  auto o = widgets().create(ctx_, {"a", 1});
  auto id = std::to_string(o.id);
  ASSERT_TRUE(eventually(
      [&] { return log.contains("looked at it answer=42 kind=Widget.acme.com id=" + id); }));
  EXPECT_TRUE(clock_matches);
  clock_->advance(5s);
  EXPECT_EQ(cc.now(), clock_->now());
  // Outside a pass there is no object to name.
  cc.log(ctx_, LogLevel::info, "from the application");
  EXPECT_TRUE(log.contains("from the application kind=Widget.acme.com"));
  EXPECT_FALSE(log.contains("from the application kind=Widget.acme.com id="));
  // At debug, each pass is logged.
  EXPECT_TRUE(eventually(
      [&] { return log.contains("reconciled generation=1 result=success duration_ms="); }));
  EXPECT_TRUE(log.contains("kind=Widget.acme.com id=" + id));
}

// -- 6. add_finalizer, conditions, create_or_update -----------------------------------------

TEST_F(ReconcileApiTest, AddFinalizerIsIdempotentAndRefusedOnceDeletionIsRequested) {
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  cc.add_finalizer(ctx_, o.id, "acme.com/cleanup");
  auto once = w.get(ctx_, o.id);
  EXPECT_EQ(once.finalizers, std::vector<std::string>{"acme.com/cleanup"});
  EXPECT_GT(once.resource_version, o.resource_version);
  cc.add_finalizer(ctx_, o.id, "acme.com/cleanup");
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, once.resource_version);  // nothing written
  cc.within(ctx_, [&](const Context& tx) { cc.add_finalizer(tx, o.id, "acme.com/cleanup"); });
  EXPECT_EQ(w.get(ctx_, o.id).finalizers.size(), 1u);
  EXPECT_ERRC(cc.add_finalizer(ctx_, o.id, ""), errc::invalid_argument);
  // Nor at create, on any path: a nameless finalizer could never be told apart.
  EXPECT_ERRC(w.create(ctx_, {"b", 1}, with_slug("b"), with_finalizers({""})),
              errc::invalid_argument);
  EXPECT_ERRC(w.get_or_create(ctx_, "b", {"b", 1}, with_finalizers({"f", ""})),
              errc::invalid_argument);
  EXPECT_ERRC(w.get_by_slug(ctx_, "b"), errc::not_found);
  EXPECT_ERRC(cc.add_finalizer(ctx_, 999, "f"), errc::not_found);
  w.remove(ctx_, o.id);
  EXPECT_ERRC(cc.add_finalizer(ctx_, o.id, "acme.com/other"), errc::invalid_argument);
  // The one it holds is a no-op still, through the writer too (inside a block): a
  // reconcile that ensures its finalizer at every pass reaches its teardown.
  auto deleting = w.get(ctx_, o.id);
  cc.add_finalizer(ctx_, o.id, "acme.com/cleanup");
  cc.within(ctx_, [&](const Context& tx) { cc.add_finalizer(tx, o.id, "acme.com/cleanup"); });
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, deleting.resource_version);
  EXPECT_EQ(w.get(ctx_, o.id).finalizers, std::vector<std::string>{"acme.com/cleanup"});
}

TEST_F(ReconcileApiTest, ConditionsCarryTheirObservedGenerationAndTransitionTime) {
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto t0 = clock_->now();
  Condition ready{"Ready", ConditionStatus::False, "Starting", "", false, 1};
  cc.set_condition(ctx_, o.id, ready);
  auto read = w.get(ctx_, o.id);
  const Condition* c = find_condition(read, "Ready");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->observed_generation, 1);
  EXPECT_EQ(c->last_transition_at, from_millis(to_millis(t0)));
  EXPECT_FALSE(is_condition_true(read, "Ready"));
  EXPECT_EQ(find_condition(read, "Missing"), nullptr);
  EXPECT_FALSE(is_condition_true(read, "Missing"));
  // The same observation writes nothing, whatever transition time the caller holds.
  cc.set_condition(ctx_, o.id, *c);
  cc.set_condition(ctx_, o.id, ready);
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, read.resource_version);
  // A new reason or generation is written; the transition time stays until the status moves.
  clock_->advance(5s);
  w.update(ctx_, o.id, {"a", 2});  // a condition observes a generation the object has had
  ready.reason = "StillStarting";
  ready.observed_generation = 2;
  cc.set_condition(ctx_, o.id, ready);
  read = w.get(ctx_, o.id);
  EXPECT_EQ(find_condition(read, "Ready")->observed_generation, 2);
  EXPECT_EQ(find_condition(read, "Ready")->last_transition_at, from_millis(to_millis(t0)));
  clock_->advance(5s);
  ready.status = ConditionStatus::True;
  cc.set_condition(ctx_, o.id, ready);
  read = w.get(ctx_, o.id);
  EXPECT_TRUE(is_condition_true(read, "Ready"));
  EXPECT_EQ(find_condition(read, "Ready")->last_transition_at, from_millis(to_millis(t0 + 10s)));
  // Every read path returns them: list and watch too.
  auto listed = w.list(ctx_);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(find_condition(listed[0], "Ready")->last_transition_at,
            from_millis(to_millis(t0 + 10s)));
  auto s = w.watch(ctx_, o.id);
  auto first = s.next_for(10s);
  ASSERT_TRUE(first);
  EXPECT_EQ(find_condition(first->object, "Ready")->observed_generation, 2);
}

TEST_F(ReconcileApiTest, AVersionFiveDatabaseGainsConditionGenerations) {
  REQUIRE_SQLITE("downgrades a SQLite file to schema 5");
  auto path = dir_.file("beehive.db");
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  close();
  {  // turn the file back into a version-5 database holding a condition
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    downgrade_schema(db, 5);
    db.exec(
        "INSERT INTO conditions (object_id, type, status, reason, message, "
        "last_transition_at) VALUES (" +
        std::to_string(o.id) + ", 'Ready', 'True', 'Up', '', 1234)");
    db.exec("UPDATE objects SET conditions_count = 1");
  }
  open();
  auto read = widgets().get(ctx_, o.id);
  const Condition* c = find_condition(read, "Ready");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->observed_generation, 0);
  EXPECT_EQ(c->last_transition_at, from_millis(1234));
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT version FROM beehive_schema").getInt(), 10);
}

TEST_F(ReconcileApiTest, CreateOrUpdateAppliesCreateOptionsOnlyWhenItCreates) {
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 1});
  std::atomic<int> created{0};
  auto made =
      w.create_or_update(ctx_, "child", {"a", 1}, with_owner(owner.id), with_finalizers({"f"}),
                         with_on_create([&](const Context&) { ++created; }));
  EXPECT_EQ(made.finalizers, std::vector<std::string>{"f"});
  EXPECT_EQ(w.get_owner(ctx_, made.id)->id, owner.id);
  EXPECT_EQ(created, 1);
  auto other = w.create(ctx_, {"other", 1});
  auto updated =
      w.create_or_update(ctx_, "child", {"a", 2}, with_owner(other.id), with_finalizers({"g"}),
                         with_on_create([&](const Context&) { ++created; }));
  EXPECT_EQ(updated.id, made.id);
  EXPECT_EQ(updated.spec.size, 2);
  EXPECT_EQ(updated.finalizers, std::vector<std::string>{"f"});
  EXPECT_EQ(w.get_owner(ctx_, made.id)->id, owner.id);
  EXPECT_EQ(created, 1);
  EXPECT_ERRC(w.create_or_update(ctx_, "child", {"a", 3}, with_slug("x")),
              errc::conflicting_option);
  EXPECT_ERRC(w.create_or_update(ctx_, "new", {"a", 1}, with_owner(999)), errc::not_found);
  EXPECT_ERRC(w.get_by_slug(ctx_, "new"), errc::not_found);
}

}  // namespace
}  // namespace beehive::test
