// Event log, schedule gauge and manual requeue.

#include <future>
#include <limits>
#include <mutex>

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"
#include "store/event_sweep.hpp"  // private: the sweep's page size
#include "support/stepped_clock.hpp"
#include "writer_state.hpp"

namespace beehive::test {
namespace {

class EventsTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  }
  void emit(ObjectID id, const std::string& cat, EventType t, const std::string& reason,
            const std::string& msg = "", nlohmann::json detail = nullptr) {
    cc_->record_event(ctx_, id, EventSpec{cat, t, reason, msg, std::move(detail)});
  }
  /// Opens the beehive again on a clock that steps back, with the retention given.
  std::shared_ptr<SteppedClock> open_stepped(int per_object, std::chrono::milliseconds max_age) {
    auto clock = std::make_shared<SteppedClock>();
    open(with_clock(clock), with_event_retention(per_object, max_age));
    cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
    return clock;
  }
  /// An object whose "conn" runs are ProbeFailed, then (the clock stepped an hour back)
  /// Connected: the current run, with the earlier last time.
  ObjectID failed_then_connected_an_hour_earlier(SteppedClock& clock) {
    auto o = widgets().create(ctx_, {"conn", 1});
    emit(o.id, "conn", EventType::Warning, "ProbeFailed");
    clock.step(-std::chrono::hours(1));
    emit(o.id, "conn", EventType::Normal, "Connected");
    return o.id;
  }
  std::unique_ptr<ControllerClient<WidgetStatus>> cc_;
};

struct Probe {
  std::string endpoint;
  int latency_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Probe, endpoint, latency_ms)

/// A detail whose own conversion refuses what it does not like.
struct Positive {
  int value = 0;
};
void from_json(const nlohmann::json& j, Positive& p) {
  p.value = j.at("value").get<int>();
  if (p.value <= 0) throw std::domain_error("not positive");
}

// A run's count saturates at the largest int rather than overflowing: on PostgreSQL the
// column would refuse the next extension, failing every event of the category, and the
// count read back would wrap on SQLite.
TEST_F(EventsTest, ARunsCountStaysAtTheLargestIntAndTheRunGoesOn) {
  auto o = widgets().create(ctx_, {"busy", 1});
  emit(o.id, "loop", EventType::Normal, "Tick", "first");
  write_test_store(dir_.file("beehive.db"), "UPDATE events SET count = 2147483646");
  auto watch = widgets().watch_events(ctx_, o.id);  // the runs as the writer publishes them
  for (int i = 0; i < 3; ++i) {
    clock_->advance(1s);
    emit(o.id, "loop", EventType::Normal, "Tick", "again");
    EXPECT_EQ(widgets().get_latest_event(ctx_, o.id, "loop")->count,
              std::numeric_limits<int>::max())
        << i;
  }
  auto runs = widgets().list_events(ctx_, o.id);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].count, std::numeric_limits<int>::max());
  EXPECT_EQ(runs[0].message, "again");
  EXPECT_EQ(runs[0].last_at, clock_->now());
  std::optional<Event> published;
  while (auto e = watch.next_for(5s))
    if (e->last_at == clock_->now()) {
      published = *e;
      break;
    }
  ASSERT_TRUE(published.has_value());
  EXPECT_EQ(published->count, std::numeric_limits<int>::max());
}

TEST_F(EventsTest, TheConnectionHealthTimeline) {
  auto w = widgets();
  auto o = w.create(ctx_, {"conn", 1});
  auto t0 = clock_->now();
  for (int i = 0; i < 7; ++i, clock_->advance(10s))
    emit(o.id, "connection", EventType::Normal, "Connected");
  for (int i = 0; i < 18; ++i, clock_->advance(10s))
    emit(o.id, "connection", EventType::Warning, "ProbeFailed", "i/o timeout " + std::to_string(i),
         Probe{"10.0.0.1:443", 5000 + i});
  for (int i = 0; i < 4; ++i, clock_->advance(10s))
    emit(o.id, "connection", EventType::Normal, "Connected");
  emit(o.id, "sync", EventType::Normal, "Synced");  // another timeline: breaks nothing
  auto runs = w.list_events(ctx_, o.id, with_event_category("connection"));
  ASSERT_EQ(runs.size(), 3u);  // newest first: Connected x4, ProbeFailed x18, Connected x7
  EXPECT_EQ(runs[0].reason, "Connected");
  EXPECT_EQ(runs[0].count, 4);
  EXPECT_EQ(runs[1].reason, "ProbeFailed");
  EXPECT_EQ(runs[1].type, EventType::Warning);
  EXPECT_EQ(runs[1].count, 18);
  EXPECT_EQ(runs[1].message, "i/o timeout 17");  // sampled from the latest
  EXPECT_EQ(event_detail<Probe>(runs[1]).latency_ms, 5017);
  EXPECT_EQ(runs[1].first_at, t0 + 70s);
  EXPECT_EQ(runs[1].last_at, t0 + 70s + 170s);
  EXPECT_EQ(runs[2].count, 7);
  EXPECT_EQ(runs[2].first_at, t0);
  EXPECT_ERRC(event_detail<Probe>(runs[0]), errc::decode);  // no detail
  auto latest = w.get_latest_event(ctx_, o.id, "connection");
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->id, runs[0].id);
  EXPECT_FALSE(w.get_latest_event(ctx_, o.id, "never").has_value());
}

// A limit asks for at most that many runs: 0 for none (a watch then starts with no
// snapshot, and hears what comes next). A negative one is refused on every backend
// (SQLite read it as no limit, PostgreSQL failed with errc::store).
TEST_F(EventsTest, AnEventLimitOfZeroGivesNoRunsAndANegativeOneIsAnInvalidArgument) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "", EventType::Normal, "Old");
  EXPECT_TRUE(w.list_events(ctx_, o.id, with_event_limit(0)).empty());
  auto live = w.watch_events(ctx_, o.id, with_event_limit(0));
  emit(o.id, "", EventType::Warning, "New");
  auto e = live.next_for(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->reason, "New");
  for (int n : {-1, std::numeric_limits<int>::min()}) {
    EXPECT_ERRC_WITH(w.list_events(ctx_, o.id, with_event_limit(n)), errc::invalid_argument,
                     "negative");
    EXPECT_ERRC_WITH(w.watch_events(ctx_, o.id, with_event_limit(n)), errc::invalid_argument,
                     "negative");
  }
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_limit(std::numeric_limits<int>::max())).size(),
            2u);
}

