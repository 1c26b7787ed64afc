// ControllerClient writes: update_status and its generation handshake, conditions
// (liveness across restarts), finalizers, kind folding.

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

class StatusTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  }
  void reopen() {
    close();
    ControllerTest::open();
    cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  }
  std::unique_ptr<ControllerClient<WidgetStatus>> cc_;
};

TEST_F(StatusTest, UpdateStatusRecordsStatusAndObservedGeneration) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  clock_->advance(5s);
  cc_->update_status(ctx_, o.id, 1, {true});
  auto got = w.get(ctx_, o.id);
  ASSERT_TRUE(got.status.has_value());
  EXPECT_TRUE(got.status->ready);
  EXPECT_EQ(got.observed_generation, 1);
  EXPECT_EQ(got.observed_at, clock_->now());
  EXPECT_GT(got.resource_version, o.resource_version);
  EXPECT_EQ(got.generation, 1);  // status never moves the generation
}

TEST_F(StatusTest, UnchangedStatusAtARecordedGenerationWritesNothing) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  cc_->update_status(ctx_, o.id, 1, {true});
  auto first = w.get(ctx_, o.id);
  clock_->advance(30s);
  cc_->update_status(ctx_, o.id, 1, {true});
  auto second = w.get(ctx_, o.id);
  EXPECT_EQ(second.resource_version, first.resource_version);
  EXPECT_EQ(second.observed_at, first.observed_at);  // when it settled, not last polled
  EXPECT_EQ(second.updated_at, first.updated_at);
}

TEST_F(StatusTest, SettlingANewGenerationWithUnchangedStatusIsRecordedOnce) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  cc_->update_status(ctx_, o.id, 1, {true});
  auto settled1 = w.get(ctx_, o.id);
  w.update(ctx_, o.id, {"a", 2});
  clock_->advance(1s);
  cc_->update_status(ctx_, o.id, 2, {true});  // same bytes, new generation
  auto settled2 = w.get(ctx_, o.id);
  EXPECT_EQ(settled2.observed_generation, 2);
  EXPECT_EQ(settled2.observed_at, clock_->now());
  EXPECT_GT(settled2.resource_version, settled1.resource_version);
  cc_->update_status(ctx_, o.id, 2, {true});  // again: nothing
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, settled2.resource_version);
}

TEST_F(StatusTest, FutureGenerationIsRejectedAndOlderLeavesTheObjectUnsettled) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_ERRC(cc_->update_status(ctx_, o.id, 2, {true}), errc::observed_generation_future);
  EXPECT_FALSE(w.get(ctx_, o.id).status.has_value());
  // A condition observed at a generation the object never had, likewise.
  Condition ahead{"Ready", ConditionStatus::True, "Up", ""};
  ahead.observed_generation = 2;
  EXPECT_ERRC(cc_->set_condition(ctx_, o.id, ahead), errc::observed_generation_future);
  EXPECT_TRUE(w.get(ctx_, o.id).conditions.empty());
  ahead.observed_generation = 1;
  cc_->set_condition(ctx_, o.id, ahead);
  w.update(ctx_, o.id, {"a", 2});
  cc_->update_status(ctx_, o.id, 1, {true});  // a pass that saw the old spec
  auto got = w.get(ctx_, o.id);
  EXPECT_TRUE(got.status->ready);
  EXPECT_EQ(got.observed_generation, 1);
  EXPECT_LT(*got.observed_generation, got.generation);
}

