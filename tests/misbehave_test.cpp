// Controllers that misbehave: whatever a reconcile does, the store stays consistent, the
// process stays up and the other objects keep converging.

#include <gtest/gtest.h>

#include <future>

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

using MisbehaveTest = ControllerTest;

struct NotAnException {
  int code;
};

TEST_F(MisbehaveTest, ANonStandardThrowInsideWithinRollsTheBlockBackAndRetries) {
  std::atomic<bool> fail{true};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](const Context& ctx, auto& cc, auto& o) -> Result {
    cc.within(ctx, [&](const Context& tx) {
      cc.update_status(tx, o.id, o.generation, WidgetStatus{true});
      cc.record_event(tx, o.id, {"", EventType::Normal, "Half", "written then thrown"});
      if (fail) throw NotAnException{7};
    });
    return {};
  });
  register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(a.id) == 1; }));
  ASSERT_TRUE(scheduled_at(a.id, clock_->now() + 1s));  // the first backoff step
  auto after_throw = w.get(ctx_, a.id);
  EXPECT_FALSE(after_throw.observed_generation.has_value());  // nothing of the block is left
  EXPECT_FALSE(after_throw.status.has_value());
  EXPECT_TRUE(w.list_events(ctx_, a.id).empty());
  fail = false;
  clock_->advance(1s);
  EXPECT_TRUE(eventually([&] { return w.get(ctx_, a.id).observed_generation == 1; }));
  EXPECT_EQ(w.list_events(ctx_, a.id).size(), 1u);
}

/// A spec whose from_json throws something that is not a std::exception.
struct Picky {
  int n = 0;
};
void to_json(nlohmann::json& j, const Picky& p) { j = {{"n", p.n}}; }
void from_json(const nlohmann::json& j, Picky& p) {
  p.n = j.at("n").get<int>();
  if (p.n < 0) throw NotAnException{p.n};
}
struct Lenient {
  int n = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Lenient, n)

TEST_F(MisbehaveTest, ARowWhoseDecodeThrowsANonStandardExceptionIsQuarantined) {
  const GroupKind kind{"acme.com", "Picky"};
  std::atomic<int> reconciled{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  register_controller<Picky, WidgetStatus>(*bh_, kind, [&](auto&, auto&, auto&) {
    ++reconciled;
    return Result{};
  });
  Client<Lenient, WidgetStatus> lenient(*bh_, kind);
  lenient.create(ctx_, {-1});  // stored fine; the controller's type cannot take it
  ::testing::internal::CaptureStderr();
  start();
  settle();
  lenient.create(ctx_, {1});  // the controller keeps serving the kind
  EXPECT_TRUE(eventually([&] { return reconciled == 1; }));
  settle();
  EXPECT_EQ(reconciled, 1);
  close();
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("quarantined Picky.acme.com"), std::string::npos) << err;
  EXPECT_EQ(err.find("restarted"), std::string::npos) << err;
}

TEST_F(MisbehaveTest, ReentrantCallsFromInsideWithinAreRefusedOrJoinNeverDeadlock) {
  std::atomic<int> refused{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](const Context& ctx, auto& cc, auto& o) -> Result {
    Widgets w(*bh_, widget_kind);
    cc.within(ctx, [&](const Context& tx) {
      // The reconcile's own context outside its block would wait for the block itself.
      try {
        w.update(ctx, o.id, {"outer", 2});
      } catch (const Error& e) {
        if (e.value() == errc::invalid_argument) ++refused;
      }
      cc.within(tx, [&](const Context& inner) {  // nesting joins as a savepoint
        cc.update_status(inner, o.id, o.generation, WidgetStatus{true});
      });
      w.get(tx, o.id);  // reads with the block's context see its writes
    });
    return {};
  });
  register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return w.get(ctx_, a.id).observed_generation == 1; }));
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(w.get(ctx_, a.id).spec.color, "a");         // the refused write wrote nothing
  EXPECT_EQ(w.create(ctx_, {"b", 1}).spec.color, "b");  // the writer is free
}