TEST_F(EventsTest, CategoriesAreIndependentTimelines) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "A", EventType::Normal, "X", "first");
  clock_->advance(1s);
  emit(o.id, "B", EventType::Normal, "Y");  // another category: A's run goes on
  clock_->advance(1s);
  emit(o.id, "A", EventType::Normal, "X", "second");
  auto a = w.list_events(ctx_, o.id, with_event_category("A"));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].reason, "X");
  EXPECT_EQ(a[0].count, 2);
  EXPECT_EQ(a[0].message, "second");
  EXPECT_EQ(a[0].last_at - a[0].first_at, 2s);
  auto b = w.list_events(ctx_, o.id, with_event_category("B"));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].count, 1);
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 2u);
  // The default category "" is a timeline of its own too.
  emit(o.id, "", EventType::Normal, "X");
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_category("A"))[0].count, 2);
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_category(""))[0].count, 1);
}

TEST_F(EventsTest, ListEventsIsNewestFirstByLastAt) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "old", EventType::Normal, "Tick");  // the older run: the smaller id
  clock_->advance(1s);
  emit(o.id, "new", EventType::Normal, "Tock");
  clock_->advance(1s);
  auto runs = w.list_events(ctx_, o.id);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].category, "new");
  emit(o.id, "old", EventType::Normal, "Tick");  // extended: now the most recent
  runs = w.list_events(ctx_, o.id);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].category, "old");
  EXPECT_EQ(runs[0].count, 2);
  EXPECT_LT(runs[0].id, runs[1].id);  // not by id
  EXPECT_GT(runs[0].last_at, runs[1].last_at);
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_limit(1))[0].category, "old");
  EXPECT_EQ(w.get_latest_event(ctx_, o.id, "old")->count, 2);
}

TEST_F(EventsTest, EventDetailOfAnotherShapeIsDecodeAndANullDetailClearsIt) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "", EventType::Warning, "ProbeFailed", "", Probe{"10.0.0.1:443", 12});
  EXPECT_EQ(event_detail<Probe>(*w.get_latest_event(ctx_, o.id, "")).latency_ms, 12);
  emit(o.id, "other", EventType::Normal, "Odd", "", nlohmann::json{{"endpoint", 5}});
  auto odd = *w.get_latest_event(ctx_, o.id, "other");
  EXPECT_ERRC(event_detail<Probe>(odd), errc::decode);  // endpoint is not a string
  EXPECT_ERRC(event_detail<std::vector<int>>(odd), errc::decode);
  emit(o.id, "negative", EventType::Normal, "Odd", "", nlohmann::json{{"value", -1}});
  auto negative = *w.get_latest_event(ctx_, o.id, "negative");
  EXPECT_ERRC(event_detail<Positive>(negative), errc::decode);  // its own exception
  EXPECT_EQ(event_detail<nlohmann::json>(odd)["endpoint"], 5);
  emit(o.id, "", EventType::Warning, "ProbeFailed", "no detail this time");  // extends the run
  auto run = *w.get_latest_event(ctx_, o.id, "");
  EXPECT_EQ(run.count, 2);
  EXPECT_EQ(run.message, "no detail this time");
  EXPECT_TRUE(run.detail.is_null());  // follows the latest occurrence
  EXPECT_ERRC_WITH(event_detail<Probe>(run), errc::decode, "no detail");
}

TEST_F(EventsTest, FiltersAndLimit) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "a", EventType::Normal, "R1");
  clock_->advance(1s);
  auto mid = clock_->now();
  emit(o.id, "a", EventType::Warning, "R2");
  clock_->advance(1s);
  emit(o.id, "b", EventType::Normal, "R1");
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 3u);
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_type(EventType::Warning)).size(), 1u);
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_reason("R1")).size(), 2u);
  EXPECT_EQ(w.list_events(ctx_, o.id, with_events_since(mid)).size(), 2u);
  auto one = w.list_events(ctx_, o.id, with_event_limit(1));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].category, "b");
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_category("a"), with_event_reason("R1")).size(),
            1u);
}

TEST_F(EventsTest, EventsDoNotMoveTheObjectOrWakeWatchesAndAreKindFolded) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto s = w.watch(ctx_, o.id);
  ASSERT_TRUE(s.next_for(5s).has_value());
  emit(o.id, "", EventType::Normal, "Seen");
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, o.resource_version);
  EXPECT_FALSE(s.next_for(30ms).has_value());
  auto g = Widgets(*bh_, gadget_kind).create(ctx_, {"g", 1});
  EXPECT_ERRC(emit(g.id, "", EventType::Normal, "X"), errc::wrong_kind);
  EXPECT_ERRC(emit(999999, "", EventType::Normal, "X"), errc::not_found);
  EXPECT_ERRC(emit(o.id, "", EventType::Normal, "bad\xff"), errc::invalid_argument);
}

// Event runs are not in the change log: a process's event watch still sees the runs
// another process records and extends (on PostgreSQL, a standby's those of the leader's
// controllers), and its own runs once each.
TEST_F(EventsTest, EventRunsOfAnotherProcessReachEventWatches) {
  Widgets mine(*bh_, widget_kind);
  auto a = mine.create(ctx_, {"a", 1});
  auto events = mine.watch_events(ctx_, a.id);
  Beehive other(open_test_store(dir_.file("beehive.db")));
  auto theirs = register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  const EventSpec seen{"probe", EventType::Normal, "Seen", "by the other", {}};
  theirs.record_event(ctx_, a.id, seen);
  auto first = events.next_for(10s);
  ASSERT_TRUE(first) << "the other process's run never reached the watch";
  EXPECT_EQ(first->reason, "Seen");
  EXPECT_EQ(first->count, 1);
  theirs.record_event(ctx_, a.id, seen);  // extends the run
  auto extended = events.next_for(10s);
  ASSERT_TRUE(extended);
  EXPECT_EQ(extended->id, first->id);
  EXPECT_EQ(extended->count, 2);
  // A run of this process's own, then one more of the other's: each arrives once.
  emit(a.id, "probe", EventType::Normal, "Mine");
  theirs.record_event(ctx_, a.id, {"probe", EventType::Normal, "Last", "", {}});
  std::vector<std::string> reasons;
  while (reasons.empty() || reasons.back() != "Last") {
    auto e = events.next_for(10s);
    if (!e) break;
    reasons.push_back(e->reason);
  }
  EXPECT_EQ(reasons, (std::vector<std::string>{"Mine", "Last"}));
}