// Generations count from 1 (0: nothing observed yet): a negative observed generation is
// no generation, for a status (changed or not) and a condition alike.
TEST_F(StatusTest, ANegativeObservedGenerationIsAnInvalidArgument) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_ERRC_WITH(cc_->update_status(ctx_, o.id, -1, {true}), errc::invalid_argument, "negative");
  EXPECT_FALSE(w.get(ctx_, o.id).status.has_value());
  cc_->update_status(ctx_, o.id, 1, {true});
  auto settled = w.get(ctx_, o.id);
  EXPECT_ERRC(cc_->update_status(ctx_, o.id, -1, {true}), errc::invalid_argument);
  Condition ready{"Ready", ConditionStatus::True};
  ready.observed_generation = -2;
  EXPECT_ERRC_WITH(cc_->set_condition(ctx_, o.id, ready), errc::invalid_argument, "negative");
  auto after = w.get(ctx_, o.id);
  EXPECT_EQ(after.resource_version, settled.resource_version);
  EXPECT_TRUE(after.conditions.empty());
}

TEST_F(StatusTest, UnchangedStatusAtAnOlderGenerationWritesNothing) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  w.update(ctx_, o.id, {"a", 2});
  cc_->update_status(ctx_, o.id, 2, {true});
  auto settled = w.get(ctx_, o.id);
  clock_->advance(1s);
  auto unchanged = [&] {
    auto got = w.get(ctx_, o.id);
    EXPECT_EQ(got.observed_generation, 2);  // never moved back
    EXPECT_EQ(got.observed_at, settled.observed_at);
    EXPECT_EQ(got.resource_version, settled.resource_version);
    EXPECT_EQ(got.updated_at, settled.updated_at);
  };
  // A stale pass (it saw generation 1) reports the status already stored: silent.
  cc_->update_status(ctx_, o.id, 1, {true});
  unchanged();
  // The writer's own rule, not only the shortcut that skips it: inside within, every
  // write reaches the writer.
  cc_->within(ctx_, [&](const Context& tx) { cc_->update_status(tx, o.id, 1, {true}); });
  unchanged();
  // Changed bytes at an older generation are written as given: the object is unsettled.
  cc_->update_status(ctx_, o.id, 1, {false});
  auto got = w.get(ctx_, o.id);
  EXPECT_FALSE(got.status->ready);
  EXPECT_EQ(got.observed_generation, 1);
  EXPECT_GT(got.resource_version, settled.resource_version);
}

TEST_F(StatusTest, WritesAreKindFolded) {
  auto gadget = Widgets(*bh_, gadget_kind).create(ctx_, {"g", 1});
  EXPECT_ERRC(cc_->update_status(ctx_, gadget.id, 1, {true}), errc::wrong_kind);
  EXPECT_ERRC(cc_->set_condition(ctx_, gadget.id, {"Ready", ConditionStatus::True}),
              errc::wrong_kind);
  EXPECT_ERRC(cc_->remove_condition(ctx_, gadget.id, "Ready"), errc::wrong_kind);
  EXPECT_ERRC(cc_->remove_finalizer(ctx_, gadget.id, "f"), errc::wrong_kind);
  EXPECT_ERRC(cc_->update_status(ctx_, 987654, 1, {true}), errc::not_found);
  EXPECT_ERRC(cc_->set_condition(ctx_, 987654, {"Ready", ConditionStatus::True}), errc::not_found);
  EXPECT_ERRC(cc_->remove_condition(ctx_, 987654, "Ready"), errc::not_found);
  EXPECT_ERRC(cc_->remove_finalizer(ctx_, 987654, "f"), errc::not_found);
  // Checked even when there would be nothing to remove, and nothing is written.
  auto g = Widgets(*bh_, gadget_kind).create(ctx_, {"g2", 1}, with_finalizers({"f"}));
  EXPECT_ERRC(cc_->remove_finalizer(ctx_, g.id, "f"), errc::wrong_kind);
  EXPECT_EQ(Widgets(*bh_, gadget_kind).get(ctx_, g.id).finalizers, std::vector<std::string>{"f"});
}