TEST_F(MisbehaveTest, OneThrowingObjectDoesNotHoldUpTheOthers) {
  recorder_->set_body([](const Context& ctx, auto& cc, auto& o) -> Result {
    if (o.spec.color == "poison") throw NotAnException{1};
    cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
    return {};
  });
  register_widgets(with_concurrency(2));
  auto w = widgets();
  auto poison = w.create(ctx_, {"poison", 1});
  std::vector<ObjectID> good;
  for (int i = 0; i < 20; ++i) good.push_back(w.create(ctx_, {"fine", i}).id);
  start();
  for (auto id : good)
    EXPECT_TRUE(eventually([&] { return w.get(ctx_, id).observed_generation == 1; }));
  for (int i = 0; i < 3; ++i) {  // it keeps failing on its backoff ladder, alone
    ASSERT_TRUE(eventually([&] { return recorder_->count(poison.id) == i + 1; }));
    Time next{};
    ASSERT_TRUE(eventually([&] {  // the failure schedules its retry after counting
      next = w.get_schedule(ctx_, poison.id).next_requeue_at;
      return next > clock_->now();
    }));
    clock_->advance(std::chrono::duration_cast<std::chrono::milliseconds>(next - clock_->now()));
  }
  EXPECT_FALSE(w.get(ctx_, poison.id).observed_generation.has_value());
}

// Stop cancels the reconcile's context: the block's later writes fail cancelled, and the
// block is rolled back; stop waits for the reconcile and never hangs on its session.
TEST_F(MisbehaveTest, StopRollsBackAWithinBlockOpenInAReconcileWithoutHanging) {
  std::atomic<bool> entered{false}, release{false};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  recorder_->set_body([&](const Context& ctx, auto& cc, auto& o) -> Result {
    cc.within(ctx, [&](const Context& tx) {
      entered = true;
      eventually([&] { return release.load(); });
      cc.within(tx, [&](const Context& inner) {  // session steps during the drain
        cc.update_status(inner, o.id, o.generation, WidgetStatus{true});
      });
    });
    return {};
  });
  register_widgets();
  auto a = widgets().create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  auto stopping = std::async(std::launch::async, [&] { stop_(ctx_.with_timeout(10s)); });
  ASSERT_TRUE(eventually([&] {  // the beehive is draining once it refuses calls
    try {
      widgets().list(ctx_);
      return false;
    } catch (const Error& e) {
      return e.code() == make_error_code(errc::stopped);
    }
  }));
  release = true;
  ASSERT_EQ(stopping.wait_for(10s), std::future_status::ready) << "stop hung on the open block";
  stopping.get();
  stop_ = nullptr;
  open();
  EXPECT_FALSE(widgets().get(ctx_, a.id).status.has_value());  // rolled back
}

// A controller that ends while stop waits for its passes (killed by the application,
// or an exception of ours): a stop without a deadline goes on instead of waiting for its
// answer forever, and still waits for the pass it left running (as an orphan's).
TEST_F(MisbehaveTest, AControllerThatEndsDuringStopsDrainDoesNotHangTheStop) {
  std::atomic<bool> entered{false}, release{false}, stop_returned{false}, ended_first{false};
  auto stop_first = stop_before_locals();
  recorder_->set_body([&](auto&, auto&, auto&) -> Result {
    entered = true;
    eventually([&] { return release.load(); });
    ended_first = !stop_returned.load();
    return {};
  });
  register_widgets();
  widgets().create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  auto controller = *bh_->controller(widget_kind);
  auto stopping = std::async(std::launch::async, [&] {
    stop_(Context{});
    stop_returned = true;
  });
  // Draining (the root asked it for its passes) once it no longer dispatches.
  ASSERT_TRUE(eventually([&] {
    caf::scoped_actor self{controller->home_system()};
    bool dispatching = true;
    self->request(controller, std::chrono::seconds(10), inspect_atom::value)
        .receive([&](const controller_state& s) { dispatching = s.dispatching; },
                 [](caf::error&) {});
    return !dispatching;
  }));
  caf::anon_send_exit(controller, caf::exit_reason::kill);
  // The pass runs on: stop waits for it (a bounded look; it waits for good).
  EXPECT_EQ(stopping.wait_for(300ms), std::future_status::timeout) << "stop left the pass running";
  release = true;
  ASSERT_EQ(stopping.wait_for(10s), std::future_status::ready)
      << "stop waited for a dead controller";
  stopping.get();
  stop_ = nullptr;
  EXPECT_TRUE(ended_first);
}