// Another process's run committed just before one of this process's reaches the watch
// first: one chronological stream, whichever process wrote each run (this process's
// commit found the other's before its poll did, and used to publish its own run first).
TEST_F(EventsTest, AnotherProcesssEarlierRunReachesTheWatchBeforeALaterOneOfOurs) {
  Widgets mine(*bh_, widget_kind);
  Beehive other(open_test_store(dir_.file("beehive.db")));
  auto theirs = register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind,
      [](const Context&, ControllerClient<WidgetStatus>&, const Object<WidgetSpec, WidgetStatus>&) {
        return Result{};
      });
  for (int round = 0; round < 10; ++round) {
    auto a = mine.create(ctx_, {"a", round});
    auto events = mine.watch_events(ctx_, a.id);
    theirs.record_event(ctx_, a.id, {"probe", EventType::Warning, "ProbeFailed", "", {}});
    emit(a.id, "probe", EventType::Normal, "Connected");  // at once: before the poll
    std::vector<std::string> got;
    while (got.size() < 2) {
      auto e = events.next_for(10s);
      if (!e) break;
      got.push_back(e->reason);
    }
    ASSERT_EQ(got, (std::vector<std::string>{"ProbeFailed", "Connected"})) << "round " << round;
  }
}

TEST_F(EventsTest, RecordEventComposesInsideWithin) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             cc_->record_event(tx, o.id, {"", EventType::Normal, "Gone"});
                             cc_->set_condition(tx, o.id, {"Ready", ConditionStatus::False});
                             throw std::runtime_error("rollback");
                           }),
               std::runtime_error);
  EXPECT_TRUE(w.list_events(ctx_, o.id).empty());
  cc_->within(ctx_, [&](const Context& tx) {
    cc_->record_event(tx, o.id, {"", EventType::Normal, "Kept"});
    cc_->set_condition(tx, o.id, {"Ready", ConditionStatus::True});
  });
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 1u);
  EXPECT_EQ(w.get(ctx_, o.id, load_events()).list_events().size(), 1u);
}

TEST_F(EventsTest, WatchEventsConflatesPerRun) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "c", EventType::Normal, "Old");
  auto s = w.watch_events(ctx_, o.id, with_event_category("c"));
  auto first = s.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->reason, "Old");
  for (int i = 0; i < 50; ++i) emit(o.id, "c", EventType::Normal, "Tick");
  emit(o.id, "other", EventType::Normal, "Filtered");
  ASSERT_TRUE(eventually([&] { return w.get_latest_event(ctx_, o.id, "c")->count == 50; }));
  settle();
  auto tick = s.next_for(5s);
  ASSERT_TRUE(tick.has_value());
  EXPECT_EQ(tick->reason, "Tick");
  EXPECT_EQ(tick->count, 50);  // one delivery with the latest count
  EXPECT_FALSE(s.next_for(30ms).has_value());
  close();
  EXPECT_FALSE(s.next_for(1s).has_value());
  EXPECT_EQ(s.error(), errc::stopped);
}

// Runs are stored to the millisecond: a watch and a list from a `since` inside the
// millisecond a run was recorded in agree that the run passes.
TEST_F(EventsTest, ARunRecordedInTheMillisecondOfSinceIsWatchedAsItIsListed) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  clock_->set(clock_->now() + 1h + std::chrono::microseconds(500));
  auto since = clock_->now();
  auto watched = w.watch_events(ctx_, o.id, with_events_since(since));
  emit(o.id, "c", EventType::Normal, "Now");
  ASSERT_EQ(w.list_events(ctx_, o.id, with_events_since(since)).size(), 1u);
  auto e = watched.next_for(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->reason, "Now");
}

TEST_F(EventsTest, WatchEventsFiltersLiveRuns) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto other = w.create(ctx_, {"other", 1});
  auto t0 = clock_->now();
  auto by_type = w.watch_events(ctx_, o.id, with_event_type(EventType::Warning));
  auto by_reason = w.watch_events(ctx_, o.id, with_event_reason("Wanted"));
  auto by_since = w.watch_events(ctx_, o.id, with_events_since(t0 + 1h));
  emit(other.id, "c", EventType::Warning, "Wanted");  // another object: never delivered
  emit(o.id, "c", EventType::Normal, "Other");
  emit(o.id, "c", EventType::Warning, "Wanted");
  emit(o.id, "d", EventType::Warning, "Unwanted");
  auto t = by_type.next_for(5s);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->reason, "Wanted");  // the first delivery: nothing before it passed
  EXPECT_EQ(t->object_id, o.id);
  t = by_type.next_for(5s);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->reason, "Unwanted");
  auto r = by_reason.next_for(5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, "Wanted");
  EXPECT_EQ(r->type, EventType::Warning);
  EXPECT_EQ(r->object_id, o.id);
  clock_->advance(2h);
  emit(o.id, "e", EventType::Normal, "Late");
  auto late = by_since.next_for(5s);
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->reason, "Late");  // the runs before t0 + 1h never came
  EXPECT_FALSE(by_type.next_for(30ms).has_value());
  EXPECT_FALSE(by_reason.next_for(30ms).has_value());
  EXPECT_FALSE(by_since.next_for(30ms).has_value());
}

TEST_F(EventsTest, WatchEventsSnapshotHoldsTheRunsListEventsReturnsOldestFirst) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  for (int i = 0; i < 5; ++i, clock_->advance(1s))
    emit(o.id, "c" + std::to_string(i), EventType::Normal, "R" + std::to_string(i));
  auto all = w.watch_events(ctx_, o.id);
  std::vector<Event> snapshot;
  for (int i = 0; i < 5; ++i) {
    auto e = all.next_for(5s);
    ASSERT_TRUE(e.has_value()) << i;
    snapshot.push_back(*e);
  }
  EXPECT_FALSE(all.next_for(30ms).has_value());
  auto listed = w.list_events(ctx_, o.id);
  ASSERT_EQ(listed.size(), 5u);
  // list_events is newest first; the snapshot is oldest first, so that it and the live
  // runs after it read as one chronological stream.
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(snapshot[i].id, listed[4 - i].id) << i;
  auto capped = w.watch_events(ctx_, o.id, with_event_limit(2));
  auto c1 = capped.next_for(5s), c2 = capped.next_for(5s);
  ASSERT_TRUE(c1 && c2);
  EXPECT_EQ(c1->reason, "R3");  // the newest two, the older first
  EXPECT_EQ(c2->reason, "R4");
  EXPECT_FALSE(capped.next_for(30ms).has_value());  // the cap holds the snapshot only
  // An extension of a run the snapshot held arrives as that run, updated.
  emit(o.id, "c1", EventType::Normal, "R1", "again");
  auto ext = all.next_for(5s);
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->id, listed[3].id);
  EXPECT_EQ(ext->count, 2);
  EXPECT_EQ(ext->message, "again");
  EXPECT_EQ(ext->first_at, listed[3].first_at);
  EXPECT_GT(ext->last_at, listed[3].last_at);
  auto live = capped.next_for(5s);  // live runs pass whatever the cap
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->id, listed[3].id);
  EXPECT_EQ(live->count, 2);
}

