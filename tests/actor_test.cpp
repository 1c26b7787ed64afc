// The actor surface: beehive driven purely by typed messages, inside the application's
// actor system; inspection; supervision; serialization of the messages.

#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include <caf/all.hpp>

#include <beehive/actors.hpp>
#include <beehive/testing.hpp>

#include "actors/record_inbox.hpp"
#include "actors/schedule_table.hpp"
#include "actors/scheduler.hpp"
#include "actors/spawn_faults.hpp"
#include "controller_fixture.hpp"
#include "crash_controller.hpp"
#include "held_reader.hpp"
#include "open_block.hpp"
#include "support/stepped_clock.hpp"
#include "writer_reopen_held.hpp"

namespace beehive::test {
namespace {

/// Levels of nesting that overflow a thread's stack when a JSON value is copied (which
/// recurses once per level): 10^6 at -O2, checked by the default and ASan builds. Under
/// ThreadSanitizer, which runs such a test many times slower, 10^5 (the refusal is what
/// it checks there).
#if defined(__SANITIZE_THREAD__)
inline constexpr int stack_overflowing_depth = 100000;
#else
inline constexpr int stack_overflowing_depth = 1000000;
#endif

/// Beehive running inside an application's own actor system.
struct AppConfig : caf::actor_system_config {
  AppConfig() { beehive::add_message_types(*this); }  // the one line an application adds
};

class ActorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = open_test_store(dir_.file("a.db"));
    bh_ = std::make_unique<Beehive>(sys_, store_, with_clock(clock_));
  }
  void TearDown() override {
    bh_.reset();
    store_.reset();
  }

  /// A blocking request from the test thread (the application's actors would use
  /// request(...).then(...)).
  template <class Reply, class Handle, class... Ts>
  Reply ask(const Handle& h, Ts&&... xs) {
    caf::scoped_actor self{sys_};
    std::optional<Reply> out;
    caf::error err;
    self->request(h, std::chrono::seconds(10), std::forward<Ts>(xs)...)
        .receive([&](Reply& r) { out = std::move(r); }, [&](caf::error& e) { err = e; });
    if (!out) throw Error(to_errc(err).value_or(errc::store), error_message(err));
    return std::move(*out);
  }

  /// Registers an idle widget controller, starts and settles; the supervisor's logs are
  /// captured (the tests that use it crash actors). The stop is the test's to call.
  std::pair<ControllerClient<WidgetStatus>, Stop> start_idle_widgets() {
    auto cc = register_controller<WidgetSpec, WidgetStatus>(
        *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
    ::testing::internal::CaptureStderr();
    auto stop = bh_->start(ctx_);
    testing::settle(*bh_, ctx_);
    return {cc, stop};
  }

  /// What start_with_the_worker_held returns.
  struct HeldWorker {
    ControllerClient<WidgetStatus> cc;
    Stop stop;
    controller_actor controller;
    bool holding = false;  // the slow pass holds the worker
  };
  /// Registers widgets with one worker, which the pass of a "slow" widget holds until
  /// `released` is ready (every pass then calls `after` with its id, if given), creates
  /// that widget, starts, and returns once its pass holds the worker.
  HeldWorker start_with_the_worker_held(std::shared_future<void> released,
                                        std::function<void(ObjectID)> after = {}) {
    auto cc = register_controller<WidgetSpec, WidgetStatus>(
        *bh_, widget_kind,
        [released, after](auto&, auto&, const auto& o) {
          if (o.spec.color == "slow") released.wait();
          if (after) after(o.id);
          return Result{};
        },
        with_concurrency(1));
    auto slow = Widgets(*bh_, widget_kind).create(ctx_, {"slow", 1});
    auto stop = bh_->start(ctx_);
    auto controller = *bh_->controller(widget_kind);
    bool holding = eventually([&] {
      return ask<controller_state>(controller, inspect_atom::value).in_flight ==
             std::vector<ObjectID>{slow.id};
    });
    return {std::move(cc), std::move(stop), controller, holding};
  }

  /// `x` serialized and read back into `into`, as it crosses to another node.
  template <class T>
  void through_the_wire(T x, T& into) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys_, buf};
    ASSERT_FALSE(sink(x));
    caf::binary_deserializer source{sys_, buf};
    ASSERT_FALSE(source(into));
  }

  TempDir dir_;
  AppConfig cfg_;
  caf::actor_system sys_{cfg_};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Context ctx_;
};

/// An event filter that selects one category.
EventFilter in_category(std::string category) {
  EventFilter f;
  f.category = std::move(category);
  return f;
}

std::string spec(const std::string& color, int size) {
  return nlohmann::json(WidgetSpec{color, size}).dump();
}

TEST_F(ActorTest, WritesAndReadsThroughTypedMessages) {
  auto w = bh_->store_writer();
  auto row = ask<ObjectRow>(w, create_request{widget_kind, spec("red", 1), "r1", {"f"}});
  EXPECT_EQ(row.meta.slug, "r1");
  EXPECT_EQ((decode_row<WidgetSpec, WidgetStatus>(row).spec), (WidgetSpec{"red", 1}));
  auto updated = ask<ObjectRow>(w, update_request{widget_kind, row.meta.id, spec("red", 2)});
  EXPECT_EQ(updated.meta.generation, 2);
  auto goc = ask<get_or_create_reply>(w, get_or_create_request{widget_kind, "r1", spec("x", 0)});
  EXPECT_FALSE(goc.created);
  auto got = ask<ObjectRow>(w, get_by_slug_request{widget_kind, "r1", LoadOption::owner});
  EXPECT_EQ(got.meta.id, row.meta.id);
  EXPECT_FALSE(got.meta.get_owner().has_value());  // loaded: none
  auto all = ask<std::vector<ObjectRow>>(w, list_request{widget_kind});
  EXPECT_EQ(all.size(), 1u);
  try {
    ask<ObjectRow>(w, get_request{gadget_kind, row.meta.id});
    ADD_FAILURE() << "another kind's id must be not_found";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
  }
  try {
    ask<ObjectRow>(w, create_request{widget_kind, spec("dup", 1), "r1"});
    ADD_FAILURE() << "a taken slug must be already_exists";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::already_exists);
  }
  try {
    ask<ObjectRow>(w, create_request{widget_kind, spec("nameless", 1), "r2", {""}});
    ADD_FAILURE() << "an empty finalizer must be invalid_argument";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  try {
    ask<ObjectRow>(w, add_finalizer_request{widget_kind, row.meta.id, ""});
    ADD_FAILURE() << "an empty finalizer must be invalid_argument";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_TRUE(ask<bool>(w, remove_by_slug_request{widget_kind, "r1"}));
  auto removed = ask<ObjectRow>(w, get_request{widget_kind, row.meta.id});
  EXPECT_TRUE(removed.meta.deletion_requested_at.has_value());
  // What the blocking facade sees is the same store.
  EXPECT_EQ(Widgets(*bh_, widget_kind).get(ctx_, row.meta.id).spec.size, 2);
  auto state = ask<store_writer_state>(w, inspect_atom::value);
  EXPECT_GE(state.transactions, 3u);
  EXPECT_EQ(state.session, 0u);
}

TEST_F(ActorTest, ControllerWritesEventsAndRelationsAsMessages) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto w = bh_->store_writer();
  auto a = ask<ObjectRow>(w, create_request{widget_kind, spec("a", 1)});
  auto b = ask<ObjectRow>(w, create_request{widget_kind, spec("b", 1), {}, {}, a.meta.id});
  ask<ObjectRow>(w, update_status_request{widget_kind, a.meta.id, 1, R"({"ready":true})"});
  ask<ObjectRow>(w,
                 set_condition_request{widget_kind, a.meta.id, {"Ready", ConditionStatus::True}});
  EXPECT_TRUE(ask<bool>(w, add_dependency_request{widget_kind, b.meta.id, a.meta.id}));
  auto ev =
      ask<Event>(w, record_event_request{widget_kind, a.meta.id, {"", EventType::Normal, "Up"}});
  EXPECT_EQ(ev.count, 1);
  EXPECT_EQ(ask<std::vector<Event>>(w, list_events_request{a.meta.id}).size(), 1u);
  EXPECT_EQ(ask<std::vector<Ref>>(w, relation_request{a.meta.id, LoadOption::owned}).size(), 1u);
  EXPECT_TRUE(ask<bool>(w, has_incoming_refs_request{a.meta.id}));
  auto owned = ask<std::vector<ObjectRow>>(w, list_request{widget_kind, 0, a.meta.id});
  ASSERT_EQ(owned.size(), 1u);
  EXPECT_EQ(owned[0].meta.id, b.meta.id);
  auto typed =
      decode_row<WidgetSpec, WidgetStatus>(ask<ObjectRow>(w, get_request{widget_kind, a.meta.id}));
  EXPECT_TRUE(typed.status->ready);
}

TEST_F(ActorTest, ATransactionOfMessagesCommitsAllOrNothing) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto w = bh_->store_writer();
  auto a = ask<ObjectRow>(w, create_request{widget_kind, spec("a", 1)});
  auto replies =
      ask<transaction_reply>(
          w, transaction_request{{create_request{widget_kind, spec("b", 1), "b"},
                                  set_condition_request{
                                      widget_kind, a.meta.id, {"Ready", ConditionStatus::True}},
                                  remove_by_slug_request{widget_kind, "none"}}})
          .replies;
  ASSERT_EQ(replies.size(), 3u);
  ASSERT_TRUE(std::holds_alternative<ObjectRow>(replies[0]));
  EXPECT_EQ(std::get<ObjectRow>(replies[0]).meta.slug, "b");
  ASSERT_TRUE(std::holds_alternative<ObjectRow>(replies[1]));
  EXPECT_EQ(std::get<ObjectRow>(replies[1]).meta.conditions.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<bool>(replies[2]));
  EXPECT_FALSE(std::get<bool>(replies[2]));
  try {
    ask<transaction_reply>(w,
                           transaction_request{{create_request{widget_kind, spec("c", 1), "c"},
                                                create_request{widget_kind, spec("b", 2), "b"}}});
    ADD_FAILURE() << "the second create must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::already_exists);
    EXPECT_NE(e.message().find("write 1"), std::string::npos);
  }
  Widgets widgets(*bh_, widget_kind);
  EXPECT_ERRC(widgets.get_by_slug(ctx_, "c"), errc::not_found);  // rolled back with it
  EXPECT_EQ(widgets.get(ctx_, a.meta.id).conditions.size(), 1u);
}

// Writes whose callers gave up while a within block held the writer are let go then,
// requests and all, not kept until the block ends.
TEST_F(ActorTest, WritesWhoseCallersGaveUpBehindAnOpenBlockAreNotKept) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto o = widgets.create(ctx_, {"a", 1});
  auto w = bh_->store_writer();
  cc.within(ctx_, [&](const Context& tx) {
    widgets.update(tx, o.id, {"inside", 1});
    std::thread other([&] {
      for (int i = 0; i < 30; ++i)
        EXPECT_ERRC(widgets.update(Context{}.with_timeout(std::chrono::milliseconds(20)), o.id,
                                   {std::string(64 * 1024, 'x'), i}),
                    errc::deadline_exceeded);
    });
    other.join();
    EXPECT_LE(ask<store_writer_state>(w, inspect_atom::value).deferred, 1u);
  });
  EXPECT_EQ(widgets.get(ctx_, o.id).spec.color, "inside");
}

TEST_F(ActorTest, AnActorRequestDuringABlockingWithinBlockIsAnsweredOnceTheBlockCommits) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto w = bh_->store_writer();
  Widgets widgets(*bh_, widget_kind);
  caf::scoped_actor app{sys_};
  using Pending = decltype(app->request(w, caf::infinite, get_by_slug_request{}));
  std::optional<Pending> pending;
  cc.within(ctx_, [&](const Context& tx) {
    widgets.create(tx, {"inside", 1}, with_slug("inside"));
    // The writer holds this until the block ends: it must see the block's outcome.
    pending.emplace(
        app->request(w, std::chrono::seconds(10), get_by_slug_request{widget_kind, "inside"}));
    EXPECT_EQ(ask<store_writer_state>(w, inspect_atom::value).deferred, 1u);
  });
  // The block's commit may run on this thread; the deferred reply is the actor's to send.
  std::optional<ObjectRow> row;
  pending->receive([&](ObjectRow& r) { row = std::move(r); },
                   [&](caf::error& e) { ADD_FAILURE() << error_message(e); });
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->meta.slug, "inside");
}

// A read that waits behind a within block still open at stop's deadline is answered:
// the writer runs what waited (the gc's last pass, then its own shutdown) and quits at
// once, so it hands the read on rather than waiting for the reader's answer itself.
TEST_F(ActorTest, AReadWaitingBehindABlockOpenAtStopIsAnswered) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto kept = widgets.create(ctx_, {"kept", 1}, with_slug("kept"));
  auto stop = bh_->start(ctx_);
  auto w = bh_->store_writer();
  OpenBlock block(cc, ctx_, [&](const Context& tx) { widgets.create(tx, {"inside", 1}); });
  caf::scoped_actor app{sys_};
  auto read = app->request(w, std::chrono::seconds(10), get_by_slug_request{widget_kind, "kept"});
  // (The gc's or the event log's request may be deferred behind the block too.)
  bool deferred =
      eventually([&] { return ask<store_writer_state>(w, inspect_atom::value).deferred >= 1; });
  ASSERT_TRUE(deferred);
  EXPECT_ERRC(stop(Context{}.with_timeout(300ms)), errc::deadline_exceeded);  // the block
  std::optional<caf::error> failed;
  std::optional<ObjectRow> row;
  read.receive([&](ObjectRow& r) { row = std::move(r); }, [&](caf::error& e) { failed = e; });
  EXPECT_ERRC(block.get(), errc::stopped);
  ASSERT_TRUE(row.has_value()) << (failed ? error_message(*failed) : "");
  EXPECT_EQ(row->meta.id, kept.id);
}

// A second within block waiting behind the one open at stop's deadline does not begin
// once the first is rolled back: stop returns at its deadline, not when the second ends.
TEST_F(ActorTest, ABlockWaitingBehindOneOpenAtStopsDeadlineDoesNotBegin) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto stop = bh_->start(ctx_);
  testing::settle(*bh_, ctx_);
  auto w = bh_->store_writer();
  OpenBlock first(cc, ctx_, [&](const Context& tx) { widgets.create(tx, {"first", 1}); });
  auto before = ask<store_writer_state>(w, inspect_atom::value).deferred;
  std::atomic<bool> second_began{false};
  auto second = std::async(std::launch::async, [&] {
    cc.within(ctx_, [&](const Context& tx) {
      second_began = true;
      widgets.create(tx, {"second", 1});
      first.wait_released(10s);  // bounded: without the fix stop would wait for this
    });
  });
  bool deferred =
      eventually([&] { return ask<store_writer_state>(w, inspect_atom::value).deferred > before; });
  if (!deferred) first.release();
  ASSERT_TRUE(deferred);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(stop(Context{}.with_timeout(200ms)), errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_ERRC(first.get(), errc::stopped);
  EXPECT_ERRC(second.get(), errc::stopped);
  EXPECT_FALSE(second_began);
}