/// A logger and a metrics sink that throw on every call: beehive goes on working, and
/// the supervisor goes on restarting crashed actors.
class ThrowingSink : public MetricsSink {
 public:
  void counter_add(std::string_view, const MetricLabels&, double) override { throw_it(); }
  void gauge_set(std::string_view, const MetricLabels&, double) override { throw_it(); }
  void histogram_observe(std::string_view, const MetricLabels&, double) override { throw_it(); }
  void declare(std::string_view, MetricType, const MetricLabels&) override { throw_it(); }
  void work_started(const MetricLabels&, std::int64_t,
                    std::chrono::steady_clock::time_point) override {
    throw_it();
  }
  void work_finished(const MetricLabels&, std::int64_t) override { throw_it(); }

 private:
  static void throw_it() { throw std::runtime_error("sink down"); }
};

TEST_F(MisbehaveTest, AThrowingLoggerOrMetricsSinkIsContained) {
  std::atomic<int> log_calls{0};
  open(with_logger([&](LogLevel, std::string_view, const LogFields&) {
         ++log_calls;
         throw std::runtime_error("logger down");
       }),
       with_metrics(std::make_shared<ThrowingSink>()));
  auto stop_first = stop_before_locals();
  recorder_->set_body([](auto&, auto&, auto& o) -> Result {
    if (o.spec.color == "bad") throw std::runtime_error("fails, and is logged");
    return {};
  });
  register_widgets();
  auto w = widgets();
  auto bad = w.create(ctx_, {"bad", 1});
  start();
  ASSERT_TRUE(eventually([&] { return recorder_->count(bad.id) >= 1 && log_calls > 0; }));
  auto good = w.create(ctx_, {"good", 1});  // the controller survived its log call
  ASSERT_TRUE(eventually([&] { return recorder_->count(good.id) == 1; }));
  auto old = *bh_->controller(widget_kind);
  int logged = log_calls;
  caf::anon_send_exit(old, caf::exit_reason::kill);  // the supervisor logs the restart
  ASSERT_TRUE(eventually([&] {
    auto now = bh_->controller(widget_kind);
    return now && *now != old && log_calls > logged;
  }));
  auto old_gc = bh_->gc();
  caf::anon_send_exit(old_gc, caf::exit_reason::kill);  // and is still there to restart this
  ASSERT_TRUE(eventually([&] { return bh_->gc() && bh_->gc() != old_gc; }));
  auto later = w.create(ctx_, {"later", 1});
  EXPECT_TRUE(eventually([&] { return recorder_->count(later.id) == 1; }));
}

TEST_F(MisbehaveTest, AThrowingOnCreateCallbackDoesNotFailTheStoredCreate) {
  std::atomic<int> errors{0};
  open(with_logger([&](LogLevel l, std::string_view, const LogFields&) {
    if (l == LogLevel::error) ++errors;
  }));
  auto w = widgets();
  auto o =
      w.create(ctx_, {"a", 1},
               with_on_create([](const Context&) { throw std::runtime_error("callback failed"); }));
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, "a");
  EXPECT_EQ(errors.load(), 1);  // reported to the operator instead
  auto [g, created] =
      w.get_or_create(ctx_, "slugged", {"b", 1}, with_on_create([](const Context&) { throw 42; }));
  EXPECT_TRUE(created);
  EXPECT_EQ(w.get(ctx_, g.id).spec.color, "b");
}

}  // namespace
}  // namespace beehive::test
