// The README's "Testing your controllers" example, built against the installed package
// (target beehive::testing) by the package_consumer test.

#include <beehive/testing.hpp>

#include <stdexcept>

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using beehive::testing::HasCondition;
using beehive::testing::IsSettled;

struct WidgetSpec {
  int replicas = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WidgetSpec, replicas)
struct WidgetStatus {
  int ready = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WidgetStatus, ready)

const beehive::GroupKind widget_kind{"acme.com", "Widget"};

// The controller under test: refuses a negative replica count until it is fixed, and
// fails its first pass of each object (a flaky dependency) to show the backoff.
beehive::Client<WidgetSpec, WidgetStatus> register_widgets(beehive::Beehive& bh) {
  auto failed_once = std::make_shared<std::atomic<bool>>(false);
  beehive::register_controller<WidgetSpec, WidgetStatus>(
      bh, widget_kind, [failed_once](const beehive::Context& ctx, auto& client, const auto& w) {
        if (!failed_once->exchange(true)) throw std::runtime_error("backend not reachable yet");
        client.update_status(ctx, w.id, w.generation, WidgetStatus{w.spec.replicas});
        client.set_condition(ctx, w.id, {"Ready", beehive::ConditionStatus::True, "Scaled", ""});
        return beehive::Result{};
      });
  return {bh, widget_kind};
}

TEST(WidgetController, ConvergesAfterOneBackoff) {
  beehive::testing::TestBeehive t;  // a fresh database and a ManualClock
  auto widgets = register_widgets(t.beehive());
  t.start();
  auto w = widgets.create({}, WidgetSpec{3});

  t.settle();  // the first pass ran, failed, and armed a 1 s backoff
  EXPECT_THAT(widgets.get({}, w.id), ::testing::Not(IsSettled()));
  EXPECT_EQ(widgets.get_schedule({}, w.id).next_requeue_at, t.clock().now() + 1s);

  t.advance(1s);  // the retry falls due and runs: no sleeping, no polling
  auto got = widgets.get({}, w.id);
  EXPECT_THAT(got, IsSettled());
  EXPECT_THAT(got, HasCondition("Ready", beehive::ConditionStatus::True));
  EXPECT_EQ(got.status->ready, 3);
}