// Blocking calls waiting behind a within block, on a cancellable context or a child of
// one, are woken by its cancellation: each fails cancelled, and nothing of them is
// written. (A lost wake-up would leave them waiting for the block.)
TEST_F(ActorTest, ACancelWakesEveryBlockingCallWaitingOnItsContextOrAChild) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto w = bh_->store_writer();
  OpenBlock block(cc, ctx_, [](const Context&) {});
  auto before = ask<store_writer_state>(w, inspect_atom::value).deferred;
  auto [cctx, cancel] = ctx_.with_cancel();
  auto child = cctx.with_timeout(std::chrono::hours(1));
  constexpr int kCalls = 8;
  std::vector<std::future<errc>> calls;
  for (int i = 0; i < kCalls; ++i)
    calls.push_back(std::async(std::launch::async, [&, i] {
      try {
        widgets.create(i % 2 ? cctx : child, {"late", i});
        return errc{};
      } catch (const Error& e) {
        return e.value();
      }
    }));
  bool waiting = eventually(
      [&] { return ask<store_writer_state>(w, inspect_atom::value).deferred >= before + kCalls; });
  cancel();
  EXPECT_TRUE(waiting) << "the calls never queued behind the block";
  for (auto& call : calls) {
    ASSERT_EQ(call.wait_for(10s), std::future_status::ready) << "a waiting call was not woken";
    EXPECT_EQ(call.get(), errc::cancelled);
  }
  block.release();
  EXPECT_NO_THROW(block.get());
  EXPECT_EQ(widgets.list(ctx_).size(), 0u);
}

TEST_F(ActorTest, RequestsThroughHandlesTakenAfterStopFailStopped) {
  auto stop = bh_->start(ctx_);
  stop(ctx_);
  EXPECT_ERRC(ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)}),
              errc::stopped);
  EXPECT_ERRC(ask<int>(bh_->gc(), collect_atom::value), errc::stopped);
}

// Blocking callers running within blocks back to back keep the writer's queue busy (each
// block is served alone while the others' first writes wait queued). The writer's
// mailbox still gets its turn: an actor's request is answered while they write, not
// after they stop.
TEST_F(ActorTest, AnActorsRequestIsAnsweredWhileBlockingCallersKeepTheWriterBusy) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  std::atomic<bool> answered{false};
  std::atomic<int> writes{0};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i)
    callers.emplace_back([&, i] {
      auto o = widgets.create(ctx_, {"busy", i});
      for (int n = 1; !answered && std::chrono::steady_clock::now() < give_up; n += 2) {
        cc.within(ctx_, [&](const Context& tx) {
          widgets.update(tx, o.id, {"busy", n});
          widgets.update(tx, o.id, {"busy", n + 1});
        });
        writes += 2;
      }
    });
  ASSERT_TRUE(eventually([&] { return writes > 200; }));
  std::optional<ObjectRow> row;
  EXPECT_NO_THROW(
      row = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("actor", 1)}));
  const int writes_before_answer = writes;
  answered = true;
  for (auto& t : callers) t.join();
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(widgets.get(ctx_, row->meta.id).spec.color, "actor");
  EXPECT_GT(writes_before_answer, 200);  // the callers were still writing meanwhile
}

/// The same with plain writes, which keep the writer's queue full without a gap: its
/// mailbox (an actor's request here; the gc's passes and other processes' commits too)
/// is still served between their groups.
TEST_F(ActorTest, AnActorsRequestIsAnsweredWhileBlockingCallersKeepTheQueueFull) {
  Widgets widgets(*bh_, widget_kind);
  std::atomic<bool> answered{false};
  std::atomic<int> writes{0};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i)
    callers.emplace_back([&, i] {
      auto o = widgets.create(ctx_, {"busy", i});
      for (int n = 1; !answered && std::chrono::steady_clock::now() < give_up; ++n) {
        widgets.update(ctx_, o.id, {"busy", n});
        ++writes;
      }
    });
  ASSERT_TRUE(eventually([&] { return writes > 200; }));
  std::optional<ObjectRow> row;
  EXPECT_NO_THROW(
      row = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("actor", 1)}));
  const bool still_writing = std::chrono::steady_clock::now() < give_up;
  answered = true;
  for (auto& t : callers) t.join();
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(widgets.get(ctx_, row->meta.id).spec.color, "actor");
  EXPECT_TRUE(still_writing);  // answered while the callers kept writing
}

TEST_F(ActorTest, ACommitSubscriptionOutlivesAWriterCrashAndEndsWithTheStop) {
  Widgets widgets(*bh_, widget_kind);
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  auto w = bh_->store_writer();
  auto subscribers = [&] {
    return ask<store_writer_state>(bh_->store_writer(), inspect_atom::value).subscribers;
  };
  auto internal = subscribers();
  caf::scoped_actor app{sys_};
  app->send(w, subscribe_atom::value, caf::actor_cast<caf::actor>(app));
  app->send(w, subscribe_atom::value, caf::actor_cast<caf::actor>(app));  // once is enough
  ASSERT_TRUE(eventually([&] { return subscribers() == internal + 1; }));
  auto records_of = [&](ObjectID id) {
    int seen = 0;
    bool more = true;
    while (more)
      app->receive(
          [&](const commit_record& r) {
            for (auto& c : r.changes) seen += c.row.meta.id == id;
          },
          caf::after(std::chrono::milliseconds(300)) >> [&] { more = false; });
    return seen;
  };
  EXPECT_EQ(records_of(widgets.create(ctx_, {"a", 1}).id), 1);
  caf::anon_send_exit(w, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return bh_->store_writer() != w; }));
  EXPECT_EQ(records_of(widgets.create(ctx_, {"b", 1}).id), 1);  // the new writer's commits
  // A subscriber that ends is dropped.
  auto gone = sys_.spawn(
      [](caf::event_based_actor*) -> caf::behavior { return {[](const commit_record&) {}}; });
  caf::anon_send(bh_->store_writer(), subscribe_atom::value, gone);
  ASSERT_TRUE(eventually([&] { return subscribers() == internal + 2; }));
  caf::anon_send_exit(gone, caf::exit_reason::kill);
  EXPECT_TRUE(eventually([&] { return subscribers() == internal + 1; }));
  stop(ctx_);
  bool ended = false;
  while (!ended)
    app->receive([](const commit_record&) {},
                 [&](const watch_ended& e) {
                   EXPECT_EQ(e.reason, errc::stopped);
                   ended = true;
                 },
                 caf::after(std::chrono::seconds(5)) >>
                     [&] {
                       ended = true;
                       ADD_FAILURE();
                     });
  ::testing::internal::GetCapturedStderr();
}

// A watch that ends as it opens (here a resume above the head) answers its request with
// the id before it says that the watch ended: an actor learns which of its watches ended.
TEST_F(ActorTest, AWatchThatEndsAsItOpensRepliesItsIdBeforeItsEnd) {
  auto stop = bh_->start(ctx_);
  auto hub = bh_->watch_hub();
  std::promise<std::vector<std::string>> order;
  sys_.spawn([&order, hub](caf::event_based_actor* self) -> caf::behavior {
    auto seen = std::make_shared<std::vector<std::string>>();
    auto note = [self, seen, &order](std::string what) {
      seen->push_back(std::move(what));
      if (seen->size() == 2) {
        order.set_value(*seen);
        self->quit();
      }
    };
    watch_request r{widget_kind, std::nullopt, caf::actor_cast<caf::actor>(self)};
    r.resume_from = 1000000;
    self->request(hub, caf::infinite, r).then([note](std::uint64_t id) {
      note("reply " + std::to_string(id));
    });
    return {[note](const watch_ended& e) {
      note("ended " + std::to_string(e.subscription) + " " + std::string(to_string(e.reason)));
    }};
  });
  auto f = order.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  auto seen = f.get();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].rfind("reply ", 0), 0u) << seen[0];
  EXPECT_EQ(seen[1], "ended " + seen[0].substr(6) + " watch_too_new");
  stop(ctx_);
}

// A stop while the store writer is being restarted (its connection not open yet) ends
// what the writer's shutdown would: the application's commit subscription hears
// watch_ended, and its watches end as stopped (not as a failed hub, which a subscriber
// would take as a cue to subscribe again).
TEST_F(ActorTest, AStopWhileTheStoreWriterIsRestartedEndsEverySubscriptionAsStopped) {
  auto [cc, stop] = start_idle_widgets();
  caf::scoped_actor app{sys_};
  app->send(bh_->store_writer(), subscribe_atom::value, caf::actor_cast<caf::actor>(app));
  auto id = ask<std::uint64_t>(bh_->watch_hub(), watch_request{widget_kind, std::nullopt, app});
  auto subscribers = ask<store_writer_state>(bh_->store_writer(), inspect_atom::value).subscribers;
  ASSERT_GT(subscribers, 0u);
  WriterReopenHeld held(*bh_);
  ASSERT_TRUE(held.writer_gone());
  stop(ctx_);
  std::map<std::uint64_t, errc> ended;
  bool more = true;
  while (more && ended.size() < 2)
    app->receive([](const commit_record&) {}, [](const object_change&) {},
                 [&](const watch_ended& e) { ended[e.subscription] = e.reason; },
                 caf::after(std::chrono::seconds(5)) >> [&] { more = false; });
  EXPECT_EQ(ended.count(0), 1u) << "the commit subscription did not hear its end";
  ASSERT_EQ(ended.count(id), 1u) << "the watch did not end";
  EXPECT_EQ(ended[id], errc::stopped);
  held.release();
  ::testing::internal::GetCapturedStderr();
  (void)cc;
}

// The gc and the event log spawned again while the store writer restarts (no writer
// yet) hand nothing to it: an application's request to them is refused with
// errc::store, to be asked again, and is served once the writer is back (CAF 0.17
// crashes the process delegating to no actor).
TEST_F(ActorTest, TheGcAndEventLogRespawnedWhileTheWriterRestartsAnswerAskAgain) {
  auto [cc, stop] = start_idle_widgets();
  auto o = Widgets(*bh_, widget_kind).create(ctx_, {"a", 1});
  WriterReopenHeld held(*bh_);
  ASSERT_TRUE(held.writer_gone());
  auto old_gc = bh_->gc();
  auto old_log = bh_->event_log();
  caf::anon_send_exit(old_gc, caf::exit_reason::kill);
  caf::anon_send_exit(old_log, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] {
    return bh_->gc() && bh_->gc() != old_gc && bh_->event_log() && bh_->event_log() != old_log;
  }));
  EXPECT_ERRC(ask<int>(bh_->gc(), collect_atom::value), errc::store);
  EXPECT_ERRC(ask<std::vector<Event>>(bh_->event_log(), list_events_request{o.id}), errc::store);
  EXPECT_ERRC(ask<Event>(bh_->event_log(),
                         record_event_request{widget_kind, o.id, {"", EventType::Normal, "Up"}}),
              errc::store);
  EXPECT_ERRC(ask<int>(bh_->event_log(), sweep_atom::value), errc::store);
  held.release();
  EXPECT_TRUE(eventually([&] {
    try {
      return ask<Event>(bh_->event_log(),
                        record_event_request{widget_kind, o.id, {"", EventType::Normal, "Up"}})
                 .count == 1;
    } catch (const Error&) {
      return false;
    }
  }));
  EXPECT_EQ(ask<int>(bh_->gc(), collect_atom::value), 0);
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
  (void)cc;
}

// A writer that dies while a stop waits for a pass to end: the application's commit
// subscription hears its end once (the writer's death and the stop's last step each
// told it).
TEST_F(ActorTest, AWriterThatDiesWhileAStopDrainsEndsSubscriptionsOnce) {
  std::promise<void> release;
  ::testing::internal::CaptureStderr();
  auto held = start_with_the_worker_held(release.get_future().share());
  ASSERT_TRUE(held.holding);
  caf::scoped_actor app{sys_};
  auto writer = bh_->store_writer();
  app->send(writer, subscribe_atom::value, caf::actor_cast<caf::actor>(app));
  auto stopped = std::async(std::launch::async, [&] { held.stop(ctx_); });
  // The stop has begun once the writer refuses an application's actor request.
  ASSERT_TRUE(eventually([&] {
    try {
      ask<ObjectRow>(writer, create_request{widget_kind, spec("probe", 1)});
      return false;
    } catch (const Error& e) {
      return e.code() == errc::stopped;
    }
  }));
  caf::anon_send_exit(writer, caf::exit_reason::kill);
  release.set_value();
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  int ends = 0;
  bool more = true;
  while (more)
    app->receive([](const commit_record&) {}, [&](const watch_ended&) { ++ends; },
                 caf::after(std::chrono::milliseconds(300)) >> [&] { more = false; });
  EXPECT_EQ(ends, 1);
  ::testing::internal::GetCapturedStderr();
}