TEST_F(EventsTest, RunsAggregateByIdentityWhenTheClockStepsBack) {
  auto clock = std::make_shared<SteppedClock>();
  open(with_clock(clock));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto o = w.create(ctx_, {"conn", 1});
  auto t0 = clock->now();
  emit(o.id, "conn", EventType::Normal, "Connected");
  clock->step(1min);
  emit(o.id, "conn", EventType::Warning, "ProbeFailed");  // the current run, last at t0 + 1min
  clock->step(-1h);                                       // now behind every run's last_at
  auto live = w.watch_events(ctx_, o.id, with_event_reason("ProbeFailed"));
  ASSERT_TRUE(live.next_for(5s).has_value());  // the snapshot
  for (int i = 0; i < 1000; ++i)
    ASSERT_NO_THROW(emit(o.id, "conn", EventType::Warning, "ProbeFailed", std::to_string(i))) << i;
  auto runs = w.list_events(ctx_, o.id, with_event_category("conn"));
  ASSERT_EQ(runs.size(), 2u);  // the 1000 extended the current run: no new run
  // Copies: `runs` is read again below.
  auto failed = runs[0].reason == "ProbeFailed" ? runs[0] : runs[1];
  auto connected = runs[0].reason == "ProbeFailed" ? runs[1] : runs[0];
  EXPECT_EQ(failed.count, 1001);
  EXPECT_EQ(failed.first_at, t0 + 1min);
  EXPECT_EQ(failed.last_at, t0 + 1min - 1h);  // the clock's time, as it was told
  EXPECT_EQ(connected.count, 1);
  EXPECT_EQ(w.get_latest_event(ctx_, o.id, "conn")->id, failed.id);  // the current run
  cc_->within(ctx_, [&](const Context& tx) {  // read by the writer, inside the transaction
    EXPECT_EQ(w.get_latest_event(tx, o.id, "conn")->id, failed.id);
  });
  // The run a watch is sent is the stored run.
  std::optional<Event> seen;
  ASSERT_TRUE(eventually([&] {
    while (auto e = live.next_for(1ms)) seen = e;
    return seen && seen->count == 1001;
  }));
  EXPECT_EQ(seen->id, failed.id);
  EXPECT_EQ(seen->message, "999");
  EXPECT_EQ(seen->first_at, failed.first_at);
  EXPECT_EQ(seen->last_at, failed.last_at);
  // Forward again, the documented rule holds: the same (type, reason) extends the
  // current run, another starts a new one, and a value that recurs after another starts
  // a fresh run too.
  clock->step(2h);
  emit(o.id, "conn", EventType::Warning, "ProbeFailed");
  emit(o.id, "conn", EventType::Normal, "Connected");
  emit(o.id, "conn", EventType::Normal, "Connected");
  runs = w.list_events(ctx_, o.id, with_event_category("conn"));
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].reason, "Connected");
  EXPECT_EQ(runs[0].count, 2);
  EXPECT_NE(runs[0].id, connected.id);
  EXPECT_EQ(runs[1].id, failed.id);
  EXPECT_EQ(runs[1].count, 1002);
  EXPECT_EQ(runs[1].last_at, t0 + 1min + 1h);
}

TEST_F(EventsTest, WatchEventsEndsOnCloseOnItsContextAndAfterStop) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "", EventType::Normal, "X");
  auto closed = w.watch_events(ctx_, o.id);
  ASSERT_TRUE(closed.next_for(5s).has_value());
  closed.close();
  emit(o.id, "", EventType::Normal, "X");
  EXPECT_FALSE(closed.next_for(1s).has_value());
  EXPECT_TRUE(closed.done());
  EXPECT_FALSE(closed.error());  // its own ending: no error
  auto [cctx, cancel] = ctx_.with_cancel();
  auto cancelled = w.watch_events(cctx, o.id);
  ASSERT_TRUE(cancelled.next_for(5s).has_value());
  std::thread canceller([&, cancel = cancel] {
    std::this_thread::sleep_for(20ms);
    cancel();
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(cancelled.next().has_value());  // blocks without a timeout until cancelled
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  canceller.join();
  EXPECT_TRUE(cancelled.done());
  EXPECT_FALSE(cancelled.error());
  start();
  stop_(ctx_);
  EXPECT_ERRC(w.watch_events(ctx_, o.id), errc::stopped);
}

/// Event watches the hub holds.
std::size_t event_watches(Beehive& bh) {
  auto hub = bh.watch_hub();
  caf::scoped_actor self{hub->home_system()};
  std::size_t n = 0;
  self->request(hub, caf::infinite, inspect_atom::value)
      .receive([&](const watch_hub_state& st) { n = st.event_watches; },
               [](caf::error&) { FAIL(); });
  return n;
}

// An object's events go with it, and no run can come after (ids are never reused): a
// watch of them delivers what is pending, then ends with not_found, rather than be held
// for ever. So does one still opening as the object goes.
TEST_F(EventsTest, AnEventWatchEndsWithNotFoundOnceItsObjectIsRemoved) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto other = w.create(ctx_, {"b", 1});
  emit(o.id, "", EventType::Normal, "Before");
  auto s = w.watch_events(ctx_, o.id);
  auto stays = w.watch_events(ctx_, other.id);
  ASSERT_TRUE(s.next_for(5s).has_value());
  emit(o.id, "", EventType::Warning, "Last");
  start();
  w.remove(ctx_, o.id);  // no finalizer: collected at once
  settle();
  std::vector<std::string> reasons;
  while (auto e = s.next_for(5s)) reasons.push_back(e->reason);
  EXPECT_EQ(reasons, std::vector<std::string>{"Last"});
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.error(), make_error_code(errc::not_found));
  EXPECT_EQ(event_watches(*bh_), 1u);  // the other object's
  EXPECT_FALSE(stays.done());
}

/// Runs waiting in the event watches' streams, not yet read.
std::size_t unread_runs(Beehive& bh) {
  auto hub = bh.watch_hub();
  caf::scoped_actor self{hub->home_system()};
  std::size_t n = 0;
  self->request(hub, caf::infinite, inspect_atom::value)
      .receive([&](const watch_hub_state& st) { n = st.pending; }, [](caf::error&) { FAIL(); });
  return n;
}

