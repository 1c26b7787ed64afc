// Event log, schedule gauge and manual requeue.

#include "controller_fixture.hpp"

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
  std::unique_ptr<ControllerClient<WidgetStatus>> cc_;
};

struct Probe {
  std::string endpoint;
  int latency_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Probe, endpoint, latency_ms)

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
  EXPECT_FALSE(s.next_for(1s).has_value());
  EXPECT_EQ(s.error(), errc::stopped);
}

}  // namespace
}  // namespace beehive::test