TEST_F(ActorTest, TheSchedulerWakesAnApplicationActorAtATimeOfTheBeehivesClock) {
  auto stop = bh_->start(ctx_);
  caf::scoped_actor app{sys_};
  auto wakes = [&](std::chrono::milliseconds within) {
    bool woken = false;
    app->receive([&](wake_atom) { woken = true; }, caf::after(within) >> [] {});
    return woken;
  };
  auto scheduler = bh_->scheduler();
  app->send(scheduler, wake_at_atom::value, caf::actor_cast<caf::actor>(app), clock_->now() + 1h);
  app->send(scheduler, wake_at_atom::value, caf::actor_cast<caf::actor>(app), clock_->now() + 5s);
  // Answered after both (one sender's messages arrive in order).
  app->request(scheduler, std::chrono::seconds(5), inspect_atom::value)
      .receive([](scheduler_state&) {}, [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  clock_->advance(4s);
  EXPECT_FALSE(wakes(200ms));
  clock_->advance(1s);
  EXPECT_TRUE(wakes(5s));
  clock_->advance(1h);  // the later wake_at replaced the first
  EXPECT_FALSE(wakes(200ms));
  stop(ctx_);
}

// A wake is never early, nor late on a ManualClock: a time finer than a millisecond
// (here 1.5 ms ahead) is kept on a ManualClock, and on the system clock rounded up when
// converted to the steady clock the timers run on (cut down, it could wake an actor
// before its time, and an actor asking again for the same time would be answered at
// once, again and again).
TEST_F(ActorTest, TheSchedulerWakesAnActorNoEarlierThanItsTime) {
  auto stop = bh_->start(ctx_);
  caf::scoped_actor app{sys_};
  auto scheduler = bh_->scheduler();
  const auto due = clock_->now() + std::chrono::microseconds(1500);
  app->send(scheduler, wake_at_atom::value, caf::actor_cast<caf::actor>(app), due);
  Time earliest{};
  app->request(scheduler, std::chrono::seconds(5), inspect_atom::value)
      .receive([&](scheduler_state& s) { earliest = s.earliest; },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  EXPECT_EQ(earliest, due);
  clock_->set(due);
  bool woken = false;
  app->receive([&](wake_atom) { woken = true; }, caf::after(std::chrono::seconds(5)) >> [] {});
  EXPECT_TRUE(woken);
  stop(ctx_);

  // On the system clock.
  bh_.reset();
  store_.reset();
  store_ = open_test_store(dir_.file("wall.db"));
  bh_ = std::make_unique<Beehive>(sys_, store_);
  stop = bh_->start(ctx_);
  scheduler = bh_->scheduler();
  int early = 0;
  for (int i = 0; i < 50; ++i) {
    auto at = SystemClock().now() + std::chrono::microseconds(1500 + 17 * i);
    app->send(scheduler, wake_at_atom::value, caf::actor_cast<caf::actor>(app), at);
    bool came = false;
    app->receive([&](wake_atom) { came = true; }, caf::after(std::chrono::seconds(5)) >> [] {});
    ASSERT_TRUE(came) << i;
    if (SystemClock().now() < at) ++early;
  }
  EXPECT_EQ(early, 0);
  stop(ctx_);
}

// A wake asked at a time of the beehive's clock waits for that clock to reach it, even
// when the clock is stepped back meanwhile (here one that stands still until stepped,
// with timers on real time, as on the system clock): it used to come once the time left
// at the ask had passed on the steady clock, an hour early here.
TEST_F(ActorTest, AWakeWaitsForTheBeehivesClockWhenTheClockIsSteppedBack) {
  auto clock = std::make_shared<SteppedClock>();
  bh_.reset();
  store_.reset();
  store_ = open_test_store(dir_.file("stepped.db"));
  bh_ = std::make_unique<Beehive>(sys_, store_, with_clock(clock));
  auto stop = bh_->start(ctx_);
  caf::scoped_actor app{sys_};
  auto due = clock->now() + std::chrono::milliseconds(200);
  app->send(bh_->scheduler(), wake_at_atom::value, caf::actor_cast<caf::actor>(app), due);
  // Handled (in order) before the step.
  app->request(bh_->scheduler(), std::chrono::seconds(5), inspect_atom::value)
      .receive([](scheduler_state& s) { EXPECT_GE(s.wakes, 1u); },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  clock->step(-std::chrono::hours(1));
  bool woken = false;
  app->receive([&](wake_atom) { woken = true; },
               caf::after(std::chrono::milliseconds(700)) >> [] {});
  EXPECT_FALSE(woken) << "woken before the beehive's clock reached its time";
  clock->step(std::chrono::hours(1) + std::chrono::milliseconds(200));
  app->receive([&](wake_atom) { woken = true; }, caf::after(std::chrono::seconds(5)) >> [] {});
  EXPECT_TRUE(woken);
  stop(ctx_);
}

// On the system clock the scheduler ticks itself with delayed messages. A tick that an
// earlier wake overtook stays the only one for its time: each arriving tick used to be
// taken for the last in flight and re-armed the next wake again, so that overtaken
// ticks piled up without end under a steady stream of short wakes (requeue_after,
// backoff) beside long ones (resync, the cadences).
TEST_F(ActorTest, TheSchedulerSendsOneTickPerWakeOnTheSystemClock) {
  auto timers = std::make_shared<const detail::TimerClock>(std::make_shared<SystemClock>());
  auto scheduler = sys_.spawn(detail::scheduler, timers);
  auto woken = std::make_shared<std::atomic<int>>(0);
  auto target = [&] {
    return sys_.spawn([woken](caf::event_based_actor*) -> caf::behavior {
      return {[woken](wake_atom) { ++*woken; }};
    });
  };
  caf::scoped_actor app{sys_};
  std::vector<caf::actor> targets{target()};
  app->send(scheduler, detail::timer_at_atom::value, targets.back(), timers->now() + 1h);
  // Each due before the last: each overtakes every tick in flight.
  for (int i = 0; i < 20; ++i) {
    targets.push_back(target());
    app->send(scheduler, detail::timer_at_atom::value, targets.back(),
              timers->now() + std::chrono::milliseconds(40 - 2 * i));
  }
  ASSERT_TRUE(eventually([&] { return *woken == 20; }));
  std::size_t sent = 0;
  app->request(scheduler, 5s, inspect_atom::value, detail::tick_atom::value)
      .receive([&](std::size_t n) { sent = n; },
               [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  EXPECT_LE(sent, 21u);  // at most one per wake, the hour's included
  for (auto& t : targets) app->send_exit(t, caf::exit_reason::user_shutdown);
  app->send_exit(scheduler, caf::exit_reason::user_shutdown);
}

// An application actor that asked for a wake and exited before it came is let go: the
// scheduler holds nothing for it any more, whether the wake was far off or never, and
// whether the actor exited after asking or before its request arrived. Actors that come
// and go all day leave nothing behind.
TEST_F(ActorTest, TheSchedulerLetsGoOfTheWakesOfActorsThatExited) {
  auto stop = bh_->start(ctx_);
  auto scheduler = bh_->scheduler();
  auto held = [&] { return ask<scheduler_state>(scheduler, inspect_atom::value).wakes; };
  ASSERT_TRUE(eventually([&] { return held() == 2; }));  // the gc's and the event log's
  auto spawn_app = [&] {
    return sys_.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](wake_atom) {}}; });
  };
  std::vector<caf::actor> apps;
  for (int i = 0; i < 10; ++i) {
    apps.push_back(spawn_app());
    caf::anon_send(scheduler, wake_at_atom::value, apps.back(),
                   i % 2 ? clock_->now() + 1h : Time::max());
  }
  ASSERT_TRUE(eventually([&] { return held() == 12; })) << held();
  for (auto& a : apps) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  apps.clear();
  EXPECT_TRUE(eventually([&] { return held() == 2; })) << held();

  // Exited before its request arrived.
  auto gone = spawn_app();
  {
    caf::scoped_actor self{sys_};
    self->monitor(gone);
    caf::anon_send_exit(gone, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {});
  }
  caf::anon_send(scheduler, wake_at_atom::value, gone, clock_->now() + 1h);
  EXPECT_TRUE(eventually([&] { return held() == 2; })) << held();
  // And the ones still there keep theirs.
  auto app = spawn_app();
  caf::anon_send(scheduler, wake_at_atom::value, app, clock_->now() + 1h);
  EXPECT_TRUE(eventually([&] { return held() == 3; })) << held();
  stop(ctx_);
  caf::anon_send_exit(app, caf::exit_reason::user_shutdown);
}

TEST_F(ActorTest, AnApplicationActorWatchesAndRequeues) {
  auto reconciles = std::make_shared<std::atomic<int>>(0);  // outlives late reconciles
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind, [=](auto&, auto&, auto&) {
    ++*reconciles;
    return Result{};
  });
  auto stop = bh_->start(ctx_);
  struct Seen {
    std::mutex mu;
    std::vector<ObjectID> added;
    std::vector<Schedule> schedules;
  };
  auto seen = std::make_shared<Seen>();
  auto app = sys_.spawn([seen](caf::event_based_actor*) -> caf::behavior {
    return {
        [seen](const object_change& c) {
          std::lock_guard lk(seen->mu);
          if (c.type == ChangeType::Added) seen->added.push_back(c.row.meta.id);
        },
        [seen](const schedule_change& s) {
          std::lock_guard lk(seen->mu);
          seen->schedules.push_back(s.schedule);
        },
        [](const watch_ended&) {},
    };
  });
  ask<std::uint64_t>(bh_->watch_hub(), watch_request{widget_kind, std::nullopt, app});
  auto row = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)});
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lk(seen->mu);
    return seen->added.size() == 1 && seen->added[0] == row.meta.id;
  }));
  auto controller = bh_->controller(widget_kind);
  ASSERT_TRUE(controller.has_value());
  EXPECT_TRUE(eventually([&] { return *reconciles == 1; }));
  ask<bool>(*controller, schedule_watch_request{row.meta.id, app});
  EXPECT_TRUE(ask<bool>(*controller, requeue_request{row.meta.id}));
  EXPECT_TRUE(eventually([&] { return *reconciles == 2; }));
  try {
    ask<bool>(*controller, requeue_request{999999});
    ADD_FAILURE() << "requeue of a missing id must be not_found";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
  }
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lk(seen->mu);
    return !seen->schedules.empty();
  }));
  stop(ctx_);
  caf::anon_send_exit(app, caf::exit_reason::user_shutdown);
}

// An application actor that asks twice for one object's schedule holds one watch and
// hears each change once; after it unsubscribes it hears no more of that object, and its
// watch of another object goes on.
TEST_F(ActorTest, AnActorHearsEachScheduleChangeOnceUntilItUnsubscribes) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{10s}; });
  Widgets widgets(*bh_, widget_kind);
  auto a = widgets.create(ctx_, {"a", 1});
  auto b = widgets.create(ctx_, {"b", 1});
  auto stop = bh_->start(ctx_);
  auto settle = [&] { beehive::testing::settle(*bh_, ctx_.with_timeout(10s)); };
  settle();
  struct Seen {
    std::mutex mu;
    std::vector<schedule_change> changes;
  };
  auto seen = std::make_shared<Seen>();
  auto app = sys_.spawn([seen](caf::event_based_actor*) -> caf::behavior {
    return {
        [seen](const schedule_change& c) {
          std::lock_guard lk(seen->mu);
          seen->changes.push_back(c);
        },
        [](caf::get_atom) { return true; },  // answered after what came before it
        [](const watch_ended&) {},
    };
  });
  // What the app heard of `id` since `from` changes, once it has taken every change sent
  // so far (the controller sent them before settle returned; this request comes after).
  auto heard = [&](ObjectID id, std::size_t from) {
    caf::scoped_actor self{sys_};
    self->request(app, 10s, caf::get_atom::value)
        .receive([](bool) {}, [](caf::error& e) { ADD_FAILURE() << error_message(e); });
    std::lock_guard lk(seen->mu);
    std::vector<Schedule> out;
    for (std::size_t i = from; i < seen->changes.size(); ++i)
      if (seen->changes[i].id == id) out.push_back(seen->changes[i].schedule);
    return out;
  };
  auto heard_so_far = [&] {
    heard(0, 0);
    std::lock_guard lk(seen->mu);
    return seen->changes.size();
  };
  auto controller = *bh_->controller(widget_kind);
  caf::scoped_actor self{sys_};
  auto watches = [&] {
    std::size_t n = 0;
    self->request(controller, 10s, inspect_atom::value)
        .receive([&](const controller_state& st) { n = st.schedule_watches; },
                 [](caf::error& e) { ADD_FAILURE() << error_message(e); });
    return n;
  };
  for (auto id : {a.id, a.id, b.id})
    self->request(controller, 10s, schedule_watch_request{id, app})
        .receive([](bool) {}, [](caf::error& e) { ADD_FAILURE() << error_message(e); });
  EXPECT_EQ(watches(), 2u);
  const Schedule due{clock_->now() + 10s};
  EXPECT_EQ(heard(a.id, 0), (std::vector<Schedule>{due, due}));  // the value, at each ask

  auto from = heard_so_far();
  widgets.update(ctx_, a.id, {"a", 2});  // queued, dispatched, requeued after 10 s
  settle();
  const std::vector<Schedule> each_once{Schedule{clock_->now()}, Schedule{}, due};
  EXPECT_EQ(heard(a.id, from), each_once);

  self->send(controller, unsubscribe_atom::value, a.id, app);
  EXPECT_EQ(watches(), 1u);  // asked after the unsubscribe: one sender's messages keep order
  from = heard_so_far();
  widgets.update(ctx_, a.id, {"a", 3});
  widgets.update(ctx_, b.id, {"b", 2});
  settle();
  EXPECT_TRUE(heard(a.id, from).empty());
  EXPECT_EQ(heard(b.id, from), each_once);
  stop(ctx_);
  caf::anon_send_exit(app, caf::exit_reason::user_shutdown);
}

// Schedule watches of an object whose schedule never changes again (settled, or not
// there at all) are let go once they end: streams closed, actors exited. A dashboard
// that opens and closes them all day holds no more than the ones open.
TEST_F(ActorTest, EndedScheduleWatchesAreLetGo) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto o = widgets.create(ctx_, {"a", 1});
  auto stop = bh_->start(ctx_);
  auto controller = bh_->controller(widget_kind);
  ASSERT_TRUE(controller.has_value());
  auto held = [&] {
    return ask<controller_state>(*controller, inspect_atom::value).schedule_watches;
  };
  for (int i = 0; i < 500; ++i) {
    auto s = widgets.watch_schedule(ctx_, i % 2 ? o.id : 999999);
    ASSERT_TRUE(s.next_for(5s).has_value());
  }
  EXPECT_LE(held(), 32u);
  auto open = widgets.watch_schedule(ctx_, o.id);  // still open: kept
  for (int i = 0; i < 100; ++i) widgets.watch_schedule(ctx_, o.id);
  EXPECT_GE(held(), 1u);
  EXPECT_LE(held(), 32u);
  std::vector<caf::actor> apps;
  for (int i = 0; i < 50; ++i) {
    apps.push_back(sys_.spawn(
        [](caf::event_based_actor*) -> caf::behavior { return {[](const schedule_change&) {}}; }));
    ask<bool>(*controller, schedule_watch_request{o.id, apps.back()});
  }
  EXPECT_GE(held(), 51u);
  ask<bool>(*controller, schedule_watch_request{o.id, caf::actor{}});  // nobody: ignored
  for (auto& a : apps) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  apps.clear();
  EXPECT_TRUE(eventually([&] { return held() <= 32u; })) << held();
  stop(ctx_);
}

