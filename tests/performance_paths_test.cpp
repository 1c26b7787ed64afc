// The fast paths: converged writes that never take the writer, and group commit that
// keeps per-request atomicity and errors.

#include <thread>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"
#include "group_engine.hpp"
#include "support/test_store.hpp"

namespace beehive::test {
namespace {

class FastPathTest : public ControllerTest {
 protected:
  std::uint64_t transactions() {
    caf::scoped_actor self{*sys_};
    std::uint64_t n = 0;
    self->request(bh_->store_writer(), caf::infinite, inspect_atom::value)
        .receive([&](const store_writer_state& s) { n = s.transactions; }, [](caf::error&) {});
    return n;
  }
  void SetUp() override {
    ControllerTest::SetUp();
    sys_ = std::make_unique<caf::actor_system>(cfg_);
  }
  void TearDown() override {
    ControllerTest::TearDown();
    sys_.reset();
  }
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
};

TEST_F(FastPathTest, ConvergedWritesTakeNoWriteTransaction) {
  auto cc = register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1}, with_slug("a"));
  auto b = w.create(ctx_, {"b", 1});
  cc.update_status(ctx_, a.id, 1, {true});
  cc.set_condition(ctx_, a.id, {"Ready", ConditionStatus::True, "Ok"});
  cc.add_dependency(ctx_, a.id, b.id);
  auto before = transactions();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(w.update(ctx_, a.id, {"a", 1}).generation, 1);
    EXPECT_EQ(w.create_or_update(ctx_, "a", {"a", 1}).generation, 1);
    cc.update_status(ctx_, a.id, 1, {true});
    cc.set_condition(ctx_, a.id, {"Ready", ConditionStatus::True, "Ok"});
    cc.add_dependency(ctx_, a.id, b.id);
  }
  EXPECT_EQ(transactions(), before);
  w.update(ctx_, a.id, {"a", 2});  // a real change still writes
  EXPECT_EQ(transactions(), before + 1);
  // Kind checks still apply on the fast path's fallback.
  EXPECT_ERRC(cc.update_status(ctx_, 999999, 1, {true}), errc::not_found);
}

TEST_F(FastPathTest, GroupedWritesKeepTheirOwnOutcomes) {
  auto w = widgets();
  constexpr int threads = 8, each = 40;
  std::atomic<int> created{0}, duplicates{0};
  run_together(threads, [&](int t) {
    for (int i = 0; i < each; ++i) {
      w.create(ctx_, {"t", t}, with_slug("s-" + std::to_string(t) + "-" + std::to_string(i)));
      ++created;
      try {
        w.create(ctx_, {"dup", t}, with_slug("dup-" + std::to_string(i)));  // one wins
      } catch (const Error& e) {
        if (e.code() == errc::already_exists) ++duplicates;
      }
    }
  });
  EXPECT_EQ(created, threads * each);
  EXPECT_EQ(duplicates, (threads - 1) * each);
  auto all = w.list(ctx_);
  EXPECT_EQ(all.size(), static_cast<size_t>(threads * each + each));
  // Every write got its own resource version.
  std::set<std::int64_t> rvs;
  for (auto& o : all) rvs.insert(o.resource_version);
  EXPECT_EQ(rvs.size(), all.size());
}

// Writes that do not decode fail alone in a group and leave nothing, their slugs free: a
// create is refused by its caller before it is queued, a create_or_update by the writer,
// inside the group, after its slug lookup.
TEST_F(FastPathTest, GroupedWritesThatDoNotDecodeFailAloneAndLeaveNothing) {
  struct Nothing {};
  Client<PickySpec, Nothing> c(*bh_, widget_kind);
  constexpr int threads = 8, each = 30;
  std::atomic<int> refused{0};
  auto before = transactions();
  run_together(threads, [&](int t) {
    for (int i = 0; i < each; ++i) {
      auto n = std::to_string(t) + "-" + std::to_string(i);
      c.create(ctx_, PickySpec{t * each + i}, with_slug("ok-" + n));
      try {
        if (i % 2)
          c.create(ctx_, PickySpec{-1}, with_slug("bad-" + n));
        else
          c.create_or_update(ctx_, "bad-" + n, PickySpec{-1});
      } catch (const Error& e) {
        if (e.code() == errc::decode) ++refused;
      }
    }
  });
  EXPECT_EQ(refused, threads * each);
  // The writes shared transactions (else this tested the lone path).
  EXPECT_LT(transactions() - before, static_cast<std::uint64_t>(threads * each));
  auto all = c.list(ctx_);
  ASSERT_EQ(all.size(), static_cast<size_t>(threads * each));
  std::set<ObjectID> ids;
  for (auto& o : all) {
    EXPECT_GE(o.spec.v, 0);
    EXPECT_EQ(o.slug->rfind("ok-", 0), 0u);
    ids.insert(o.id);
  }
  EXPECT_EQ(ids.size(), all.size());
  for (auto slug : {"bad-0-0", "bad-0-1"}) {  // the slugs were left free
    auto late = c.create(ctx_, PickySpec{1}, with_slug(slug));
    EXPECT_GT(late.id, *ids.rbegin());
    EXPECT_EQ(c.get(ctx_, late.id).spec.v, 1);
  }
}

// An owner-less create runs in a group without a savepoint of its own; one that fails
// after its INSERT (here a trigger refuses its label) must not leave its row behind, in
// a commit that tells its caller it failed: the others land, its slug stays free.
TEST_F(FastPathTest, AGroupedCreateRefusedAfterItsInsertLeavesNothing) {
  auto db = dir_.file("beehive.db");
  if (test_backend_is_postgres())
    write_test_store(db, R"sql(
      CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'boom refused'; END $$;
      CREATE TRIGGER refuse_boom BEFORE INSERT ON labels FOR EACH ROW
        WHEN (NEW.value = 'boom') EXECUTE FUNCTION refuse_boom())sql");
  else
    write_test_store(db, R"sql(
      CREATE TRIGGER refuse_boom BEFORE INSERT ON labels WHEN NEW.value = 'boom'
      BEGIN SELECT RAISE(ABORT, 'boom refused'); END)sql");
  GroupEngine g(db);
  auto writes =
      g.commit({GroupEngine::create("before"), GroupEngine::create("refused", {{"tier", "boom"}}),
                GroupEngine::create("after", {{"tier", "ok"}})});
  ASSERT_EQ(writes.size(), 3u);
  EXPECT_TRUE(writes[0].reply) << writes[0].what;
  EXPECT_FALSE(writes[1].reply);
  EXPECT_EQ(writes[1].code, errc::store);
  EXPECT_NE(writes[1].what.find("boom refused"), std::string::npos) << writes[1].what;
  EXPECT_TRUE(writes[2].reply) << writes[2].what;
  auto w = widgets();
  EXPECT_ERRC(w.get_by_slug(ctx_, "refused"), errc::not_found);
  EXPECT_EQ(w.get_by_slug(ctx_, "after").labels.at("tier"), "ok");
  EXPECT_EQ(w.list(ctx_).size(), 2u);
  EXPECT_EQ(query_test_store(db, "SELECT count(*) FROM change_log")[0][0], "2");
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0].changes.size(), 2u);
}

}  // namespace
}  // namespace beehive::test