// An event watch whose reader falls behind holds what the store keeps, not every run
// ever started: with the kind's retention of 3 runs per category, no more than the 3
// newest runs of a category wait (an older one is trimmed from the store as well).
TEST_F(EventsTest, AnUnreadEventWatchHoldsNoMoreRunsPerCategoryThanTheRetentionKeeps) {
  open();
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(
      register_widgets(with_event_retention(3, 0ms)));
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "flap", EventType::Normal, "Before");
  auto s = w.watch_events(ctx_, o.id);  // not read until the end
  for (int i = 0; i < 20; ++i)
    emit(o.id, "flap", i % 2 ? EventType::Warning : EventType::Normal, "R" + std::to_string(i));
  emit(o.id, "quiet", EventType::Normal, "Q");
  settle();
  EXPECT_EQ(unread_runs(*bh_), 4u);
  std::vector<std::string> reasons;
  while (auto e = s.next_for(30ms)) reasons.push_back(e->reason);
  EXPECT_EQ(reasons, (std::vector<std::string>{"R17", "R18", "R19", "Q"}));
}

// A watch opened before its object exists learns the object's kind when it is created.
TEST_F(EventsTest, AnUnreadEventWatchOpenedBeforeItsObjectIsBoundedToo) {
  open();
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(
      register_widgets(with_event_retention(2, 0ms)));
  auto w = widgets();
  auto first = w.create(ctx_, {"first", 1});
  auto s = w.watch_events(ctx_, first.id + 1);
  auto o = w.create(ctx_, {"a", 1});
  ASSERT_EQ(o.id, first.id + 1);
  for (int i = 0; i < 10; ++i) emit(o.id, "flap", EventType::Normal, "R" + std::to_string(i));
  settle();
  EXPECT_EQ(unread_runs(*bh_), 2u);
  std::vector<std::string> reasons;
  while (auto e = s.next_for(30ms)) reasons.push_back(e->reason);
  EXPECT_EQ(reasons, (std::vector<std::string>{"R8", "R9"}));
}

// The age bound likewise (the Beehive's retention, for every kind): a run older than the
// bound before the newest run of its category started is no longer kept.
TEST_F(EventsTest, AnUnreadEventWatchDropsTheRunsPastTheRetentionsAge) {
  open(with_event_retention(0, 1h));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto s = w.watch_events(ctx_, o.id);
  for (int i = 0; i < 10; ++i) {
    emit(o.id, "flap", EventType::Normal, "R" + std::to_string(i));
    clock_->advance(40min);
  }
  settle();
  EXPECT_EQ(unread_runs(*bh_), 2u);  // R8 (40 minutes before R9) and R9
  std::vector<std::string> reasons;
  while (auto e = s.next_for(30ms)) reasons.push_back(e->reason);
  EXPECT_EQ(reasons, (std::vector<std::string>{"R8", "R9"}));
}

TEST_F(EventsTest, RetentionKeepsTheNewestRunsPerCategoryAndAnAgeBound) {
  open(with_event_retention(3, 1h));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "quiet", EventType::Normal, "Q1");
  for (int i = 0; i < 10; ++i) {
    clock_->advance(1s);
    emit(o.id, "noisy", i % 2 ? EventType::Warning : EventType::Normal, "Flap");
  }
  start();  // GC runs at start
  ASSERT_TRUE(eventually(
      [&] { return w.list_events(ctx_, o.id, with_event_category("noisy")).size() == 3; }));
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_category("quiet")).size(), 1u);  // not evicted
  clock_->advance(2h);  // past the age bound; the resync cadence runs GC
  EXPECT_TRUE(eventually([&] { return w.list_events(ctx_, o.id).empty(); }));
}

// An age bound of centuries (milliseconds::max(), the usual "for ever") keeps every run:
// `now - max_age` overflowed into an arbitrary time.
TEST_F(EventsTest, AnAgeBoundOfCenturiesKeepsEveryRun) {
  open(with_event_retention(100, std::chrono::milliseconds::max()));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  for (int i = 0; i < 5; ++i)
    emit(o.id, std::string("c").append(std::to_string(i)), EventType::Normal, "R");
  clock_->advance(24h * 365 * 10);
  start();  // retention runs at start
  settle();
  clock_->advance(1h);  // and at the resync cadence
  settle();
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 5u);
}

TEST_F(EventsTest, RetentionKeepsWhichRunsAreNewest) {
  open(with_event_retention(3, 0ms));  // no age bound
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto t0 = clock_->now();
  emit(o.id, "quiet", EventType::Normal, "Q1");
  for (int i = 0; i < 10; ++i) {
    clock_->advance(1s);
    emit(o.id, "noisy", i % 2 ? EventType::Warning : EventType::Normal, "Flap",
         "flap " + std::to_string(i));
  }
  // The newest run is extended: its last_at moves, its id does not.
  clock_->advance(1s);
  emit(o.id, "noisy", EventType::Warning, "Flap", "flap 10");  // extends flap 9's run
  clock_->advance(24h * 365);  // ages mean nothing without a max_age
  start();                     // retention runs at start
  auto noisy = [&] { return w.list_events(ctx_, o.id, with_event_category("noisy")); };
  ASSERT_TRUE(eventually([&] { return noisy().size() == 3; }));
  auto kept = noisy();
  EXPECT_EQ(kept[0].message, "flap 10");
  EXPECT_EQ(kept[0].count, 2);
  EXPECT_EQ(kept[0].last_at, t0 + 11s);
  EXPECT_EQ(kept[1].message, "flap 8");
  EXPECT_EQ(kept[1].last_at, t0 + 9s);
  EXPECT_EQ(kept[2].message, "flap 7");
  EXPECT_EQ(kept[2].last_at, t0 + 8s);
  auto quiet = w.list_events(ctx_, o.id, with_event_category("quiet"));
  ASSERT_EQ(quiet.size(), 1u);  // a year old, and kept
  EXPECT_EQ(quiet[0].last_at, t0);
  // A later sweep (at the latest, the resync cadence) trims by the same rule.
  emit(o.id, "noisy", EventType::Normal, "Back", "back");
  clock_->advance(30s);
  ASSERT_TRUE(eventually([&] { return noisy().size() == 3; }));
  kept = noisy();
  EXPECT_EQ(kept[0].message, "back");
  EXPECT_EQ(kept[1].message, "flap 10");
  EXPECT_EQ(kept[2].message, "flap 8");
  EXPECT_EQ(w.list_events(ctx_, o.id, with_event_category("quiet")).size(), 1u);
}

TEST_F(EventsTest, RetentionKeepsTheCurrentRunWhenTheClockSteppedBack) {
  auto clock = open_stepped(1, 0ms);
  auto w = widgets();
  auto id = failed_then_connected_an_hour_earlier(*clock);
  start();  // retention runs at start
  auto runs = [&] { return w.list_events(ctx_, id, with_event_category("conn")); };
  ASSERT_TRUE(eventually([&] { return runs().size() == 1; }));
  EXPECT_EQ(runs()[0].reason, "Connected");
  EXPECT_EQ(w.get_latest_event(ctx_, id, "conn")->reason, "Connected");
}