TEST_F(ActorTest, AGcPassWithNothingToCollectTakesNoWriteTransaction) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto o = widgets.create(ctx_, {"a", 1});
  auto stop = bh_->start(ctx_);
  auto w = bh_->store_writer();
  auto gc = bh_->gc();
  auto passes = [&] { return ask<gc_state>(gc, inspect_atom::value).passes; };
  ASSERT_TRUE(eventually([&] { return passes() >= 1; }));  // the pass at start
  auto idle = ask<store_writer_state>(w, inspect_atom::value).transactions;
  auto before = passes();
  clock_->advance(30s);  // the resync cadence: another pass, idle
  ASSERT_TRUE(eventually(
      [&] { return passes() > before && !ask<gc_state>(gc, inspect_atom::value).running; }));
  EXPECT_EQ(ask<store_writer_state>(w, inspect_atom::value).transactions, idle);
  widgets.remove(ctx_, o.id);  // now there is something to collect, in a transaction
  EXPECT_TRUE(eventually([&] { return !widgets.list(ctx_).size(); }));
  EXPECT_GT(ask<store_writer_state>(w, inspect_atom::value).transactions, idle + 1);
  stop(ctx_);
}

TEST_F(ActorTest, ALargeCascadeRunsAsBoundedPassesThatFinishOnTheirOwn) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets widgets(*bh_, widget_kind);
  auto owner = widgets.create(ctx_, {"owner", 0});
  constexpr int children = 2500;  // two and a half passes' worth
  cc.within(ctx_, [&](const Context& tx) {
    for (int i = 0; i < children; ++i) widgets.create(tx, {"child", i}, with_owner(owner.id));
  });
  auto stop = bh_->start(ctx_);
  auto gc = bh_->gc();
  auto w = bh_->store_writer();
  beehive::testing::settle(*bh_, ctx_);
  auto passes = ask<gc_state>(gc, inspect_atom::value).passes;
  auto transactions = ask<store_writer_state>(w, inspect_atom::value).transactions;
  widgets.remove(ctx_, owner.id);
  // No resync and no other write: each pass's own commit must bring the next.
  beehive::testing::settle(*bh_, ctx_);
  EXPECT_TRUE(widgets.list(ctx_).empty());
  // 2 500 marks and 2 501 removals, at most 1 000 a transaction: at least 6 of them.
  EXPECT_GE(ask<gc_state>(gc, inspect_atom::value).passes - passes, 6u);
  EXPECT_GE(ask<store_writer_state>(w, inspect_atom::value).transactions - transactions, 7u);
  stop(ctx_);
}

TEST_F(ActorTest, InspectShowsTheBackoffLadderOfAFailingObject) {
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) -> Result { throw std::runtime_error("down"); },
      with_resync_interval(0s));
  auto o = Widgets(*bh_, widget_kind).create(ctx_, {"a", 1});
  auto stop = bh_->start(ctx_);
  auto controller = *bh_->controller(widget_kind);
  auto backoff_of = [&] {
    auto st = ask<controller_state>(controller, inspect_atom::value);
    return st.backoff.empty() ? 0ms : st.backoff[0].second;
  };
  for (auto step : {1s, 2s, 4s, 8s}) {
    ASSERT_TRUE(eventually([&] { return backoff_of() == step; })) << step.count();
    auto st = ask<controller_state>(controller, inspect_atom::value);
    EXPECT_EQ(st.gk, widget_kind);
    ASSERT_EQ(st.timers.size(), 1u);
    EXPECT_EQ(st.timers[0], std::make_pair(o.id, clock_->now() + step));
    clock_->advance(step);
  }
  auto hub = ask<watch_hub_state>(bh_->watch_hub(), inspect_atom::value);
  EXPECT_EQ(hub.object_watches, 0u);
  // The pass GC runs at start completes on its own time.
  EXPECT_TRUE(
      eventually([&] { return ask<gc_state>(bh_->gc(), inspect_atom::value).passes >= 1; }));
  stop(ctx_);
}

TEST_F(ActorTest, ACrashedControllerIsRestartedAndItsObjectsStillConverge) {
  auto cc = std::make_shared<std::optional<ControllerClient<WidgetStatus>>>();
  auto failed_once = std::make_shared<std::atomic<bool>>(false);
  *cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [failed_once](const Context& ctx, auto& client, const auto& o) {
        // "flaky" fails its first pass: its retry waits on a backoff timer of the
        // controller that is about to crash, and the clock never moves in this test.
        if (o.spec.color == "flaky" && !failed_once->exchange(true))
          throw std::runtime_error("not yet");
        client.update_status(ctx, o.id, o.generation, WidgetStatus{true});
        return Result{};
      });
  Widgets w(*bh_, widget_kind);
  auto a = w.create(ctx_, {"a", 1});
  auto flaky = w.create(ctx_, {"flaky", 1});
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  ASSERT_TRUE(eventually([&] { return w.get(ctx_, a.id).observed_generation == 1; }));
  ASSERT_TRUE(eventually([&] {
    return *failed_once && w.get_schedule(ctx_, flaky.id).next_requeue_at == clock_->now() + 1s;
  }));
  ASSERT_TRUE(crash_controller(*bh_, widget_kind));
  auto b = w.create(ctx_, {"b", 1});  // reconciled by the new controller
  w.update(ctx_, a.id, {"a", 2});
  EXPECT_TRUE(eventually([&] {
    return w.get(ctx_, b.id).observed_generation == 1 && w.get(ctx_, a.id).observed_generation == 2;
  }));
  // The new controller started from the store: what was unsettled at the crash converges.
  EXPECT_TRUE(eventually([&] { return w.get(ctx_, flaky.id).observed_generation == 1; }));
  auto st = ask<controller_state>(*bh_->controller(widget_kind), inspect_atom::value);
  EXPECT_EQ(st.restarts, 1u);
  stop(ctx_);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the controller of Widget.acme.com failed"), std::string::npos) << err;
}

/// Nothing interrupts a reconcile: a controller that crashes while a pass blocks leaves
/// that pass running. Its successor hands out every object again, but not that one while
/// the pass runs (a controller is never called concurrently for one object); the others
/// go on, and the held one runs once the old pass ends.
TEST_F(ActorTest, AControllerThatReplacesACrashedOneLeavesItsRunningPassesAlone) {
  struct Probe {
    std::mutex mu;
    std::map<std::string, int> inside, calls;
    bool overlapped = false;
  };
  auto probe = std::make_shared<Probe>();
  auto entered = std::make_shared<std::promise<void>>();
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> opened = gate->get_future().share();
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind,
      [probe, entered, opened](const Context& ctx, auto& client, const auto& o) {
        const auto& name = o.spec.color;
        int call = 0;
        {
          std::lock_guard lk(probe->mu);
          if (probe->inside[name]++ > 0) probe->overlapped = true;
          call = ++probe->calls[name];
        }
        if (name == "stuck" && call == 1) {
          entered->set_value();
          opened.wait();
        }
        client.update_status(ctx, o.id, o.generation, WidgetStatus{true});
        std::lock_guard lk(probe->mu);
        --probe->inside[name];
        return Result{};
      },
      with_concurrency(1), with_resync_interval(0s));
  Widgets w(*bh_, widget_kind);
  auto stuck = w.create(ctx_, {"stuck", 1});
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  struct Open {
    std::shared_ptr<std::promise<void>> gate;
    ~Open() { gate->set_value(); }  // however the test ends, before the stop
  } open_gate{gate};
  entered->get_future().wait();
  ASSERT_TRUE(crash_controller(*bh_, widget_kind));
  // The new controller listed the kind and handed "stuck" out, and that pass answered.
  ASSERT_TRUE(eventually([&] {
    auto st = ask<controller_state>(*bh_->controller(widget_kind), inspect_atom::value);
    return st.dispatching && st.in_flight.empty() && st.queue_length == 0;
  }));
  auto a = w.create(ctx_, {"a", 1});  // its one worker is free for the others
  ASSERT_TRUE(eventually([&] { return w.get(ctx_, a.id).observed_generation == 1; }));
  {
    std::lock_guard lk(probe->mu);
    EXPECT_FALSE(probe->overlapped);
    EXPECT_EQ(probe->calls["stuck"], 1);
  }
  gate->set_value();
  open_gate.gate = std::make_shared<std::promise<void>>();
  beehive::testing::settle(*bh_, ctx_.with_timeout(10s));  // the held pass ran, then the new one
  {
    std::lock_guard lk(probe->mu);
    EXPECT_FALSE(probe->overlapped);
    EXPECT_EQ(probe->calls["stuck"], 2);
  }
  EXPECT_EQ(w.get(ctx_, stuck.id).observed_generation, 1);
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

TEST_F(ActorTest, TheRemainingOperationsAsMessages) {
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind,
      [](auto&, auto&, const auto& o) -> Result {
        if (o.spec.color == "bad") throw std::runtime_error("down");
        return {};
      },
      with_resync_interval(0s));
  auto w = bh_->store_writer();
  auto made = ask<ObjectRow>(w, create_or_update_request{widget_kind, "x", spec("x", 1)});
  EXPECT_EQ(made.meta.generation, 1);
  auto again = ask<ObjectRow>(w, create_or_update_request{widget_kind, "x", spec("x", 2)});
  EXPECT_EQ(again.meta.id, made.meta.id);
  EXPECT_EQ(again.meta.generation, 2);
  auto t = ask<ObjectRow>(w, create_request{widget_kind, spec("t", 1), "t", {"keep"}});
  ask<ObjectRow>(w,
                 set_condition_request{widget_kind, t.meta.id, {"Ready", ConditionStatus::True}});
  EXPECT_TRUE(ask<ObjectRow>(w, remove_condition_request{widget_kind, t.meta.id, "Ready"})
                  .meta.conditions.empty());
  EXPECT_TRUE(ask<bool>(w, add_dependency_request{widget_kind, made.meta.id, t.meta.id}));
  EXPECT_TRUE(ask<bool>(w, remove_dependency_request{widget_kind, made.meta.id, t.meta.id}));
  EXPECT_FALSE(ask<bool>(w, remove_dependency_request{widget_kind, made.meta.id, t.meta.id}));
  EXPECT_TRUE(ask<ObjectRow>(w, remove_request{widget_kind, t.meta.id})
                  .meta.deletion_requested_at.has_value());
  EXPECT_TRUE(ask<ObjectRow>(w, remove_finalizer_request{widget_kind, t.meta.id, "keep"})
                  .meta.finalizers.empty());
  auto bad = ask<ObjectRow>(w, create_request{widget_kind, spec("bad", 1)});
  auto stop = bh_->start(ctx_);
  // The gc collects `t` (its pass at start, or the one asked for here).
  ASSERT_TRUE(eventually([&] {
    ask<int>(bh_->gc(), collect_atom::value);
    try {
      ask<ObjectRow>(w, get_request{widget_kind, t.meta.id});
      return false;
    } catch (const Error& e) {
      return e.code() == errc::not_found;
    }
  }));
  // The controller's schedule and the scheduler's timers show the failing object's retry.
  auto controller = *bh_->controller(widget_kind);
  ASSERT_TRUE(eventually([&] {
    return ask<Schedule>(controller, schedule_atom::value, bad.meta.id).next_requeue_at ==
           clock_->now() + 1s;
  }));
  EXPECT_EQ(ask<Schedule>(controller, schedule_atom::value, made.meta.id), Schedule{});
  auto timers = ask<scheduler_state>(bh_->scheduler(), inspect_atom::value);
  EXPECT_GE(timers.wakes, 1u);
  EXPECT_EQ(timers.earliest, clock_->now() + 1s);
  stop(ctx_);
}

TEST_F(ActorTest, AnActorWatchesEventRuns) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto o = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)});
  struct Seen {
    std::mutex mu;
    std::map<EventID, int> counts;
  };
  auto seen = std::make_shared<Seen>();
  auto subscriber = sys_.spawn([seen](caf::event_based_actor*) -> caf::behavior {
    return {[seen](const event_run& r) {
              std::lock_guard lk(seen->mu);
              seen->counts[r.event.id] = r.event.count;
            },
            [](const watch_ended&) {}};
  });
  cc.record_event(ctx_, o.meta.id, {"probe", EventType::Normal, "Up"});  // in the snapshot
  event_watch_request req;
  req.id = o.meta.id;
  req.filter.category = "probe";
  req.subscriber = subscriber;
  EXPECT_GT(ask<std::uint64_t>(bh_->watch_hub(), req), 0u);
  cc.record_event(ctx_, o.meta.id, {"probe", EventType::Normal, "Up"});  // extends the run
  cc.record_event(ctx_, o.meta.id, {"other", EventType::Normal, "Up"});  // filtered out
  auto hub = ask<watch_hub_state>(bh_->watch_hub(), inspect_atom::value);
  EXPECT_EQ(hub.event_watches, 1u);
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lk(seen->mu);
    return seen->counts.size() == 1 && seen->counts.begin()->second == 2;
  }));
  beehive::testing::settle(*bh_, ctx_);
  {
    std::lock_guard lk(seen->mu);
    EXPECT_EQ(seen->counts.size(), 1u);  // not the "other" category's run
  }
  caf::anon_send_exit(subscriber, caf::exit_reason::user_shutdown);
}

// A watch request whose CAF timeout passed before its snapshot was read still made a
// subscription (its reply, the id, was dropped): `unsubscribe_atom` + the subscriber
// ends every one of that actor's subscriptions, open or opening, and no other actor's.
TEST_F(ActorTest, UnsubscribingAnActorEndsEveryOneOfItsSubscriptionsAndNoOthers) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(*bh_, widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  for (int i = 0; i < 200; ++i) w.create(ctx_, {"b", i});
  auto hub = bh_->watch_hub();
  caf::scoped_actor app{sys_}, other{sys_};
  auto app_actor = caf::actor_cast<caf::actor>(app);
  ask<std::uint64_t>(hub, watch_request{widget_kind, std::nullopt, app_actor});
  ask<std::uint64_t>(hub, watch_request{widget_kind, o.id, app_actor, true});
  ask<std::uint64_t>(hub, event_watch_request{o.id, {}, app_actor});
  ask<std::uint64_t>(hub,
                     watch_request{widget_kind, std::nullopt, caf::actor_cast<caf::actor>(other)});
  // One given up on at once: its reply is dropped, whether or not its snapshot was read.
  app->request(hub, std::chrono::nanoseconds(1),
               watch_request{widget_kind, std::nullopt, app_actor})
      .receive([](std::uint64_t) {}, [](caf::error&) {});
  app->send(hub, unsubscribe_atom::value, app_actor);
  auto state = ask<watch_hub_state>(hub, inspect_atom::value);
  EXPECT_EQ(state.object_watches, 1u);  // the other actor's
  EXPECT_EQ(state.event_watches, 0u);
  EXPECT_EQ(state.monitored, 1u);
  beehive::testing::settle(*bh_, ctx_);
  EXPECT_EQ(ask<watch_hub_state>(hub, inspect_atom::value).object_watches, 1u);
}

