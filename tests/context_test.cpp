// Context, Stream and the error types.

#include <thread>

#include <beehive/detail/stream_core.hpp>

#include "context_internal.hpp"  // private: what waiters look at
#include "fixture.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;

TEST(ContextTest, BackgroundNeverEnds) {
  Context ctx;
  EXPECT_FALSE(ctx.done());
  EXPECT_FALSE(ctx.error());
  EXPECT_FALSE(ctx.deadline().has_value());
  ctx.throw_if_done();
}

TEST(ContextTest, TimeoutEndsTheContext) {
  Context ctx = Context{}.with_timeout(20ms);
  EXPECT_FALSE(ctx.done());
  std::this_thread::sleep_for(30ms);
  EXPECT_TRUE(ctx.done());
  EXPECT_EQ(ctx.error(), errc::deadline_exceeded);
  EXPECT_ERRC(ctx.throw_if_done(), errc::deadline_exceeded);
}

TEST(ContextTest, ChildKeepsTheEarlierDeadline) {
  auto parent = Context{}.with_deadline(std::chrono::steady_clock::now() - 1s);
  auto child = parent.with_timeout(1h);
  EXPECT_TRUE(child.done());
  EXPECT_LE(*child.deadline(), *parent.deadline());
}

TEST(ContextTest, CancelEndsTheContextAndItsChildrenOnly) {
  auto [ctx, cancel] = Context{}.with_cancel();
  auto child = ctx.with_timeout(1h);
  Context unrelated = Context{}.with_timeout(1h);
  EXPECT_FALSE(child.done());
  cancel();
  cancel();  // idempotent
  EXPECT_EQ(ctx.error(), errc::cancelled);
  EXPECT_EQ(child.error(), errc::cancelled);
  EXPECT_FALSE(unrelated.done());
}

// A waiter looks at a context now and then only when it can be cancelled: one with a
// deadline alone is waited for until the deadline (no wake-ups every few milliseconds
// for a stream or a call opened with a long timeout).
TEST(ContextTest, OnlyAContextWithACancelAlongItsChainCanBeCancelled) {
  using detail::ContextAccess;
  EXPECT_FALSE(ContextAccess::can_be_cancelled(Context{}));
  EXPECT_FALSE(ContextAccess::can_be_cancelled(Context{}.with_timeout(1h).with_timeout(2h)));
  auto [cancellable, cancel] = Context{}.with_cancel();
  EXPECT_TRUE(ContextAccess::can_be_cancelled(cancellable));
  EXPECT_TRUE(ContextAccess::can_be_cancelled(cancellable.with_timeout(1h)));
}

// A context derived from the last one in a loop (a long-lived worker re-deriving its
// context) costs what one does: checked at once, and freed without recursing down a
// chain (400 000 derivations overflowed the stack when it was freed).
TEST(ContextTest, AContextDerivedFromTheLastOneInALoopCostsWhatOneDoes) {
  auto [root, cancel] = Context{}.with_cancel();
  Context c = root;
  for (int i = 0; i < 200'000; ++i) {
    c = c.with_timeout(1h);
    c = c.with_cancel().first;  // its cancel function dropped: nothing can end it
  }
  EXPECT_FALSE(c.done());
  // The root's state, and the last one's (dropped after this context was made).
  EXPECT_EQ(detail::ContextAccess::node(c)->cancels.size(), 2u);
  cancel();
  EXPECT_EQ(c.error(), errc::cancelled);
  c = Context{};
}

TEST(ErrorTest, ErrorsCompareWithErrc) {
  Error e(errc::not_found, "no widget 7");
  EXPECT_EQ(e.code(), errc::not_found);
  EXPECT_NE(e.code(), errc::already_exists);
  EXPECT_EQ(e.value(), errc::not_found);
  EXPECT_EQ(e.message(), "no widget 7");
  EXPECT_STREQ(e.code().category().name(), "beehive");
  EXPECT_EQ(e.code().message(), "not_found");
  std::error_code ec = errc::stopped;
  EXPECT_EQ(ec, errc::stopped);
  const std::system_error& base = e;
  EXPECT_NE(std::string(base.what()).find("no widget 7"), std::string::npos);
}