// Newest first means the run begun or extended last, whatever the clock did: after a
// step back the current run has the earlier last_at, and a limit of one still shows it.
TEST_F(EventsTest, TheCurrentRunIsListedFirstWhenTheClockSteppedBack) {
  auto clock = open_stepped(0, 0ms);
  auto w = widgets();
  auto id = failed_then_connected_an_hour_earlier(*clock);
  emit(id, "other", EventType::Normal, "Later");  // another category, after both
  auto reasons = [](const std::vector<Event>& runs) {
    std::vector<std::string> out;
    for (auto& e : runs) out.push_back(e.reason);
    return out;
  };
  using Reasons = std::vector<std::string>;
  EXPECT_EQ(reasons(w.list_events(ctx_, id)), (Reasons{"Later", "Connected", "ProbeFailed"}));
  EXPECT_EQ(reasons(w.list_events(ctx_, id, with_event_category("conn"), with_event_limit(1))),
            Reasons{"Connected"});
  EXPECT_EQ(reasons(w.get(ctx_, id, load_events()).list_events()),
            (Reasons{"Later", "Connected", "ProbeFailed"}));
  // Extended, the current run of "conn" moves ahead of the run of "other".
  emit(id, "conn", EventType::Normal, "Connected", "again");
  EXPECT_EQ(reasons(w.list_events(ctx_, id)), (Reasons{"Connected", "Later", "ProbeFailed"}));
}

// The age bound after a clock step back: the current run (started last, ended earlier)
// stays while the run before it is young. It went, and the stale run became current,
// so that the next record_event extended it.
TEST_F(EventsTest, TheAgeBoundKeepsTheCurrentRunWhenTheClockSteppedBack) {
  auto clock = open_stepped(0, 30min);
  auto w = widgets();
  auto id = failed_then_connected_an_hour_earlier(*clock);
  clock->step(31min);  // Connected is 31 minutes old; ProbeFailed is 29 minutes ahead
  start();             // retention runs at start
  auto sweep = [&] {
    auto log = actor_handles(*bh_).event_log;
    caf::scoped_actor self{log->home_system()};
    int removed = -1;
    self->request(log, caf::infinite, sweep_atom::value)
        .receive([&](int n) { removed = n; }, [](caf::error& e) { ADD_FAILURE() << to_string(e); });
    return removed;
  };
  EXPECT_EQ(sweep(), 0);
  EXPECT_EQ(w.get_latest_event(ctx_, id, "conn")->reason, "Connected");
  EXPECT_EQ(w.list_events(ctx_, id, with_event_category("conn")).size(), 2u);
  // Once every run of the pair is old, every one goes.
  clock->step(1h);
  EXPECT_EQ(sweep(), 2);
  EXPECT_FALSE(w.get_latest_event(ctx_, id, "conn").has_value());
}

// An unread event watch keeps what the store keeps: after a clock step back, the run
// that started last (the current one), not the one that ended last.
TEST_F(EventsTest, AnUnreadEventWatchKeepsTheCurrentRunWhenTheClockSteppedBack) {
  auto clock = open_stepped(1, 0ms);
  auto w = widgets();
  auto id = failed_then_connected_an_hour_earlier(*clock);
  auto events = w.watch_events(ctx_, id);  // before any sweep: both stored
  std::vector<std::string> seen;
  while (auto e = events.next_for(0ms)) seen.push_back(e->reason);
  EXPECT_EQ(seen, std::vector<std::string>{"Connected"});
}

// The age bound too: a run a clock step back left in the future does not hold every
// later run in an unread watch (the store's sweep lets them go as they age).
TEST_F(EventsTest, AnUnreadEventWatchStaysBoundedByAgeAfterTheClockSteppedBack) {
  auto clock = open_stepped(0, 1h);
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "flap", EventType::Warning, "Before");
  clock->step(-48h);
  auto s = w.watch_events(ctx_, o.id);
  for (int i = 0; i < 10; ++i) {
    emit(o.id, "flap", i % 2 ? EventType::Warning : EventType::Normal, "R" + std::to_string(i));
    clock->step(40min);
  }
  settle();
  EXPECT_LE(unread_runs(*bh_), 3u);  // Before (in the future), R8 and R9, not all eleven
}

TEST_F(EventsTest, RetentionHoldsWithResyncDisabled) {
  open(with_resync_interval(0ms), with_event_retention(2, 0ms));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  settle();  // the sweep at start is asked for after start returns: done before the runs
  for (int i = 0; i < 6; ++i)
    emit(o.id, "flap", i % 2 ? EventType::Warning : EventType::Normal, "Flap", std::to_string(i));
  settle();
  ASSERT_EQ(w.list_events(ctx_, o.id).size(), 6u);
  clock_->advance(30s);  // the default cadence, resync or not
  settle();
  auto kept = w.list_events(ctx_, o.id);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].message, "5");
}

// A kind's own retention replaces the beehive's for its events; the others keep the
// beehive's. Each sweep after the first reads only what changed since (runs written
// after it, runs that aged past a bound): a pair left alone by it is trimmed all the same.
TEST_F(EventsTest, EachKindKeepsItsOwnRetention) {
  open(with_event_retention(2, 0ms));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto gadget_cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [](auto&, auto&, auto&) { return Result{}; }, with_event_retention(0, 1h));
  auto w = widgets();
  Widgets gadgets(*bh_, gadget_kind);
  auto o = w.create(ctx_, {"w", 1});
  auto quiet = w.create(ctx_, {"quiet", 1});
  auto g = gadgets.create(ctx_, {"g", 1});
  auto flap = [&](auto record, ObjectID id, int runs) {
    for (int i = 0; i < runs; ++i)
      record(id, EventSpec{"flap", i % 2 ? EventType::Warning : EventType::Normal, "Flap"});
  };
  auto widget_event = [&](ObjectID id, EventSpec e) { cc_->record_event(ctx_, id, e); };
  auto gadget_event = [&](ObjectID id, EventSpec e) { gadget_cc.record_event(ctx_, id, e); };
  flap(widget_event, quiet.id, 2);
  flap(gadget_event, g.id, 5);
  start();  // the first sweep: every pair
  settle();
  EXPECT_EQ(w.list_events(ctx_, quiet.id).size(), 2u);
  EXPECT_EQ(gadgets.list_events(ctx_, g.id).size(), 5u);  // no count bound of its own
  flap(widget_event, o.id, 5);
  clock_->advance(30s);  // the next sweep
  settle();
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 2u);
  EXPECT_EQ(w.list_events(ctx_, quiet.id).size(), 2u);
  EXPECT_EQ(gadgets.list_events(ctx_, g.id).size(), 5u);
  flap(widget_event, quiet.id, 3);  // a pair the last sweep left as it was
  clock_->advance(2h);              // past the gadgets' age bound: widgets have none
  settle();
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 2u);
  EXPECT_EQ(w.list_events(ctx_, quiet.id).size(), 2u);
  EXPECT_TRUE(gadgets.list_events(ctx_, g.id).empty());
}