TEST_F(ActorTest, UpdateStatusAtAnOlderGenerationWithTheStoredStatusWritesNothing) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto w = bh_->store_writer();
  auto o = ask<ObjectRow>(w, create_request{widget_kind, spec("a", 1)});
  ask<ObjectRow>(w, update_request{widget_kind, o.meta.id, spec("a", 2)});
  auto settled =
      ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, 2, R"({"ready":true})"});
  clock_->advance(1s);
  auto stale =
      ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, 1, R"({"ready":true})"});
  EXPECT_EQ(stale.meta.observed_generation, 2);
  EXPECT_EQ(stale.meta.observed_at, settled.meta.observed_at);
  EXPECT_EQ(stale.meta.resource_version, settled.meta.resource_version);
  auto changed =
      ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, 1, R"({"ready":false})"});
  EXPECT_EQ(changed.meta.observed_generation, 1);  // changed bytes: written as given
  EXPECT_GT(changed.meta.resource_version, settled.meta.resource_version);
}

TEST_F(ActorTest, ActorRequestsAreCheckedAsTheBlockingCallsAre) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto w = bh_->store_writer();
  auto o = ask<ObjectRow>(w, create_request{widget_kind, spec("a", 1), "a"});
  const std::string bad = "bad\xff";
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const GroupKind bad_kind{"acme.com", bad};
  // Writes: text that is not UTF-8, specs and statuses that are not JSON text or nest
  // deeper than 512 levels, details that JSON cannot hold.
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{widget_kind, "not json"}), errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{widget_kind, std::string("{}\0", 3)}),
              errc::invalid_argument);  // JSON text has no NUL, not even after the value
  EXPECT_ERRC_WITH(ask<ObjectRow>(w, create_request{widget_kind, deep}), errc::invalid_argument,
                   "512");
  // An integer beyond 64 bits would be stored rounded (nlohmann reads it as a double).
  EXPECT_ERRC_WITH(
      ask<ObjectRow>(w, create_request{widget_kind, R"({"n":123456789012345678901234567890})"}),
      errc::invalid_argument, "integer of 30 digits, beyond 64 bits");
  try {
    ask<ObjectRow>(w, create_request{widget_kind, R"({"n":123456789012345678901234567890})"});
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::Not(::testing::HasSubstr("1234567890")))
        << "said by its size: the number may be a secret";
  }
  EXPECT_ERRC(
      ask<ObjectRow>(w, update_request{widget_kind, o.meta.id, R"({"n":-9223372036854775809})"}),
      errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{widget_kind, spec("b", 1), bad}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{widget_kind, spec("b", 1), std::string("n\0ul", 4)}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{widget_kind, spec("b", 1), {}, {bad}}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{bad_kind, spec("b", 1)}), errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_request{widget_kind, spec("b", 1), std::string(513, 's')}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, update_request{widget_kind, o.meta.id, R"({"size":)"}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, create_or_update_request{widget_kind, bad, spec("b", 1)}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<get_or_create_reply>(w, get_or_create_request{widget_kind, "g", deep}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<bool>(w, remove_by_slug_request{widget_kind, bad}), errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, 1,
                                                      std::string(R"({"ready":true})") + '\0'}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, 1, "[nope"}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, 1, deep}),
              errc::invalid_argument);
  EXPECT_ERRC(
      ask<ObjectRow>(w, set_condition_request{widget_kind, o.meta.id, {"", ConditionStatus::True}}),
      errc::invalid_argument);
  EXPECT_ERRC(
      ask<ObjectRow>(
          w, set_condition_request{widget_kind, o.meta.id, {"Ready", ConditionStatus::True, bad}}),
      errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, remove_condition_request{widget_kind, o.meta.id, bad}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<ObjectRow>(w, remove_finalizer_request{widget_kind, o.meta.id, bad}),
              errc::invalid_argument);
  EXPECT_ERRC(
      ask<Event>(w, record_event_request{widget_kind, o.meta.id, {"", EventType::Normal, bad}}),
      errc::invalid_argument);
  EventSpec nan_detail{"", EventType::Normal, "Probe"};
  nan_detail.detail = {{"ms", std::numeric_limits<double>::quiet_NaN()}};
  EXPECT_ERRC(ask<Event>(w, record_event_request{widget_kind, o.meta.id, nan_detail}),
              errc::invalid_argument);
  // A detail nested deep enough to overflow a stack when copied is refused before anything copies
  // it (a copy recurses once per level: it overflowed the writer's stack), alone and inside a
  // transaction. (Sent to the event log: TheEventLogAggregatesRunsAndSweepsRetention.)
  auto deep_detail = [&] {
    EventSpec e{"", EventType::Normal, "Probe"};
    e.detail = nested_json(stack_overflowing_depth);
    return record_event_request{widget_kind, o.meta.id, std::move(e)};
  };
  EXPECT_ERRC_WITH(ask<Event>(w, deep_detail()), errc::invalid_argument, "512");
  transaction_request deep_tx;  // not from a list: that would copy the detail
  deep_tx.writes.emplace_back(deep_detail());
  EXPECT_ERRC_WITH(ask<transaction_reply>(w, std::move(deep_tx)), errc::invalid_argument, "512");
  // A transaction refuses as a whole, naming the write.
  EXPECT_ERRC_WITH(
      ask<transaction_reply>(w, transaction_request{{create_request{widget_kind, spec("t", 1), "t"},
                                                     create_request{widget_kind, deep}}}),
      errc::invalid_argument, "write 1");
  // Reads that take text.
  EXPECT_ERRC(ask<ObjectRow>(w, get_by_slug_request{widget_kind, bad}), errc::invalid_argument);
  list_events_request by_category{o.meta.id};
  by_category.filter.category = bad;
  EXPECT_ERRC(ask<std::vector<Event>>(w, by_category), errc::invalid_argument);
  // Watches that take text.
  auto hub = bh_->watch_hub();
  EXPECT_ERRC(ask<std::uint64_t>(hub, watch_request{bad_kind, std::nullopt, sys_.spawn([] {})}),
              errc::invalid_argument);
  // As the Client's: a kind over the names' bound, and a negative resume point (it read
  // as one below the log's horizon: accepted, then ended as watch_too_old).
  EXPECT_ERRC(
      ask<std::uint64_t>(
          hub, watch_request{{"acme.com", std::string(513, 'k')}, std::nullopt, sys_.spawn([] {})}),
      errc::invalid_argument);
  EXPECT_ERRC(ask<std::uint64_t>(
                  hub, watch_request{widget_kind, std::nullopt, sys_.spawn([] {}), false, "", -1}),
              errc::invalid_argument);
  event_watch_request bad_reason{o.meta.id};
  bad_reason.filter.reason = bad;
  bad_reason.subscriber = sys_.spawn([] {});
  EXPECT_ERRC(ask<std::uint64_t>(hub, bad_reason), errc::invalid_argument);
  // Numbers outside their domain: relation and load bits that are not LoadOption's (a
  // relation of 0 read as "owned", unknown load bits were dropped), negative schema
  // versions (stored as given, then converted "up" from them) and a negative observed
  // generation (recorded as given).
  for (unsigned relation : {0u, 3u, unsigned{LoadOption::events}, 1u << 20}) {
    SCOPED_TRACE(relation);
    EXPECT_ERRC(ask<std::vector<Ref>>(w, relation_request{o.meta.id, relation}),
                errc::invalid_argument);
  }
  EXPECT_ERRC(ask<ObjectRow>(w, get_request{widget_kind, o.meta.id, 1u << 20}),
              errc::invalid_argument);
  EXPECT_ERRC(ask<std::vector<ObjectRow>>(w, list_request{widget_kind, 64}),
              errc::invalid_argument);
  create_request unversioned{widget_kind, spec("v", 1)};
  unversioned.spec_version = -1;
  EXPECT_ERRC_WITH(ask<ObjectRow>(w, unversioned), errc::invalid_argument, "schema version");
  update_status_request negative_status{widget_kind, o.meta.id, 0, R"({"ready":true})"};
  negative_status.status_version = -1;
  EXPECT_ERRC(ask<ObjectRow>(w, negative_status), errc::invalid_argument);
  EXPECT_ERRC_WITH(
      ask<ObjectRow>(w, update_status_request{widget_kind, o.meta.id, -3, R"({"ready":true})"}),
      errc::invalid_argument, "negative");
  Condition stale{"Ready", ConditionStatus::True};
  stale.observed_generation = -1;
  EXPECT_ERRC(ask<ObjectRow>(w, set_condition_request{widget_kind, o.meta.id, stale}),
              errc::invalid_argument);
  // A negative event limit (SQLite would read it as none, PostgreSQL refuses it).
  list_events_request negative{o.meta.id};
  negative.filter.limit = -1;
  EXPECT_ERRC(ask<std::vector<Event>>(w, negative), errc::invalid_argument);
  event_watch_request negative_watch{o.meta.id, negative.filter, sys_.spawn([] {})};
  EXPECT_ERRC(ask<std::uint64_t>(hub, negative_watch), errc::invalid_argument);
  // Nothing was written.
  auto all = ask<std::vector<ObjectRow>>(w, list_request{widget_kind});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].meta.resource_version, o.meta.resource_version);
  EXPECT_TRUE(ask<std::vector<Event>>(w, list_events_request{o.meta.id}).empty());
  // The integers at 64 bits' ends are stored digit for digit.
  const std::string ends = R"({"max":18446744073709551615,"min":-9223372036854775808})";
  auto stored = ask<ObjectRow>(w, create_request{widget_kind, ends});
  EXPECT_EQ(ask<ObjectRow>(w, get_request{widget_kind, stored.meta.id}).spec, ends);
}

TEST_F(ActorTest, InspectShowsQueuesSessionsAndPendingChanges) {
  std::promise<void> release;
  auto [cc, stop, controller, holding] = start_with_the_worker_held(release.get_future().share());
  ASSERT_TRUE(holding);
  Widgets widgets(*bh_, widget_kind);
  auto state = [&] { return ask<controller_state>(controller, inspect_atom::value); };
  widgets.create(ctx_, {"a", 1});
  widgets.create(ctx_, {"b", 1});
  EXPECT_TRUE(eventually([&] { return state().queue_length == 2; }));

  // A stream nobody reads holds its changes: the hub reports them pending.
  auto s = widgets.watch_list(ctx_);
  EXPECT_TRUE(eventually(
      [&] { return ask<watch_hub_state>(bh_->watch_hub(), inspect_atom::value).pending == 3; }));

  // A within block holds the writer's session; a write sent meanwhile waits for it.
  auto w = bh_->store_writer();
  std::promise<void> entered, leave;
  auto leaving = leave.get_future().share();
  std::thread block([&] {
    cc.within(ctx_, [&](const Context&) {
      entered.set_value();
      leaving.wait();
    });
  });
  entered.get_future().wait();
  auto session = ask<store_writer_state>(w, inspect_atom::value);
  EXPECT_NE(session.session, 0u);
  caf::scoped_actor self{sys_};
  self->send(w, create_request{widget_kind, spec("c", 1)});
  EXPECT_TRUE(
      eventually([&] { return ask<store_writer_state>(w, inspect_atom::value).deferred == 1; }));
  leave.set_value();
  block.join();
  EXPECT_TRUE(eventually([&] {
    auto st = ask<store_writer_state>(w, inspect_atom::value);
    return st.session == 0 && st.deferred == 0;
  }));

  release.set_value();
  EXPECT_TRUE(eventually([&] {
    auto st = state();
    return st.in_flight.empty() && st.queue_length == 0;
  }));
  stop(ctx_);
}

// A requeue asked while the beehive stops (its controller draining the passes in flight)
// would never run: it says `stopped`, as the blocking Client's does.
TEST_F(ActorTest, ARequeueRequestWhileTheBeehiveStopsSaysStopped) {
  std::promise<void> release;
  auto [cc, stop, controller, holding] = start_with_the_worker_held(release.get_future().share());
  ASSERT_TRUE(holding);
  auto other = Widgets(*bh_, widget_kind).create(ctx_, {"other", 1});
  auto stopping = std::async(std::launch::async, [&, &stop = stop] { stop(ctx_); });
  ASSERT_TRUE(eventually(
      [&] { return !ask<controller_state>(controller, inspect_atom::value).dispatching; }));
  EXPECT_ERRC(ask<bool>(controller, requeue_request{other.id}), errc::stopped);
  release.set_value();
  stopping.get();
}

// Once stop began, the application's actor requests are refused as its Client calls
// are (the passes in flight finish their work; nothing new is taken on).
TEST_F(ActorTest, ActorRequestsWhileTheBeehiveStopsSayStopped) {
  std::promise<void> release;
  auto [cc, stop, controller, holding] = start_with_the_worker_held(release.get_future().share());
  ASSERT_TRUE(holding);
  auto other = Widgets(*bh_, widget_kind).create(ctx_, {"other", 1});
  auto writer = bh_->store_writer();
  auto hub = bh_->watch_hub();
  auto stopping = std::async(std::launch::async, [&, &stop = stop] { stop(ctx_); });
  // The writer and the hub are told before the controllers (their mailboxes keep order).
  ASSERT_TRUE(eventually(
      [&] { return !ask<controller_state>(controller, inspect_atom::value).dispatching; }));
  EXPECT_ERRC(ask<ObjectRow>(writer, create_request{widget_kind, spec("late", 1)}), errc::stopped);
  EXPECT_ERRC(ask<ObjectRow>(writer, get_request{widget_kind, other.id}), errc::stopped);
  EXPECT_ERRC(ask<transaction_reply>(
                  writer, transaction_request{{create_request{widget_kind, spec("late", 2)}}}),
              errc::stopped);
  EXPECT_ERRC(ask<std::uint64_t>(hub, watch_request{widget_kind, std::nullopt, sys_.spawn([] {})}),
              errc::stopped);
  release.set_value();
  stopping.get();
  Beehive after(sys_, store_);  // nothing late was written
  EXPECT_EQ(Widgets(after, widget_kind).list(ctx_).size(), 2u);
}

