// A wall clock that steps (NTP, an operator) neither stalls nor bunches timers: backoff,
// requeue_after and resync keep firing on time relative to the clock as it is now.
// These run on real time (the stepping clock is not a ManualClock), with short timers.

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

/// The system clock shifted by an offset that the test steps.
class SteppingClock : public Clock {
 public:
  Time now() const override { return std::chrono::system_clock::now() + offset_.load(); }
  void step(std::chrono::milliseconds d) { offset_ = offset_.load() + d; }

 private:
  std::atomic<std::chrono::milliseconds> offset_{std::chrono::milliseconds(0)};
};

class ClockStepTest : public ::testing::Test {
 protected:
  template <class... Opts>
  void start(Recorder::Body body, Opts&&... opts) {
    recorder_->set_body(std::move(body));
    store_ = open_test_store(dir_.file("beehive.db"));
    bh_ = std::make_unique<Beehive>(store_, with_clock(clock_), std::forward<Opts>(opts)...);
    register_controller<WidgetSpec, WidgetStatus>(
        *bh_, widget_kind,
        [r = recorder_](auto& ctx, auto& cc, auto& o) { return (*r)(ctx, cc, o); });
    id_ = Widgets(*bh_, widget_kind).create(Context{}, {"a", 1}).id;
    stop_ = bh_->start(Context{});
  }
  void TearDown() override {
    if (stop_) stop_(Context{}.with_timeout(10s));
    bh_.reset();
  }
  /// Passes of the object keep coming: three more within a few seconds.
  bool keeps_reconciling() {
    int seen = recorder_->count(id_);
    return eventually([&] { return recorder_->count(id_) >= seen + 3; }, 5s);
  }

  TempDir dir_;
  std::shared_ptr<SteppingClock> clock_ = std::make_shared<SteppingClock>();
  std::shared_ptr<Recorder> recorder_ = std::make_shared<Recorder>();
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Stop stop_;
  ObjectID id_ = 0;
};

TEST_F(ClockStepTest, RequeueAfterKeepsFiringWhenTheClockStepsBack) {
  start([](auto&, auto&, auto&) { return Result{20ms}; });
  ASSERT_TRUE(keeps_reconciling());
  clock_->step(-1h);
  EXPECT_TRUE(keeps_reconciling());
  clock_->step(1h);  // put right again
  EXPECT_TRUE(keeps_reconciling());
}

TEST_F(ClockStepTest, BackoffKeepsFiringWhenTheClockStepsBack) {
  start([](auto&, auto&, auto&) -> Result { throw std::runtime_error("not yet"); },
        with_max_retry_interval(20ms), with_logger([](auto, auto, auto&) {}));
  ASSERT_TRUE(keeps_reconciling());
  clock_->step(-1h);
  EXPECT_TRUE(keeps_reconciling());
}

TEST_F(ClockStepTest, ResyncKeepsFiringWhenTheClockStepsBack) {
  start([](auto&, auto&, auto&) { return Result{}; }, with_resync_interval(20ms));
  ASSERT_TRUE(keeps_reconciling());
  clock_->step(-1h);
  EXPECT_TRUE(keeps_reconciling());
}

TEST_F(ClockStepTest, AScheduleIsShownOnTheBeehivesClock) {
  start([](auto&, auto&, auto&) { return Result{1h}; });
  ASSERT_TRUE(eventually([&] { return recorder_->count(id_) == 1; }));
  Widgets w(*bh_, widget_kind);
  ASSERT_TRUE(eventually([&] { return w.get_schedule(Context{}, id_).next_requeue_at != Time{}; }));
  auto due = w.get_schedule(Context{}, id_).next_requeue_at;
  EXPECT_NEAR(std::chrono::duration<double>(due - clock_->now()).count(), 3600, 5);
  // The clock stepped since the object was scheduled: the time shown follows it (the
  // pass comes in an hour of real time, whatever the clock reads). It stayed as
  // converted at the reschedule, two hours ahead.
  clock_->step(-1h);
  due = w.get_schedule(Context{}, id_).next_requeue_at;
  EXPECT_NEAR(std::chrono::duration<double>(due - clock_->now()).count(), 3600, 5);
}

}  // namespace
}  // namespace beehive::test