TEST(ClockTest, ManualClockMovesOnlyForwardAndNotifies) {
  ManualClock clock;
  auto t0 = clock.now();
  EXPECT_GT(t0, Time{});
  int calls = 0;
  int token = clock.subscribe([&] { ++calls; });
  clock.advance(1500ms);
  EXPECT_EQ(clock.now(), t0 + 1500ms);
  clock.set(t0);  // backwards: ignored
  EXPECT_EQ(clock.now(), t0 + 1500ms);
  clock.advance(-5s);  // ignored
  EXPECT_EQ(calls, 1);
  clock.unsubscribe(token);
  clock.advance(1s);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(from_millis(to_millis(clock.now())), clock.now());
}

using Core = detail::StreamCore<int>;

TEST(StreamTest, DefaultStreamHasEnded) {
  Stream<int> s;
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.next().has_value());
}

TEST(StreamTest, DeliversInOrderAndConflatesPerKey) {
  auto core = std::make_shared<Core>(Context{});
  Stream<int> s(core);
  core->push(1, 10);
  core->push(2, 20);
  core->push(1, 11);  // replaces the pending value of key 1, keeps its place
  EXPECT_EQ(s.next_for(0ms), 11);
  EXPECT_EQ(s.next_for(0ms), 20);
  EXPECT_FALSE(s.next_for(10ms).has_value());  // timeout
  EXPECT_FALSE(s.done());
}

TEST(StreamTest, MergeCanDropAKey) {
  auto core = std::make_shared<Core>(Context{}, [](int& pending, int&& incoming) {
    pending += incoming;
    return pending != 0;
  });
  Stream<int> s(core);
  core->push(1, 5);
  core->push(2, 7);
  core->push(1, -5);  // cancels out
  EXPECT_EQ(s.next_for(0ms), 7);
  EXPECT_FALSE(s.next_for(0ms).has_value());
}

TEST(StreamTest, FinishDeliversWhatIsPendingThenEndsWithTheError) {
  auto core = std::make_shared<Core>(Context{});
  Stream<int> s(core);
  core->push(1, 1);
  core->finish(errc::stopped);
  EXPECT_FALSE(core->push(2, 2));
  EXPECT_EQ(s.next(), 1);
  EXPECT_FALSE(s.next().has_value());
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.error(), errc::stopped);
}

// The caller ending a stream whose producer ended (values still pending) ends it: no
// error, as a close or the caller's context says; read through, it keeps the producer's.
TEST(StreamTest, AStreamTheCallerEndsBeforeReadingThroughHasNoError) {
  auto closed = std::make_shared<Core>(Context{});
  Stream<int> s(closed);
  closed->push(1, 1);
  closed->finish(errc::stopped);
  s.close();
  EXPECT_FALSE(s.error());
  auto [ctx, cancel] = Context{}.with_cancel();
  auto cancelled = std::make_shared<Core>(ctx);
  Stream<int> t(cancelled);
  cancelled->push(1, 1);
  cancelled->finish(errc::stopped);
  cancel();
  EXPECT_FALSE(t.next().has_value());
  EXPECT_FALSE(t.error());
  auto read = std::make_shared<Core>(Context{});
  Stream<int> u(read);
  read->finish(errc::stopped);
  EXPECT_FALSE(u.next().has_value());
  u.close();
  EXPECT_EQ(u.error(), errc::stopped);
}

TEST(StreamTest, CloseEndsWithoutErrorAndRunsTheEndCallbackOnce) {
  auto core = std::make_shared<Core>(Context{});
  int ended = 0;
  core->set_on_end([&] { ++ended; });
  Stream<int> s(core);
  core->push(1, 1);
  s.close();
  s.close();
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.error());
  EXPECT_FALSE(s.next().has_value());
  EXPECT_EQ(ended, 1);
}

TEST(StreamTest, DestructionCloses) {
  auto core = std::make_shared<Core>(Context{});
  { Stream<int> s(core); }
  EXPECT_FALSE(core->push(1, 1));
}

TEST(StreamTest, ContextEndUnblocksNext) {
  auto [ctx, cancel] = Context{}.with_cancel();
  auto core = std::make_shared<Core>(ctx);
  Stream<int> s(core);
  std::thread t([c = cancel] {
    std::this_thread::sleep_for(20ms);
    c();
  });
  EXPECT_FALSE(s.next().has_value());
  t.join();
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.error());  // its own context: no error
}

TEST(StreamTest, BlockedNextWakesOnPush) {
  auto core = std::make_shared<Core>(Context{});
  Stream<int> s(core);
  std::thread t([core] {
    std::this_thread::sleep_for(10ms);
    core->push(3, 33);
  });
  EXPECT_EQ(s.next(), 33);
  t.join();
}

}  // namespace
}  // namespace beehive::test