// Removing queued objects takes them out of the queue: its length counts the others at
// once, the removed ones never reach a worker, and each other one does, once (a removal
// of most of a long queue, as a cleanup deleting a whole collection does).
TEST_F(ActorTest, RemovedQueuedObjectsLeaveTheQueueAndAreNeverReconciled) {
  std::promise<void> release;
  auto seen = std::make_shared<std::map<ObjectID, int>>();
  auto mu = std::make_shared<std::mutex>();
  auto [cc, stop, controller, holding] =
      start_with_the_worker_held(release.get_future().share(), [seen, mu](ObjectID id) {
        std::lock_guard lk(*mu);
        ++(*seen)[id];
      });
  ASSERT_TRUE(holding);
  Widgets widgets(*bh_, widget_kind);
  auto state = [&] { return ask<controller_state>(controller, inspect_atom::value); };
  std::vector<ObjectID> kept, removed;
  for (int i = 0; i < 300; ++i)
    (i % 6 == 0 ? kept : removed).push_back(widgets.create(ctx_, {"q", i}).id);
  ASSERT_TRUE(eventually([&] { return state().queue_length == 300; }));
  for (std::size_t i = 0; i < removed.size(); ++i) {
    widgets.remove(ctx_, removed[i]);
    if (i == 9) {
      EXPECT_TRUE(eventually([&] { return state().queue_length == 290; }));
    }
  }
  EXPECT_TRUE(eventually([&] { return state().queue_length == kept.size(); }));
  release.set_value();
  EXPECT_TRUE(eventually([&] {
    auto st = state();
    return st.in_flight.empty() && st.queue_length == 0;
  }));
  stop(ctx_);
  std::lock_guard lk(*mu);
  for (auto id : removed) EXPECT_EQ(seen->count(id), 0u) << id;
  for (auto id : kept) EXPECT_EQ((*seen)[id], 1) << id;
}

// An actor's requeue_request whose controller crashes while it checks the id (the read
// is slow) is answered stopped, as a request to the old handle is: not left waiting for
// the requester's own timeout.
TEST_F(ActorTest, ARequeueRequestWhoseControllerCrashesMidCheckIsAnsweredStopped) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto row = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)});
  auto stop = bh_->start(ctx_);
  auto controller = *bh_->controller(widget_kind);
  std::optional<errc> answer;
  {
    HeldReader held(*bh_->core(), 20s);
    caf::scoped_actor self{sys_};
    auto requeue = self->request(controller, 10s, requeue_request{row.meta.id});
    // Sent after the requeue, so answered after it: the requeue is parked by then.
    ask<controller_state>(controller, inspect_atom::value);
    ASSERT_TRUE(crash_controller(*bh_, widget_kind));
    requeue.receive([&](bool) { answer = errc::invalid_argument; },
                    [&](caf::error& e) { answer = to_errc(e).value_or(errc::store); });
  }
  EXPECT_EQ(answer, std::optional<errc>(errc::stopped));
  stop(ctx_);
}

TEST_F(ActorTest, TheEventLogAggregatesRunsAndSweepsRetention) {
  bh_.reset();
  bh_ = std::make_unique<Beehive>(sys_, store_, with_clock(clock_), with_event_retention(2, 0s));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto o = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)});
  auto stop = bh_->start(ctx_);
  auto log = bh_->event_log();
  auto state = [&] { return ask<event_log_state>(log, inspect_atom::value); };
  ASSERT_TRUE(eventually([&] { return state().sweeps >= 1; }));  // the sweep at start
  auto record = [&](const std::string& category, EventType type, const std::string& reason) {
    return ask<Event>(log, record_event_request{widget_kind, o.meta.id, {category, type, reason}});
  };
  EXPECT_EQ(record("probe", EventType::Normal, "Up").count, 1);
  EXPECT_EQ(record("probe", EventType::Normal, "Up").count, 2);  // the run extends
  {  // passed on uncopied: the writer refuses it before anything recurses over it
    EventSpec deep{"probe", EventType::Normal, "Up"};
    deep.detail = nested_json(stack_overflowing_depth);
    EXPECT_ERRC_WITH(ask<Event>(log, record_event_request{widget_kind, o.meta.id, std::move(deep)}),
                     errc::invalid_argument, "512");
  }
  EXPECT_EQ(record("probe", EventType::Warning, "Down").count, 1);
  EXPECT_EQ(record("other", EventType::Normal, "Up").count, 1);          // its own timeline
  EXPECT_EQ(record("probe", EventType::Normal, "Up").count, 1);          // a new run after Down
  cc.record_event(ctx_, o.meta.id, {"probe", EventType::Normal, "Up"});  // the blocking way
  auto probe = ask<std::vector<Event>>(log, list_events_request{o.meta.id, in_category("probe")});
  ASSERT_EQ(probe.size(), 3u);
  EXPECT_EQ(probe[0].count, 2);
  EXPECT_EQ(probe[0].reason, "Up");
  EXPECT_TRUE(eventually([&] {
    auto st = state();
    return st.runs_started == 4 && st.runs_extended == 2;
  }));
  // A sweep keeps the two newest runs of each (object, category).
  EXPECT_EQ(ask<int>(log, sweep_atom::value), 1);
  probe = ask<std::vector<Event>>(log, list_events_request{o.meta.id, in_category("probe")});
  ASSERT_EQ(probe.size(), 2u);
  EXPECT_EQ(probe[0].reason, "Up");
  EXPECT_EQ(probe[1].reason, "Down");
  EXPECT_EQ(
      ask<std::vector<Event>>(log, list_events_request{o.meta.id, in_category("other")}).size(),
      1u);
  auto st = state();
  EXPECT_GE(st.sweeps, 2u);
  EXPECT_EQ(st.trimmed, 1u);
  EXPECT_EQ(ask<int>(log, sweep_atom::value), 0);  // nothing more to trim
  stop(ctx_);
}

// Idle, a beehive writes nothing: a sweep that finds no run written since the last one
// and none old enough takes no write transaction.
TEST_F(ActorTest, ARetentionSweepWithNothingToTrimWritesNothing) {
  bh_.reset();
  bh_ = std::make_unique<Beehive>(sys_, store_, with_clock(clock_), with_event_retention(2, 1h));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto o = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)});
  auto stop = bh_->start(ctx_);
  auto log = bh_->event_log();
  auto w = bh_->store_writer();
  auto transactions = [&] { return ask<store_writer_state>(w, inspect_atom::value).transactions; };
  beehive::testing::settle(*bh_, ctx_);
  for (auto reason : {"Up", "Down", "Up"})
    cc.record_event(ctx_, o.meta.id, {"probe", EventType::Normal, reason});
  EXPECT_EQ(ask<int>(log, sweep_atom::value), 1);
  auto before = transactions();
  EXPECT_EQ(ask<int>(log, sweep_atom::value), 0);
  EXPECT_EQ(transactions(), before);
  clock_->advance(30min);  // the runs are half as old as the bound
  EXPECT_EQ(ask<int>(log, sweep_atom::value), 0);
  beehive::testing::settle(*bh_, ctx_);
  EXPECT_EQ(transactions(), before);
  // Now they are too old. The advance also makes the cadence's sweep due: it or the one
  // asked for here trims them (one answers the ask when it starts after it), in one
  // transaction either way.
  clock_->advance(31min);
  const int removed = ask<int>(log, sweep_atom::value);
  EXPECT_TRUE(removed == 2 || removed == 0) << removed;
  EXPECT_EQ(transactions(), before + 1);
  EXPECT_TRUE(Widgets(*bh_, widget_kind).list_events(ctx_, o.meta.id).empty());
  stop(ctx_);
}

TEST_F(ActorTest, ACrashedSchedulerIsRestartedWithEveryActorThatHoldsIt) {
  // A pass that fails waits for its backoff timer, which only the scheduler fires.
  auto fails_left = std::make_shared<std::atomic<int>>(2);
  Widgets w(*bh_, widget_kind);
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [fails_left](const Context& ctx, auto& client, const auto& o) {
        if (fails_left->fetch_sub(1) > 0) throw std::runtime_error("not yet");
        client.update_status(ctx, o.id, o.generation, WidgetStatus{true});
        return Result{};
      });
  auto a = w.create(ctx_, {"a", 1});
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  ASSERT_TRUE(eventually([&] { return w.get_schedule(ctx_, a.id).next_requeue_at != Time{}; }));
  auto old_scheduler = bh_->scheduler();
  auto old_controller = *bh_->controller(widget_kind);
  auto old_gc = bh_->gc();
  auto old_log = bh_->event_log();
  caf::anon_send_exit(old_scheduler, caf::exit_reason::kill);  // a crash
  // Its restart group: the scheduler, the controllers, the gc and the event log.
  ASSERT_TRUE(eventually([&] {
    auto c = bh_->controller(widget_kind);
    return bh_->scheduler() != old_scheduler && c && *c != old_controller && bh_->gc() != old_gc &&
           bh_->event_log() != old_log;
  }));
  // The new controller lists the kind again; its failed pass is retried on the new
  // scheduler's timers as the clock moves.
  for (int i = 0; i < 20 && w.get(ctx_, a.id).observed_generation != 1; ++i) {
    clock_->advance(30s);
    eventually([&] { return w.get(ctx_, a.id).observed_generation == 1; }, 200ms);
  }
  EXPECT_EQ(w.get(ctx_, a.id).observed_generation, 1);
  stop(ctx_);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the scheduler failed"), std::string::npos) << err;
}

// A controller replaced while its pass ran (here it crashed) leaves the pass running on
// its worker, unknown to its successor: stop waits for it as for any reconcile in flight,
// within its context.
TEST_F(ActorTest, StopWaitsForAPassThatACrashedControllerLeftRunning) {
  auto entered = std::make_shared<std::promise<void>>();
  std::promise<void> release;
  auto released = release.get_future().share();
  auto first = std::make_shared<std::atomic<bool>>(true);
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [entered, released, first](auto&, auto&, auto&) {
        if (first->exchange(false)) {
          entered->set_value();
          released.wait();  // ignores its context, as a reconcile stuck in I/O would
        }
        return Result{};
      });
  Widgets(*bh_, widget_kind).create(ctx_, {"a", 1});
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  entered->get_future().wait();
  auto old = *bh_->controller(widget_kind);
  caf::anon_send_exit(old, caf::exit_reason::kill);  // a crash
  ASSERT_TRUE(eventually([&] {
    auto c = bh_->controller(widget_kind);
    return c && *c != old;
  }));
  EXPECT_ERRC(stop(Context{}.with_timeout(300ms)), errc::deadline_exceeded);
  release.set_value();
  ::testing::internal::GetCapturedStderr();
}

TEST_F(ActorTest, ACrashedEventLogIsRestartedAndKeepsWorking) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto o = ask<ObjectRow>(bh_->store_writer(), create_request{widget_kind, spec("a", 1)});
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  auto old = bh_->event_log();
  ask<Event>(old, record_event_request{widget_kind, o.meta.id, {"", EventType::Normal, "Up"}});
  caf::anon_send_exit(old, caf::exit_reason::kill);  // a crash
  ASSERT_TRUE(eventually([&] {
    auto now = bh_->event_log();
    return now && now != old;
  }));
  auto log = bh_->event_log();
  auto ev =
      ask<Event>(log, record_event_request{widget_kind, o.meta.id, {"", EventType::Normal, "Up"}});
  EXPECT_EQ(ev.count, 2);  // the run committed before the crash is kept and extended
  EXPECT_EQ(ask<int>(log, sweep_atom::value), 0);
  stop(ctx_);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the event log failed"), std::string::npos) << err;
}

TEST_F(ActorTest, ACrashedWatchHubEndsItsStreamsAndANewWatchStartsOver) {
  Widgets w(*bh_, widget_kind);
  auto a = w.create(ctx_, {"a", 1});
  auto s = w.watch_list(ctx_);
  ASSERT_TRUE(s.next_for(5s).has_value());  // the snapshot
  ::testing::internal::CaptureStderr();
  auto old = bh_->watch_hub();
  caf::anon_send_exit(old, caf::exit_reason::kill);  // a crash
  EXPECT_FALSE(s.next_for(5s).has_value());
  EXPECT_EQ(s.error(), make_error_code(errc::store));
  ASSERT_TRUE(eventually([&] { return bh_->watch_hub() != old; }));
  auto again = w.watch_list(ctx_);
  auto first = again.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->object.id, a.id);
  w.update(ctx_, a.id, {"a", 2});
  auto live = again.next_for(5s);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->object.spec.size, 2);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the watch hub failed"), std::string::npos) << err;
}

// Beehive's own actors that crash and are restarted leave no subscription behind: the
// writer drops a dead one's, as it does an application subscriber's, instead of testing
// every commit against its filter and sending it to the dead actor for ever.
TEST_F(ActorTest, RestartedControllersAndCollectorsLeaveNoSubscriptionBehind) {
  auto stop = start_idle_widgets().second;
  auto subscribers = [&] {
    return ask<store_writer_state>(bh_->store_writer(), inspect_atom::value).subscribers;
  };
  const auto before = subscribers();
  for (int i = 0; i < 3; ++i) {
    for (caf::actor victim :
         {caf::actor_cast<caf::actor>(bh_->gc()), caf::actor_cast<caf::actor>(bh_->event_log()),
          caf::actor_cast<caf::actor>(*bh_->controller(widget_kind))}) {
      caf::anon_send_exit(victim, caf::exit_reason::kill);
      ASSERT_TRUE(eventually([&] {
        return bh_->gc() && bh_->event_log() && bh_->controller(widget_kind) &&
               caf::actor_cast<caf::actor>(bh_->gc()) != victim &&
               caf::actor_cast<caf::actor>(bh_->event_log()) != victim &&
               caf::actor_cast<caf::actor>(*bh_->controller(widget_kind)) != victim;
      }));
    }
  }
  EXPECT_TRUE(eventually([&] { return subscribers() == before; }))
      << subscribers() << " subscribers, " << before << " before the crashes";
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

TEST_F(ActorTest, ACrashedStoreWriterIsRestartedAndNothingCommittedIsLost) {
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](const Context& ctx, auto& client, const auto& o) {
        client.update_status(ctx, o.id, o.generation, WidgetStatus{true});
        return Result{};
      });
  Widgets w(*bh_, widget_kind);
  auto a = w.create(ctx_, {"a", 1}, with_slug("a"));
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  ASSERT_TRUE(eventually([&] { return w.get(ctx_, a.id).observed_generation == 1; }));
  auto s = w.watch_list(ctx_);
  auto old = bh_->store_writer();
  auto old_gc = bh_->gc();
  auto old_log = bh_->event_log();
  caf::anon_send_exit(old, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return bh_->store_writer() != old; }));
  auto b = w.create(ctx_, {"b", 1}, with_slug("b"));  // served by the new writer
  EXPECT_EQ(w.get_by_slug(ctx_, "a").spec.size, 1);   // committed before: still there
  EXPECT_TRUE(eventually([&] { return w.get(ctx_, b.id).observed_generation == 1; }));
  bool saw_b = false;
  while (auto c = s.next_for(2s))  // the hub follows the new writer too
    if (c->object.id == b.id) {
      saw_b = true;
      break;
    }
  EXPECT_TRUE(saw_b);
  // The gc and the event log are replaced with ones that talk to the new writer.
  ASSERT_TRUE(eventually([&] { return bh_->gc() != old_gc && bh_->event_log() != old_log; }));
  auto ev = ask<Event>(bh_->event_log(),
                       record_event_request{widget_kind, b.id, {"", EventType::Normal, "Up"}});
  EXPECT_EQ(ev.count, 1);
  EXPECT_EQ(ask<int>(bh_->event_log(), sweep_atom::value), 0);
  w.remove(ctx_, b.id);
  EXPECT_TRUE(eventually([&] {
    ask<int>(bh_->gc(), collect_atom::value);
    return w.list(ctx_).size() == 1;
  }));
  stop(ctx_);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the store writer failed"), std::string::npos) << err;
}