TEST_F(StatusTest, ConditionsAreUpsertedPerTypeAndIdenticalOnesWriteNothing) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  Condition ready{"Ready", ConditionStatus::False, "Starting", "warming up", false};
  cc_->set_condition(ctx_, o.id, ready);
  cc_->set_condition(ctx_, o.id, {"Synced", ConditionStatus::True, "Done", "", false});
  auto a = w.get(ctx_, o.id);
  ASSERT_EQ(a.conditions.size(), 2u);
  // The store stamps the transition time (the manual clock never moved here).
  ready.last_transition_at = from_millis(to_millis(clock_->now()));
  EXPECT_EQ(a.conditions[0], ready);  // ordered by type
  EXPECT_EQ(a.conditions[1].type, "Synced");
  cc_->set_condition(ctx_, o.id, ready);
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, a.resource_version);
  ready.status = ConditionStatus::True;
  ready.reason = "Up";
  cc_->set_condition(ctx_, o.id, ready);
  auto b = w.get(ctx_, o.id);
  EXPECT_GT(b.resource_version, a.resource_version);
  EXPECT_EQ(b.conditions[0], ready);
  cc_->remove_condition(ctx_, o.id, "Synced");
  auto c = w.get(ctx_, o.id);
  ASSERT_EQ(c.conditions.size(), 1u);
  EXPECT_GT(c.resource_version, b.resource_version);
  cc_->remove_condition(ctx_, o.id, "Synced");  // absent: nothing
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, c.resource_version);
}

TEST_F(StatusTest, ConditionTextMustBeUtf8) {
  auto o = widgets().create(ctx_, {"a", 1});
  EXPECT_ERRC(cc_->set_condition(ctx_, o.id, {"Ready", ConditionStatus::True, "bad\xff"}),
              errc::invalid_argument);
  EXPECT_ERRC(cc_->set_condition(ctx_, o.id, {"Ready", ConditionStatus::True, "", "\xc3"}),
              errc::invalid_argument);
  EXPECT_TRUE(widgets().get(ctx_, o.id).conditions.empty());
}

TEST_F(StatusTest, ConditionEventAndFinalizerTextMayNotHoldANulCharacter) {
  auto o = widgets().create(ctx_, {"a", 1});
  const std::string nul("a\0b", 3);
  EXPECT_ERRC(cc_->set_condition(ctx_, o.id, {"Ready", ConditionStatus::True, "r", nul}),
              errc::invalid_argument);
  EXPECT_ERRC(cc_->set_condition(ctx_, o.id, {nul, ConditionStatus::True}), errc::invalid_argument);
  EXPECT_ERRC(cc_->record_event(ctx_, o.id, {.reason = "r", .message = nul}),
              errc::invalid_argument);
  EXPECT_ERRC(cc_->add_finalizer(ctx_, o.id, nul), errc::invalid_argument);
  auto got = widgets().get(ctx_, o.id);
  EXPECT_TRUE(got.conditions.empty());
  EXPECT_TRUE(got.finalizers.empty());
  EXPECT_EQ(got.resource_version, o.resource_version);
  EXPECT_TRUE(widgets().list_events(ctx_, o.id).empty());
}

TEST_F(StatusTest, ConditionTypesAndEventCategoriesHoldAtMost512Bytes) {
  auto o = widgets().create(ctx_, {"a", 1});
  const std::string longest(512, 'c'), over(513, 'c');
  EXPECT_ERRC(cc_->set_condition(ctx_, o.id, {over, ConditionStatus::True}),
              errc::invalid_argument);
  EXPECT_ERRC(cc_->record_event(ctx_, o.id, {.category = over, .reason = "r"}),
              errc::invalid_argument);
  EXPECT_EQ(widgets().get(ctx_, o.id).resource_version, o.resource_version);
  cc_->set_condition(ctx_, o.id, {longest, ConditionStatus::True});
  cc_->record_event(ctx_, o.id, {.category = longest, .reason = "r"});
  EXPECT_EQ(widgets().get(ctx_, o.id).conditions.at(0).type, longest);
  EXPECT_EQ(widgets().list_events(ctx_, o.id).at(0).category, longest);
  // Reads name categories under the same bound.
  EXPECT_ERRC(widgets().get_latest_event(ctx_, o.id, over), errc::invalid_argument);
  EXPECT_ERRC(widgets().list_events(ctx_, o.id, with_event_category(over)), errc::invalid_argument);
  EXPECT_TRUE(widgets().get_latest_event(ctx_, o.id, longest).has_value());
}

