// Deadlines and cancellation tell the truth: a call that throws deadline_exceeded or
// cancelled wrote nothing, and a call the writer began is answered with its real outcome.
// Huge durations saturate instead of wrapping into the past.

#include <random>
#include <thread>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

using DeadlineTest = BeehiveTest;

/// Four threads create with random 0-3 ms deadlines, so that deadlines keep passing
/// while the writer is applying: no call that threw may have written its row.
TEST_F(DeadlineTest, AWriteThatThrowsADeadlineWroteNothing) {
  Widgets w(bh(), widget_kind);
  constexpr int writers = 4;
  constexpr int per_writer = 400;
  std::vector<std::vector<std::string>> threw(writers);
  std::atomic<int> succeeded{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < writers; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::uniform_int_distribution<int> us(0, 3000);
      for (int i = 0; i < per_writer; ++i) {
        // Built with append: GCC 12 warns (-Wstringop-overflow, a false positive) on
        // "literal" + std::to_string.
        std::string slug("w");
        slug.append(std::to_string(t)).append("-").append(std::to_string(i));
        auto ctx = Context{}.with_deadline(std::chrono::steady_clock::now() +
                                           std::chrono::microseconds(us(rng)));
        try {
          w.create(ctx, {"c", i}, with_slug(slug));
          ++succeeded;
        } catch (const Error& e) {
          ASSERT_TRUE(e.code() == make_error_code(errc::deadline_exceeded) ||
                      e.code() == make_error_code(errc::cancelled))
              << e.what();
          threw[t].push_back(slug);
        }
      }
    });
  for (auto& t : ts) t.join();
  int thrown = 0;
  int threw_but_written = 0;
  for (auto& slugs : threw)
    for (auto& slug : slugs) {
      ++thrown;
      try {
        w.get_by_slug(ctx_, slug);
        ++threw_but_written;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), make_error_code(errc::not_found));
      }
    }
  EXPECT_EQ(threw_but_written, 0) << "of " << thrown << " calls that threw";
  EXPECT_EQ(static_cast<int>(w.list(ctx_).size()), succeeded.load());
}

TEST(DurationTest, AHugeTimeoutIsNoTimeout) {
  for (auto d :
       {std::chrono::milliseconds::max(), std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::hours(24 * 365 * 1000))}) {
    auto ctx = Context{}.with_timeout(d);
    EXPECT_FALSE(ctx.done());
    EXPECT_FALSE(ctx.error());
    ctx.throw_if_done();
  }
  // A negative huge timeout has passed already.
  EXPECT_TRUE(Context{}.with_timeout(std::chrono::milliseconds::min()).done());
  // A huge timeout keeps a parent's deadline.
  auto parent = Context{}.with_timeout(std::chrono::milliseconds(0));
  EXPECT_TRUE(parent.with_timeout(std::chrono::milliseconds::max()).done());
}

TEST_F(DeadlineTest, NextForWithAHugeTimeoutWaitsForTheNextValue) {
  Widgets w(bh(), widget_kind);
  auto s = w.watch_list(ctx_);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // lets next_for begin waiting
    w.create(ctx_, {"late", 1});
  });
  auto c = s.next_for(std::chrono::milliseconds::max());
  writer.join();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->object.spec.color, "late");
}

using HugeRequeueTest = ControllerTest;

TEST_F(HugeRequeueTest, ARequeueAfterOfCenturiesIsNeverDue) {
  recorder_->set_body([](auto& rctx, auto& cc, auto& o) {
    cc.update_status(rctx, o.id, o.generation, WidgetStatus{true});  // settled: no resync
    return Result{std::chrono::milliseconds::max()};
  });
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  settle();
  EXPECT_EQ(widgets().get_schedule(ctx_, o.id), Schedule{});  // never: nothing scheduled
  clock_->advance(std::chrono::hours(24 * 365));
  settle();
  EXPECT_EQ(recorder_->count(o.id), 1);
}

TEST(ManualClockTest, AdvancingByAHugeDurationSaturates) {
  ManualClock clock;
  auto start = clock.now();
  clock.advance(std::chrono::milliseconds::max());
  EXPECT_GT(clock.now(), start);
  clock.advance(std::chrono::milliseconds::max());
  EXPECT_EQ(clock.now(), Time::max());
}

}  // namespace
}  // namespace beehive::test