// A within block open when the store_writer crashed is over: its later writes fail with
// errc::store, and they never join a block another caller opens on the restarted writer,
// even when that writer crashes too (with the later block open).
TEST_F(ActorTest, ABlockOpenWhenTheStoreWriterCrashedNeverJoinsALaterBlock) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(*bh_, widget_kind);
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  std::promise<void> in1, go1, in2, go2;
  std::atomic<bool> first_committed{false};
  std::atomic<errc> first_error{errc{}};  // none yet
  std::thread first([&] {
    try {
      cc.within(ctx_, [&](const Context& tx) {
        w.create(tx, {"first", 1}, with_slug("first-a"));
        in1.set_value();
        go1.get_future().wait();
        w.create(tx, {"first", 2}, with_slug("first-b"));
      });
      first_committed = true;
    } catch (const Error& e) {
      first_error = e.value();
    }
  });
  in1.get_future().wait();
  auto old = bh_->store_writer();
  caf::anon_send_exit(old, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return bh_->store_writer() != old; }));
  std::thread second([&] {
    EXPECT_THROW(cc.within(ctx_,
                           [&](const Context& tx) {
                             w.create(tx, {"second", 1}, with_slug("second"));
                             in2.set_value();
                             go2.get_future().wait();
                             throw std::runtime_error("the second block gives up");
                           }),
                 std::runtime_error);
  });
  in2.get_future().wait();
  auto restarted = bh_->store_writer();
  caf::anon_send_exit(restarted, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return bh_->store_writer() != restarted; }));
  go1.set_value();
  first.join();
  go2.set_value();
  second.join();
  EXPECT_FALSE(first_committed);
  // The library's failure, not the caller's misuse of a context (invalid_argument).
  EXPECT_EQ(first_error.load(), errc::store);
  for (auto slug : {"first-a", "first-b", "second"})
    EXPECT_ERRC(w.get_by_slug(ctx_, slug), errc::not_found);
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

// A store writer restarted as the beehive stops has its connection opened after the
// stop, and here after the application dropped the beehive and the store (its actor
// system runs on): the opening must not use a store that is gone.
TEST_F(ActorTest, AWriterConnectionOpenedAfterTheBeehiveWentOutlivesNothing) {
  auto [cc, stop] = start_idle_widgets();
  WriterReopenHeld held(*bh_);
  ASSERT_TRUE(held.writer_gone());
  stop(ctx_);
  bh_.reset();
  store_.reset();
  held.release();
  sys_.await_all_actors_done();  // the opener has opened, and its answer was dropped
  ::testing::internal::GetCapturedStderr();
  (void)cc;
}

// Writes waiting behind a block when the store_writer crashed are the restarted writer's
// to serve: the beehive runs on, and so do they.
TEST_F(ActorTest, WritesWaitingBehindABlockWhenTheStoreWriterCrashedAreServedByItsSuccessor) {
  auto [cc, stop] = start_idle_widgets();
  Widgets w(*bh_, widget_kind);
  OpenBlock block(
      cc, ctx_,
      [&](const Context& tx) {
        w.create(tx, {"block", 1});
      },
      [&](const Context& tx) {
        w.create(tx, {"block", 2});
      });
  auto old = bh_->store_writer();
  auto before = ask<store_writer_state>(old, inspect_atom::value).deferred;
  auto waiting = std::async(std::launch::async, [&] {
    return w.create(ctx_.with_timeout(20s), {"waiting", 1}, with_slug("waiting"));
  });
  auto later_block = std::async(std::launch::async, [&] {
    cc.within(ctx_.with_timeout(20s), [&](const Context& tx) {
      w.create(tx, {"later block", 1}, with_slug("later"));
    });
  });
  bool deferred = eventually(
      [&] { return ask<store_writer_state>(old, inspect_atom::value).deferred >= before + 2; });
  if (!deferred) block.release();
  ASSERT_TRUE(deferred);
  caf::anon_send_exit(old, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return bh_->store_writer() != old; }));
  ObjectID written{};
  EXPECT_NO_THROW(written = waiting.get().id);
  EXPECT_NO_THROW(later_block.get());
  EXPECT_THROW(block.get(), Error);  // its session went with the writer
  EXPECT_EQ(w.get_by_slug(ctx_, "waiting").id, written);
  EXPECT_NO_THROW(w.get_by_slug(ctx_, "later"));
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