/// Lowers the runs a retention sweep reads or removes per transaction, for a test's length.
class SweepPage {
 public:
  explicit SweepPage(int runs) : was_(store::event_sweep_page_runs.exchange(runs)) {}
  ~SweepPage() { store::event_sweep_page_runs = was_; }

 private:
  int was_;
};

/// A sweep through the store writer under `policy`; returns the runs it removed.
int sweep_with(Beehive& bh, const trim_events_request& policy) {
  auto writer = bh.store_writer();
  caf::scoped_actor self{writer->home_system()};
  int removed = -1;
  self->request(writer, caf::infinite, policy)
      .receive([&](int n) { removed = n; }, [](caf::error& e) { ADD_FAILURE() << to_string(e); });
  return removed;
}

/// Widgets keep 2 runs per category, gadgets none older than an hour: a policy no sweep
/// of the event log ran under, so that its first sweep goes through every run.
trim_events_request two_widget_runs_and_an_hour_of_gadgets() {
  trim_events_request policy;
  policy.retention.emplace_back(widget_kind, event_retention{2, 0ms});
  policy.retention.emplace_back(gadget_kind, event_retention{0, 1h});
  return policy;
}

// A sweep with much to trim commits it a page at a time (writes wait behind a page, not
// behind the whole sweep), and keeps exactly the runs a sweep in one transaction keeps:
// the count bound's pages go through every object, the age bound's through every kind;
// the next sweep, which reads only the runs written since, is paged the same way.
TEST_F(EventsTest, ARetentionSweepWithMuchToTrimCommitsPageByPageAndKeepsTheSameRuns) {
  SweepPage small(3);
  open(with_event_retention(0, 0ms));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto gadget_cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto w = widgets();
  Widgets gadgets(*bh_, gadget_kind);
  auto flap = [](auto record, ObjectID id, const std::string& category, int runs) {
    for (int i = 0; i < runs; ++i)
      record(id, EventSpec{category, i % 2 ? EventType::Warning : EventType::Normal,
                           std::string("R").append(std::to_string(i))});
  };
  auto widget_event = [&](ObjectID id, EventSpec e) { cc_->record_event(ctx_, id, e); };
  auto gadget_event = [&](ObjectID id, EventSpec e) { gadget_cc.record_event(ctx_, id, e); };
  std::vector<ObjectID> ws, gs, quiet;
  for (int i = 0; i < 5; ++i) {
    auto o = w.create(ctx_, {std::string("w").append(std::to_string(i)), i});
    flap(widget_event, o.id, "a", 4);
    flap(widget_event, o.id, "b", 3);
    ws.push_back(o.id);
    if (i % 2) {  // gadgets between the widgets: pages mix kinds
      auto g = gadgets.create(ctx_, {std::string("g").append(std::to_string(i)), i});
      flap(gadget_event, g.id, "a", 5);
      gs.push_back(g.id);
    }
    if (i < 3) {  // widgets with fewer runs than a page: pages of several objects
      auto q = w.create(ctx_, {std::string("q").append(std::to_string(i)), i});
      flap(widget_event, q.id, "a", 1);
      quiet.push_back(q.id);
    }
  }
  clock_->advance(2h);
  for (auto g : gs) gadget_event(g, EventSpec{"a", EventType::Normal, "Young"});
  start();
  settle();
  auto policy = two_widget_runs_and_an_hour_of_gadgets();
  auto before = writer_transactions(*bh_);
  EXPECT_EQ(sweep_with(*bh_, policy), 5 * (2 + 1) + 2 * 5);
  auto full_pages = writer_transactions(*bh_) - before;
  EXPECT_GT(full_pages, 5u);  // 50 runs read, 10 removed by age
  auto reasons = [](const std::vector<Event>& runs) {
    std::vector<std::string> out;
    for (auto& e : runs) out.push_back(e.reason);
    return out;
  };
  for (auto id : ws) {
    EXPECT_EQ(reasons(w.list_events(ctx_, id, with_event_category("a"))),
              (std::vector<std::string>{"R3", "R2"}));
    EXPECT_EQ(reasons(w.list_events(ctx_, id, with_event_category("b"))),
              (std::vector<std::string>{"R2", "R1"}));
  }
  for (auto g : gs)
    EXPECT_EQ(reasons(gadgets.list_events(ctx_, g)), std::vector<std::string>{"Young"});
  for (auto q : quiet) EXPECT_EQ(reasons(w.list_events(ctx_, q)), std::vector<std::string>{"R0"});

  // The next sweep under the same policy reads the 8 runs written since, 3 a page, and
  // not the 30 kept before them.
  for (auto id : {ws[1], ws[3]}) flap(widget_event, id, "b", 4);
  before = writer_transactions(*bh_);
  EXPECT_EQ(sweep_with(*bh_, policy), 2 * 4);
  auto pages = writer_transactions(*bh_) - before;
  EXPECT_GT(pages, 1u);
  EXPECT_LE(pages, 3u);
  EXPECT_LT(pages, full_pages);
  for (auto id : {ws[1], ws[3]})
    EXPECT_EQ(reasons(w.list_events(ctx_, id, with_event_category("b"))),
              (std::vector<std::string>{"R3", "R2"}));

  // A sweep with less than a page to do is one transaction.
  store::event_sweep_page_runs = 10000;
  flap(widget_event, ws[0], "b", 4);
  before = writer_transactions(*bh_);
  EXPECT_EQ(sweep_with(*bh_, policy), 4);  // 2 runs kept and 4 written
  EXPECT_EQ(writer_transactions(*bh_) - before, 1u);
}