TEST_F(StatusTest, FinalizersHoldAtMost512Bytes) {
  const std::string longest(512, 'f'), over(513, 'f');
  EXPECT_ERRC(widgets().create(ctx_, {"a", 1}, with_finalizers({over})), errc::invalid_argument);
  EXPECT_TRUE(widgets().list(ctx_).empty());
  auto o = widgets().create(ctx_, {"a", 1}, with_finalizers({longest}));
  EXPECT_ERRC(cc_->add_finalizer(ctx_, o.id, over), errc::invalid_argument);
  EXPECT_EQ(widgets().get(ctx_, o.id).finalizers, std::vector<std::string>{longest});
  cc_->remove_finalizer(ctx_, o.id, longest);
  EXPECT_TRUE(widgets().get(ctx_, o.id).finalizers.empty());
}

TEST_F(StatusTest, LivenessConditionsReadUnknownAfterARestartUntilReconfirmed) {
  auto o = widgets().create(ctx_, {"a", 1});
  Condition live{"Connected", ConditionStatus::True, "Dialed", "", true};
  Condition durable{"Configured", ConditionStatus::True, "Applied", "", false};
  cc_->set_condition(ctx_, o.id, live);
  cc_->set_condition(ctx_, o.id, durable);
  EXPECT_EQ(widgets().get(ctx_, o.id).conditions[1].status, ConditionStatus::True);
  const auto set_at = clock_->now();
  reopen();
  clock_->advance(10s);
  auto after = widgets().get(ctx_, o.id);
  ASSERT_EQ(after.conditions.size(), 2u);
  EXPECT_EQ(after.conditions[0].type, "Configured");
  EXPECT_EQ(after.conditions[0].status, ConditionStatus::True);  // durable survives
  EXPECT_EQ(after.conditions[1].type, "Connected");
  EXPECT_EQ(after.conditions[1].status, ConditionStatus::Unknown);  // verifying
  cc_->set_condition(ctx_, o.id, live);     // the identical re-confirmation counts
  cc_->set_condition(ctx_, o.id, durable);  // unchanged: a no-op
  auto confirmed = widgets().get(ctx_, o.id);
  EXPECT_EQ(confirmed.conditions[1].status, ConditionStatus::True);
  EXPECT_GT(confirmed.resource_version, after.resource_version);
  // Readers saw it go Unknown and come back: the re-confirmation is a transition. The
  // durable condition never changed.
  EXPECT_EQ(confirmed.conditions[1].last_transition_at, clock_->now());
  EXPECT_EQ(confirmed.conditions[0].last_transition_at, set_at);
  clock_->advance(10s);
  cc_->set_condition(ctx_, o.id, {"Connected", ConditionStatus::True, "Redialed", "", true});
  EXPECT_EQ(widgets().get(ctx_, o.id).conditions[1].last_transition_at, clock_->now() - 10s);
}

TEST_F(StatusTest, RemoveFinalizer) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1}, with_finalizers({"a.com/one", "a.com/two"}));
  cc_->remove_finalizer(ctx_, o.id, "a.com/one");
  auto got = w.get(ctx_, o.id);
  EXPECT_EQ(got.finalizers, std::vector<std::string>{"a.com/two"});
  EXPECT_GT(got.resource_version, o.resource_version);
  cc_->remove_finalizer(ctx_, o.id, "a.com/one");  // absent: nothing
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, got.resource_version);
}

TEST_F(StatusTest, ControllerClientWorksFromTheApplicationsOwnThreads) {
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  std::thread t([&] { cc_->update_status(ctx_, o.id, 1, {true}); });
  t.join();
  EXPECT_TRUE(widgets().get(ctx_, o.id).status->ready);
}

}  // namespace
}  // namespace beehive::test