// A writer that crashed while its shutdown waited behind a block is restarted like any
// other: its state's destructor used to run the shutdown, which closed the queue for
// good (every later write failed as stopped while the beehive ran) and deferred the
// writes it took again into the list it was walking.
TEST_F(ActorTest, AWriterThatCrashedWhileItsShutdownWaitedBehindABlockIsRestarted) {
  auto [cc, stop] = start_idle_widgets();
  Widgets w(*bh_, widget_kind);
  OpenBlock block(cc, ctx_, [&](const Context& tx) { w.create(tx, {"block", 1}); });
  auto old = bh_->store_writer();
  auto before = ask<store_writer_state>(old, inspect_atom::value).deferred;
  auto waiting = std::async(std::launch::async, [&] {
    return w.create(ctx_.with_timeout(20s), {"waiting", 1}, with_slug("waiting"));
  });
  bool deferred = eventually(
      [&] { return ask<store_writer_state>(old, inspect_atom::value).deferred >= before + 1; });
  // The shutdown the root sends at stop, here while the beehive runs on.
  caf::anon_send(caf::actor_cast<caf::actor>(old), detail::shutdown_atom::value);
  deferred = deferred && eventually([&] {
               return ask<store_writer_state>(old, inspect_atom::value).deferred >= before + 2;
             });
  if (!deferred) block.release();
  ASSERT_TRUE(deferred);
  caf::anon_send_exit(old, caf::exit_reason::kill);
  ASSERT_TRUE(eventually([&] { return bh_->store_writer() != old; }));
  EXPECT_NO_THROW(waiting.get());
  EXPECT_THROW(block.get(), Error);  // its session went with the writer
  EXPECT_NO_THROW(w.create(ctx_, {"after", 1}));
  EXPECT_NO_THROW(w.get_by_slug(ctx_, "waiting"));
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

// Actors' requests that waited behind the open block when the writer crashed are answered,
// as a request to the old handle is (stopped), rather than never (CAF 0.17 answers no
// promise an actor dies holding).
TEST_F(ActorTest, ActorRequestsWaitingBehindABlockWhenTheStoreWriterCrashedFailAsStopped) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(*bh_, widget_kind);
  auto o = w.create(ctx_, {"o", 1});
  ::testing::internal::CaptureStderr();
  auto stop = bh_->start(ctx_);
  testing::settle(*bh_, ctx_);
  OpenBlock block(cc, ctx_, [&](const Context& tx) { w.create(tx, {"block", 1}); });
  auto old = bh_->store_writer();
  auto before = ask<store_writer_state>(old, inspect_atom::value).deferred;
  caf::scoped_actor self{sys_};
  auto write = self->request(old, 20s, create_request{widget_kind, spec("from-actor", 1), "actor"});
  auto read = self->request(old, 20s, get_request{widget_kind, o.id});
  bool deferred = eventually(
      [&] { return ask<store_writer_state>(old, inspect_atom::value).deferred >= before + 2; });
  if (!deferred) block.release();
  ASSERT_TRUE(deferred);
  caf::anon_send_exit(old, caf::exit_reason::kill);
  auto t0 = std::chrono::steady_clock::now();
  std::optional<errc> wrote, got;
  std::move(write).receive([](ObjectRow&) {}, [&](caf::error& e) { wrote = to_errc(e); });
  std::move(read).receive([](ObjectRow&) {}, [&](caf::error& e) { got = to_errc(e); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // answered, not timed out
  EXPECT_EQ(wrote, errc::stopped);
  EXPECT_EQ(got, errc::stopped);
  EXPECT_THROW(block.get(), Error);                            // its session went with the writer
  EXPECT_ERRC(w.get_by_slug(ctx_, "actor"), errc::not_found);  // the write was not applied
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

// A sweep_atom caller whose event log crashes while the sweep waits behind a within
// block is answered stopped, not left waiting for its own timeout.
TEST_F(ActorTest, ASweepCallerWhoseEventLogCrashesMidSweepIsAnsweredStopped) {
  auto [cc, stop] = start_idle_widgets();
  Widgets w(*bh_, widget_kind);
  OpenBlock block(cc, ctx_, [&](const Context& tx) { w.create(tx, {"block", 1}); });
  auto log = bh_->event_log();
  caf::scoped_actor self{sys_};
  auto swept = self->request(log, 20s, sweep_atom::value);
  bool waiting =
      eventually([&] { return ask<event_log_state>(log, inspect_atom::value).sweeping; });
  if (!waiting) block.release();
  ASSERT_TRUE(waiting);
  caf::anon_send_exit(log, caf::exit_reason::kill);
  auto t0 = std::chrono::steady_clock::now();
  std::optional<errc> answer;
  std::move(swept).receive([&](int) { answer = errc::invalid_argument; },
                           [&](caf::error& e) { answer = to_errc(e).value_or(errc::store); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // answered, not timed out
  EXPECT_EQ(answer, std::optional<errc>(errc::stopped));
  block.get();
  stop(ctx_);
  ::testing::internal::GetCapturedStderr();
}

// A schedule watch that races the beehive's stop (opened after its streams were ended)
// ends at once instead of never.
TEST(ScheduleTable, AWatchOpenedAfterTheStreamsEndedEndsAtOnce) {
  auto table = std::make_shared<detail::ScheduleTable>();
  table->set(1, Time{} + 5s);
  table->finish_all(make_error_code(errc::stopped));
  auto core = std::make_shared<detail::StreamCore<Schedule>>(Context{});
  table->watch(1, core);
  EXPECT_TRUE(core->done());
  EXPECT_EQ(core->error(), make_error_code(errc::stopped));
}

// A controller's inbox folds what waits per object, and wakes it once; a record posted
// before the controller attached (it is spawned, the writer already posts) wakes it as
// it attaches: the wake went to nobody and was never sent again.
TEST_F(ActorTest, AControllersRecordInboxFoldsPerObjectAndWakesWhoAttachesLate) {
  detail::RecordInbox inbox;
  auto change = [](ObjectID id, unsigned parts, std::int64_t rv) {
    object_change c;
    c.type = ChangeType::Modified;
    c.row.meta.id = id;
    c.row.meta.resource_version = rv;
    c.parts = parts;
    return commit_record{{c}};
  };
  caf::scoped_actor self{sys_};
  auto wakes = [&] {
    int n = 0;
    for (bool quiet = false; !quiet;)
      self->receive([&](detail::records_atom) { ++n; },
                    caf::after(std::chrono::milliseconds(200)) >> [&] { quiet = true; });
    return n;
  };
  inbox.post(change(1, object_change::spec, 2));
  inbox.attach(self->address());
  EXPECT_EQ(wakes(), 1);  // at the attach
  inbox.post(change(1, object_change::status, 3));
  inbox.post(change(2, object_change::created, 4));
  EXPECT_EQ(wakes(), 0);  // woken already, not taken since
  auto batch = inbox.take();
  ASSERT_EQ(batch.changes.size(), 2u);
  EXPECT_EQ(batch.changes[0].row.meta.resource_version, 3);
  EXPECT_EQ(batch.changes[0].parts, object_change::spec | object_change::status);
  EXPECT_EQ(inbox.size(), 0u);
}

TEST_F(ActorTest, AStalledWatcherNeitherBlocksWritersNorGrowsWithWrites) {
  Widgets w(*bh_, widget_kind);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(w.create(ctx_, {"w", 0}).id);
  auto stop = bh_->start(ctx_);
  auto stalled = w.watch_list(ctx_);  // not read until the end
  for (int round = 1; round <= 40; ++round)
    for (auto id : ids) w.update(ctx_, id, {"w", round});  // 800 writes complete
  // The stream holds at most one change per object, whatever the number of writes.
  for (int i = 0; i < 3; ++i)
    EXPECT_LE(ask<watch_hub_state>(bh_->watch_hub(), inspect_atom::value).pending, ids.size());
  std::map<ObjectID, int> latest;
  int received = 0;
  auto all_latest = [&] {
    return latest.size() == ids.size() &&
           std::all_of(latest.begin(), latest.end(), [](auto& kv) { return kv.second == 40; });
  };
  while (!all_latest()) {
    auto c = stalled.next_for(5s);
    ASSERT_TRUE(c.has_value()) << "the newest state never arrived";
    latest[c->object.id] = c->object.spec.size;
    ++received;
  }
  EXPECT_LT(received, 200);  // conflated: nowhere near one change per write
  stop(ctx_);
}

/// An event detail with no JSON text crosses the wire as a discarded value, which the
/// store refuses as it refuses the value itself: from another node, text nested 100,000
/// levels deep (not parsed: that would overflow the stack); from this one, a value nested
/// too deep or holding a string that is not UTF-8 (whose serialization would throw).
TEST_F(ActorTest, ADetailWithNoJsonTextCrossesTheWireToBeRefused) {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  std::vector<char> buf;
  caf::binary_serializer sink{sys_, buf};
  std::string category = "c", reason = "R", message = "m";
  EventType type = EventType::Normal;
  ASSERT_FALSE(sink(category, type, reason, message, deep));  // EventSpec's fields
  EventSpec back{"x", EventType::Warning, "y", "z", nlohmann::json{{"keep", 1}}};
  caf::binary_deserializer source{sys_, buf};
  ASSERT_FALSE(source(back));
  EXPECT_EQ(back.reason, "R");
  EXPECT_TRUE(back.detail.is_discarded());

  nlohmann::json nested = nlohmann::json::array();
  for (int i = 0; i < 600; ++i) nested = nlohmann::json::array({std::move(nested)});
  EventSpec back2;
  through_the_wire(EventSpec{"c", EventType::Normal, "R", "m", std::move(nested)}, back2);
  EXPECT_TRUE(back2.detail.is_discarded());
  EventSpec back3;
  through_the_wire(EventSpec{"c", EventType::Normal, "R", "m", {{"text", "bad\xff"}}}, back3);
  EXPECT_TRUE(back3.detail.is_discarded());
  EXPECT_NE(caf::deep_to_string(EventSpec{"c", EventType::Normal, "R", "m", {{"t", "\xff"}}})
                .find("not UTF-8"),
            std::string::npos);  // printed, not thrown

  auto w = bh_->store_writer();
  auto o = ask<ObjectRow>(w, create_request{widget_kind, spec("a", 1), "a"});
  for (auto* e : {&back, &back2, &back3})
    EXPECT_ERRC_WITH(ask<Event>(w, record_event_request{widget_kind, o.meta.id, *e}),
                     errc::invalid_argument, "discarded");
  EventSpec fine;
  through_the_wire(EventSpec{"c", EventType::Normal, "R", "m", {{"keep", 1}}}, fine);
  EXPECT_EQ(ask<Event>(w, record_event_request{widget_kind, o.meta.id, fine}).detail,
            (nlohmann::json{{"keep", 1}}));
  EventSpec none;
  through_the_wire(EventSpec{"c", EventType::Normal, "R", "m"}, none);
  EXPECT_TRUE(none.detail.is_null());
}

TEST_F(ActorTest, MessagesSerializeAndPrint) {
  ObjectRow row;
  row.meta.id = 7;
  row.meta.slug = "s";
  row.meta.observed_at = clock_->now();
  row.meta.conditions.push_back({"Ready", ConditionStatus::True, "Ok", "", true});
  row.meta.relations.owner.emplace(Ref{3, "g", "k"});
  row.spec = R"({"a":1})";
  row.status = R"({"b":2})";
  row.status_version = 2;
  object_change change{ChangeType::Modified, row, object_change::status};
  object_change back;
  through_the_wire(change, back);
  EXPECT_EQ(back.type, ChangeType::Modified);
  EXPECT_EQ(back.row.meta.slug, "s");
  EXPECT_EQ(back.row.meta.observed_at, row.meta.observed_at);
  EXPECT_EQ(back.row.meta.conditions, row.meta.conditions);
  EXPECT_EQ(back.row.meta.relations.owner, row.meta.relations.owner);
  EXPECT_FALSE(back.row.meta.relations.events.has_value());
  EXPECT_EQ(back.row.status, row.status);
  EXPECT_EQ(back.row.status_version, 2);
  EventSpec e{"c", EventType::Warning, "R", "m", nlohmann::json{{"x", 1}}};
  EventSpec e2;
  through_the_wire(e, e2);
  EXPECT_EQ(e2.detail, e.detail);
  EXPECT_EQ(e2.type, EventType::Warning);
  EXPECT_NE(caf::deep_to_string(change).find("beehive::object_change"), std::string::npos);

  // Whole messages (what crosses to another node) need every type registered by
  // add_message_types: requests, replies and states alike.
  auto round_trip = [&](const caf::message& m) {
    std::vector<char> bytes;
    caf::binary_serializer out{sys_, bytes};
    auto m1 = m;
    EXPECT_FALSE(out(m1)) << caf::to_string(m);
    caf::message back;
    caf::binary_deserializer in{sys_, bytes};
    EXPECT_FALSE(in(back)) << caf::to_string(m);
    return back;
  };
  auto back_create = round_trip(caf::make_message(
      create_request{widget_kind, R"({"size":1})", std::string("s"), {"f"}, ObjectID{4}}));
  ASSERT_TRUE(back_create.match_elements<create_request>());
  EXPECT_EQ(back_create.get_as<create_request>(0).owner, ObjectID{4});
  EXPECT_EQ(back_create.get_as<create_request>(0).finalizers, std::vector<std::string>{"f"});
  object_change folded{ChangeType::Modified, row, object_change::spec};
  folded.first_version = 41;  // a foreign change folded from version 41 on
  auto back_change = round_trip(caf::make_message(folded));
  ASSERT_TRUE(back_change.match_elements<object_change>());
  EXPECT_EQ(back_change.get_as<object_change>(0).first_version, 41);
  auto back_rows = round_trip(caf::make_message(std::vector<ObjectRow>{row, row}));
  ASSERT_TRUE(back_rows.match_elements<std::vector<ObjectRow>>());
  EXPECT_EQ(back_rows.get_as<std::vector<ObjectRow>>(0).size(), 2u);
  trim_events_request trim;
  trim.retention.emplace_back(widget_kind, event_retention{3, 1h});
  auto back_trim = round_trip(caf::make_message(trim));
  ASSERT_TRUE(back_trim.match_elements<trim_events_request>());
  EXPECT_EQ(back_trim.get_as<trim_events_request>(0).retention[0].second.max_age,
            std::chrono::milliseconds(1h));
  list_events_request list{7, in_category("c")};
  list.filter.limit = 5;
  auto back_list = round_trip(caf::make_message(list));
  ASSERT_TRUE(back_list.match_elements<list_events_request>());
  EXPECT_EQ(back_list.get_as<list_events_request>(0).filter.limit, 5);
  EXPECT_EQ(back_list.get_as<list_events_request>(0).filter.category, "c");
  // A typed transaction: each write keeps its alternative, each reply its own.
  transaction_request txn{
      {create_request{widget_kind, R"({"size":2})", std::string("t")},
       remove_by_slug_request{widget_kind, "gone"},
       set_condition_request{widget_kind, 3, {"Ready", ConditionStatus::False}}}};
  auto back_txn = round_trip(caf::make_message(txn));
  ASSERT_TRUE(back_txn.match_elements<transaction_request>());
  auto& writes = back_txn.get_as<transaction_request>(0).writes;
  ASSERT_EQ(writes.size(), 3u);
  ASSERT_TRUE(std::holds_alternative<create_request>(writes[0]));
  EXPECT_EQ(std::get<create_request>(writes[0]).slug, "t");
  ASSERT_TRUE(std::holds_alternative<remove_by_slug_request>(writes[1]));
  EXPECT_EQ(std::get<remove_by_slug_request>(writes[1]).slug, "gone");
  ASSERT_TRUE(std::holds_alternative<set_condition_request>(writes[2]));
  EXPECT_EQ(std::get<set_condition_request>(writes[2]).condition.status, ConditionStatus::False);
  transaction_reply replies{{row, true, Event{}}};
  auto back_replies = round_trip(caf::make_message(replies));
  ASSERT_TRUE(back_replies.match_elements<transaction_reply>());
  auto& got = back_replies.get_as<transaction_reply>(0).replies;
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(std::get<ObjectRow>(got[0]).meta.id, row.meta.id);
  EXPECT_TRUE(std::get<bool>(got[1]));
  EXPECT_TRUE(std::holds_alternative<Event>(got[2]));
  EXPECT_NE(caf::deep_to_string(txn).find("remove_by_slug_request"), std::string::npos);
  for (auto& m : {caf::make_message(collect_request{}), caf::make_message(event_log_state{1, 2}),
                  caf::make_message(std::vector<Event>{Event{}}),
                  caf::make_message(std::vector<Ref>{Ref{1, "g", "k"}}),
                  caf::make_message(controller_state{}), caf::make_message(gc_state{}),
                  caf::make_message(scheduler_state{}), caf::make_message(store_writer_state{}),
                  caf::make_message(watch_hub_state{})})
    EXPECT_EQ(caf::to_string(round_trip(m)), caf::to_string(m));
}

/// A build whose Widget spec is at schema version 3 and status at 2 (shapes unchanged).
class WidgetV3 : public Migrator {
 public:
  int schema_version_spec() const override { return 3; }
  int schema_version_status() const override { return 2; }
  nlohmann::json convert_spec(int, nlohmann::json raw) const override { return raw; }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }
};

TEST_F(ActorTest, TypedRequestsAreWrittenAtTheKindsSchemaVersions) {
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; },
      with_migrator(std::make_shared<WidgetV3>()));
  auto w = bh_->store_writer();
  // The application sends its own types; the writer fills in the migrator's versions.
  auto row =
      ask<ObjectRow>(w, make_create(widget_kind, WidgetSpec{"blue", 2}, std::string("typed")));
  EXPECT_EQ(row.spec_version, 3);
  EXPECT_EQ((decode_row<WidgetSpec, WidgetStatus>(row).spec), (WidgetSpec{"blue", 2}));
  auto updated = ask<ObjectRow>(w, make_update(widget_kind, row.meta.id, WidgetSpec{"red", 2}));
  EXPECT_EQ(updated.spec_version, 3);
  EXPECT_EQ(updated.meta.generation, 2);
  auto status =
      ask<ObjectRow>(w, make_update_status(widget_kind, row.meta.id, 2, WidgetStatus{true}));
  EXPECT_EQ(status.status_version, 2);
  auto goc = ask<get_or_create_reply>(w, make_get_or_create(widget_kind, "other", WidgetSpec{}));
  EXPECT_TRUE(goc.created);
  EXPECT_EQ(goc.row.spec_version, 3);
  // The same holds inside a transaction; a version the sender sets is kept.
  create_request older{widget_kind, spec("old", 1)};
  older.spec_version = 1;
  auto replies =
      ask<transaction_reply>(
          w, transaction_request{{make_create_or_update(widget_kind, "cu", WidgetSpec{"x", 1}),
                                  older}})
          .replies;
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(std::get<ObjectRow>(replies[0]).spec_version, 3);
  EXPECT_EQ(std::get<ObjectRow>(replies[1]).spec_version, 1);
  // One above the kind's would commit a row no read here could decode: refused, unwritten.
  create_request newer{widget_kind, spec("new", 1), std::string("newer")};
  newer.spec_version = 4;
  EXPECT_ERRC(ask<ObjectRow>(w, newer), errc::invalid_argument);
  auto newer_status = make_update_status(widget_kind, row.meta.id, 2, WidgetStatus{false});
  newer_status.status_version = 3;
  EXPECT_ERRC(ask<ObjectRow>(w, newer_status), errc::invalid_argument);
  // The blocking facade reads what the actor wrote.
  Widgets widgets(*bh_, widget_kind);
  auto typed = widgets.get_by_slug(ctx_, "typed");
  EXPECT_EQ(typed.spec.color, "red");
  EXPECT_TRUE(typed.status.has_value() && typed.status->ready);
  EXPECT_ERRC(widgets.get_by_slug(ctx_, "newer"), errc::not_found);
}

TEST_F(ActorTest, AnActorsSpecIsStoredAsTheFacadeWouldStoreIt) {
  auto w = bh_->store_writer();
  auto row = ask<ObjectRow>(w, create_request{widget_kind, R"({ "size": 1, "color": "a" })"});
  EXPECT_EQ(row.spec, R"({"color":"a","size":1})");
  EXPECT_EQ(row.spec_version, 0);  // a kind without a migrator
  // The same value spelled otherwise is the same spec: nothing is written.
  auto again =
      ask<ObjectRow>(w, update_request{widget_kind, row.meta.id, R"({"size":1,"color":"a"})"});
  EXPECT_EQ(again.meta.resource_version, row.meta.resource_version);
  EXPECT_EQ(again.meta.generation, 1);
  // A value that the typed helper cannot store is refused in the sender.
  EXPECT_ERRC(make_create(widget_kind, nlohmann::json(std::numeric_limits<double>::infinity())),
              errc::invalid_argument);
}

/// A spec whose own decoding refuses what its encoding can write (a negative count).
struct Picky {
  int count = 0;
};
void to_json(nlohmann::json& j, const Picky& p) { j = {{"count", p.count}}; }
void from_json(const nlohmann::json& j, Picky& p) {
  p.count = j.at("count").get<int>();
  if (p.count < 0) throw std::invalid_argument("a negative count");
}

// The typed request helpers check what the blocking Client checks: a value its own type
// cannot read back is refused in the sender (errc::decode), so no row is written that
// every read and reconcile of the kind would then fail on.
TEST_F(ActorTest, TypedRequestHelpersRefuseAValueTheirTypeCannotReadBack) {
  EXPECT_ERRC(make_create(widget_kind, Picky{-1}), errc::decode);
  EXPECT_ERRC(make_update(widget_kind, 1, Picky{-1}), errc::decode);
  EXPECT_ERRC(make_create_or_update(widget_kind, "s", Picky{-1}), errc::decode);
  EXPECT_ERRC(make_get_or_create(widget_kind, "s", Picky{-1}), errc::decode);
  EXPECT_ERRC(make_update_status(widget_kind, 1, 1, Picky{-1}), errc::decode);
  EXPECT_EQ(make_create(widget_kind, Picky{2}).spec, R"({"count":2})");
  // As the blocking Client does.
  EXPECT_ERRC((Client<Picky, Picky>(*bh_, widget_kind).create(ctx_, Picky{-1})), errc::decode);
}

TEST_F(ActorTest, ActorHandlesNameEveryActor) {
  auto stop = bh_->start(ctx_);
  auto h = actor_handles(*bh_);
  EXPECT_EQ(h.store_writer, bh_->store_writer());
  EXPECT_EQ(h.watch_hub, bh_->watch_hub());
  EXPECT_EQ(h.gc, bh_->gc());
  EXPECT_EQ(h.event_log, bh_->event_log());
  EXPECT_EQ(h.scheduler, bh_->scheduler());
  EXPECT_FALSE(h.controller(widget_kind).has_value());  // no controller registered
  EXPECT_EQ(ask<store_writer_state>(h.store_writer, inspect_atom::value).session, 0u);
  stop(ctx_);
}

// Handles an application keeps may outlive the beehive they came from (in the
// application's actor system, messages to them then fail as stopped): asking them for a
// controller after the stop, or once the Beehive is gone, says there is none.
TEST_F(ActorTest, ActorHandlesKeptPastTheBeehiveNameNoController) {
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [](auto&, auto&, auto&) { return Result{}; });
  auto stop = bh_->start(ctx_);
  auto h = actor_handles(*bh_);
  EXPECT_TRUE(h.controller(widget_kind).has_value());
  stop(ctx_);
  EXPECT_FALSE(h.controller(widget_kind).has_value());
  bh_.reset();
  EXPECT_FALSE(h.controller(widget_kind).has_value());
}

TEST(ActorErrorTest, ErrcRoundTripsThroughCafErrors) {
  auto err = make_error(errc::wrong_kind, "no such thing");
  EXPECT_EQ(to_errc(err), errc::wrong_kind);
  EXPECT_EQ(error_message(err), "no such thing");
  EXPECT_EQ(to_errc(caf::make_error(caf::sec::request_receiver_down)), errc::stopped);
  EXPECT_EQ(to_errc(caf::make_error(caf::sec::request_timeout)), errc::deadline_exceeded);
  EXPECT_FALSE(to_errc(caf::error{}).has_value());
}

}  // namespace
}  // namespace beehive::test