// A retention with an age bound only reads the runs old enough to go, a page at a time:
// it does not page through the others.
TEST_F(EventsTest, AnAgeOnlySweepPagesThroughTheRunsOldEnoughToGoOnly) {
  SweepPage small(3);
  open(with_event_retention(0, 0ms));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  auto old = w.create(ctx_, {"old", 1});
  for (int i = 0; i < 10; ++i, clock_->advance(1s))
    emit(old.id, "a", i % 2 ? EventType::Warning : EventType::Normal,
         std::string("R").append(std::to_string(i)));
  clock_->advance(2h);
  for (int i = 0; i < 4; ++i) {
    auto o = w.create(ctx_, {std::string("w").append(std::to_string(i)), i});
    for (int r = 0; r < 6; ++r)
      emit(o.id, "a", r % 2 ? EventType::Warning : EventType::Normal,
           std::string("R").append(std::to_string(r)));
  }
  emit(old.id, "a", EventType::Normal, "Young");
  start();
  settle();
  trim_events_request policy;
  policy.fallback = event_retention{0, 1h};
  auto before = writer_transactions(*bh_);
  EXPECT_EQ(sweep_with(*bh_, policy), 10);
  EXPECT_EQ(writer_transactions(*bh_) - before, 4u);  // 3 + 3 + 3 + 1 (35 runs in all)
  ASSERT_EQ(w.list_events(ctx_, old.id).size(), 1u);
  EXPECT_EQ(w.list_events(ctx_, old.id)[0].reason, "Young");
}

// What is asked of the writer while a sweep is under way is served between its pages:
// here a create that arrived right behind the sweep is answered before the sweep is.
TEST_F(EventsTest, AWriteAskedForDuringASweepIsServedBetweenItsPages) {
  SweepPage small(2);
  open(with_event_retention(0, 0ms));
  cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 3; ++i) {
    auto o = w.create(ctx_, {std::string("w").append(std::to_string(i)), i});
    for (int r = 0; r < 3; ++r)
      emit(o.id, "a", r % 2 ? EventType::Warning : EventType::Normal,
           std::string("R").append(std::to_string(r)));
    ids.push_back(o.id);
  }
  start();
  settle();
  auto writer = bh_->store_writer();
  caf::scoped_actor self{writer->home_system()};
  auto deferred = [&] { return writer_state(*bh_).deferred; };
  // Both arrive while a within block holds the writer, in this order: once it commits,
  // the sweep's first page runs, then the create, then the sweep's other pages.
  cc_->within(ctx_, [&](const Context& tx) {
    w.update(tx, ids[0], {"w0", 100});
    self->send(writer, two_widget_runs_and_an_hour_of_gadgets());
    self->send(writer, create_request{widget_kind, nlohmann::json(WidgetSpec{"late", 1}).dump()});
    ASSERT_TRUE(eventually([&] { return deferred() == 2; }));
  });
  std::vector<std::string> answers;
  for (int i = 0; i < 2; ++i)
    self->receive([&](const ObjectRow&) { answers.push_back("create"); },
                  [&](int removed) {
                    answers.push_back("sweep");
                    EXPECT_EQ(removed, 3);
                  },
                  caf::after(std::chrono::seconds(10)) >> [&] { answers.push_back("timeout"); });
  EXPECT_EQ(answers, (std::vector<std::string>{"create", "sweep"}));
  for (auto id : ids) EXPECT_EQ(w.list_events(ctx_, id).size(), 2u);
}

TEST_F(EventsTest, EventsCascadeWithTheirObject) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  emit(o.id, "", EventType::Normal, "X");
  start();
  w.remove(ctx_, o.id);
  ASSERT_TRUE(eventually([&] {
    try {
      w.get(ctx_, o.id);
      return false;
    } catch (const Error&) {
      return true;
    }
  }));
  EXPECT_TRUE(w.list_events(ctx_, o.id).empty());
}

TEST_F(EventsTest, ScheduleGaugeFollowsTheBackoffLadderAndRequeue) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("down"); });
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto unknown = w.watch_schedule(ctx_, 777777);
  EXPECT_EQ(unknown.next_for(5s), Schedule{});  // the epoch until something schedules it
  auto s = w.watch_schedule(ctx_, o.id);
  start();
  auto expect_next = [&](Time t) {
    while (auto v = s.next_for(5s))
      if (v->next_requeue_at == t) return true;
    return false;
  };
  EXPECT_TRUE(expect_next(clock_->now() + 1s));
  clock_->advance(1s);
  EXPECT_TRUE(expect_next(clock_->now() + 2s));
  w.requeue(ctx_, o.id);  // keeps the ladder
  EXPECT_TRUE(expect_next(clock_->now() + 4s));
  EXPECT_EQ(w.get_schedule(ctx_, o.id).next_requeue_at, clock_->now() + 4s);
  w.requeue(ctx_, o.id, with_reset_backoff());
  EXPECT_TRUE(expect_next(clock_->now() + 1s));
  EXPECT_EQ(w.get_schedule(ctx_, 424242), Schedule{});
  Widgets gadgets(*bh_, gadget_kind);
  EXPECT_ERRC(gadgets.watch_schedule(ctx_, o.id), errc::no_controller);
  EXPECT_EQ(gadgets.get_schedule(ctx_, o.id), Schedule{});
  close();
  // Nothing is scheduled once stopped: the watch hears so, then ends.
  EXPECT_EQ(s.next_for(1s), Schedule{});
  EXPECT_FALSE(s.next_for(1s).has_value());
  EXPECT_EQ(s.error(), errc::stopped);
}

TEST_F(EventsTest, WatchScheduleStartsWithThePendingSchedule) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("down"); });
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(scheduled_at(o.id, clock_->now() + 1s));
  auto s = w.watch_schedule(ctx_, o.id);
  auto first = s.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->next_requeue_at, clock_->now() + 1s);  // not the epoch
  EXPECT_FALSE(s.next_for(30ms).has_value());             // nothing moved since
}

TEST_F(EventsTest, ScheduleIsNowWhileQueuedBehindABusyWorker) {
  Gate gate;
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->hold(gate, "blocker");
  auto w = widgets();
  auto blocker = w.create(ctx_, {"blocker", 1});
  start();  // one worker
  gate.wait_entered();
  clock_->advance(5s);
  auto queued = w.create(ctx_, {"queued", 1});
  EXPECT_TRUE(scheduled_at(queued.id, clock_->now()));  // queued: due now
  auto s = w.watch_schedule(ctx_, queued.id);
  auto first = s.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->next_requeue_at, clock_->now());
  EXPECT_EQ(w.get_schedule(ctx_, blocker.id), Schedule{});  // in flight: not queued
  EXPECT_EQ(recorder_->count(queued.id), 0);
  gate.open();
  EXPECT_TRUE(eventually([&] { return recorder_->count(queued.id) == 1; }));
  EXPECT_TRUE(scheduled_at(queued.id, Time{}));  // dispatched, nothing pending
  bool cleared = false;
  while (auto v = s.next_for(5s))
    if ((cleared = v->next_requeue_at == Time{})) break;
  EXPECT_TRUE(cleared);
}

}  // namespace
}  // namespace beehive::test
