// Objects as a Kubernetes user expects them: optimistic concurrency (with_resource_version),
// labels (with_labels, set_labels), label selectors on list, list_page and watch_list, and
// paging with continue tokens.

#include <atomic>
#include <future>
#include <limits>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/testing.hpp>

#include "fixture.hpp"
#include "store/label_selector.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;
using TestBeehive = KitBeehive;  // on the test store: SQLite or PostgreSQL

std::vector<ObjectID> ids_of(const std::vector<Object<WidgetSpec, WidgetStatus>>& objects) {
  std::vector<ObjectID> ids;
  for (auto& o : objects) ids.push_back(o.id);
  return ids;
}

// -- optimistic concurrency ---------------------------------------------------------------

TEST(OptimisticConcurrency, ReadModifyWriteLoopsLoseNoUpdate) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto id = w.create({}, {"count", 0}).id;
  constexpr int kLoops = 4, kIncrements = 40;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kLoops; ++i)
    threads.emplace_back([&] {
      for (int n = 0; n < kIncrements;) {
        auto o = w.get({}, id);
        try {
          w.update({}, id, {"count", o.spec.size + 1}, with_resource_version(o.resource_version));
          ++n;
        } catch (const Error& e) {
          ASSERT_EQ(e.value(), errc::conflict);
          ++conflicts;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(w.get({}, id).spec.size, kLoops * kIncrements);
  EXPECT_EQ(w.get({}, id).generation, 1 + kLoops * kIncrements);
}

TEST(OptimisticConcurrency, AStaleVersionIsAConflictAndWritesNothing) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto o = w.create({}, {"red", 1});
  auto now = w.update({}, o.id, {"blue", 2});
  EXPECT_ERRC(w.update({}, o.id, {"green", 3}, with_resource_version(o.resource_version)),
              errc::conflict);
  EXPECT_ERRC(w.remove({}, o.id, with_resource_version(o.resource_version)), errc::conflict);
  EXPECT_ERRC(w.set_labels({}, o.id, {{"a", "b"}}, with_resource_version(o.resource_version)),
              errc::conflict);
  auto after = w.get({}, o.id);
  EXPECT_EQ(after.spec.color, "blue");
  EXPECT_EQ(after.resource_version, now.resource_version);
  EXPECT_FALSE(after.deletion_requested_at);
  EXPECT_TRUE(after.labels.empty());
  // The current version passes.
  auto green = w.update({}, o.id, {"green", 3}, with_resource_version(now.resource_version));
  EXPECT_EQ(green.spec.color, "green");
  w.remove({}, o.id, with_resource_version(green.resource_version));
  EXPECT_TRUE(w.get({}, o.id).deletion_requested_at);
}

TEST(OptimisticConcurrency, ANoOpWriteStaysANoOpButStillChecksTheVersion) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto o = w.create({}, {"red", 1});
  auto same = w.update({}, o.id, {"red", 1}, with_resource_version(o.resource_version));
  EXPECT_EQ(same.resource_version, o.resource_version);
  EXPECT_EQ(same.generation, 1);
  w.update({}, o.id, {"blue", 1});
  auto blue = w.get({}, o.id);
  // The same bytes as stored, but read at an older version: the caller's view is stale.
  EXPECT_ERRC(w.update({}, o.id, {"blue", 1}, with_resource_version(o.resource_version)),
              errc::conflict);
  EXPECT_EQ(w.get({}, o.id).resource_version, blue.resource_version);
}

TEST(OptimisticConcurrency, UpdateStatusTakesTheVersionToo) {
  TestBeehive t;
  std::promise<errc> stale;
  std::promise<bool> current;
  std::atomic<int> pass{0};
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind,
      [&](const Context& ctx, ControllerClient<WidgetStatus>& c,
          const Object<WidgetSpec, WidgetStatus>& o) {
        if (pass++ != 0) return Result{};
        try {
          c.update_status(ctx, o.id, o.generation, WidgetStatus{true},
                          with_resource_version(o.resource_version - 1));
          stale.set_value(errc::store);
        } catch (const Error& e) {
          stale.set_value(e.value());
        }
        c.update_status(ctx, o.id, o.generation, WidgetStatus{true},
                        with_resource_version(o.resource_version));
        current.set_value(true);
        return Result{};
      });
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto o = w.create({}, {"red", 1});
  t.settle();
  EXPECT_EQ(stale.get_future().get(), errc::conflict);
  EXPECT_TRUE(current.get_future().get());
  ASSERT_TRUE(w.get({}, o.id).status);
  EXPECT_TRUE(w.get({}, o.id).status->ready);
}

TEST(OptimisticConcurrency, TheActorSurfaceRepliesConflict) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto o = w.create({}, {"red", 1});
  w.update({}, o.id, {"blue", 2});
  caf::scoped_actor self{actor_system_of(t.beehive())};
  std::optional<errc> code;
  update_request req{widget_kind, o.id, R"({"color":"green","size":3})"};
  req.resource_version = o.resource_version;
  self->request(t.beehive().store_writer(), 10s, req)
      .receive([&](const ObjectRow&) { code.reset(); },
               [&](caf::error& err) { code = to_errc(err); });
  EXPECT_EQ(code, errc::conflict);
  EXPECT_EQ(w.get({}, o.id).spec.color, "blue");
}

// -- labels -------------------------------------------------------------------------------

TEST(Labels, EveryReadReturnsTheLabelsACreateGave) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  Labels labels{{"tier", "gold"}, {"example.com/team", "core"}, {"empty", ""}};
  auto o = w.create({}, {"red", 1}, with_slug("a"), with_labels(labels));
  EXPECT_EQ(o.labels, labels);
  EXPECT_EQ(w.get({}, o.id).labels, labels);
  EXPECT_EQ(w.get_by_slug({}, "a").labels, labels);
  EXPECT_EQ(w.list({}).at(0).labels, labels);
  auto watch = w.watch_list({});
  auto c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->object.labels, labels);
}

TEST(Labels, TheyOutliveTheProcessThatWroteThem) {
  TempDir dir;
  auto file = dir.file("l.db");
  ObjectID id;
  {
    Beehive bh(open_test_store(file));
    id = Widgets(bh, widget_kind).create({}, {"red", 1}, with_labels({{"a", "b"}})).id;
  }
  Beehive bh(open_test_store(file));
  EXPECT_EQ(Widgets(bh, widget_kind).get({}, id).labels, (Labels{{"a", "b"}}));
}

TEST(Labels, SetLabelsMovesTheVersionNotTheGenerationAndReachesWatches) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto o = w.create({}, {"red", 1}, with_labels({{"a", "1"}}));
  auto watch = w.watch({}, o.id);
  ASSERT_TRUE(watch.next_for(5s));  // the snapshot
  auto relabelled = w.set_labels({}, o.id, {{"b", "2"}});
  EXPECT_EQ(relabelled.labels, (Labels{{"b", "2"}}));
  EXPECT_EQ(relabelled.generation, 1);
  EXPECT_GT(relabelled.resource_version, o.resource_version);
  auto c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, ChangeType::Modified);
  EXPECT_EQ(c->object.labels, (Labels{{"b", "2"}}));
  // The same labels again write nothing.
  EXPECT_EQ(w.set_labels({}, o.id, {{"b", "2"}}).resource_version, relabelled.resource_version);
  EXPECT_ERRC(w.set_labels({}, o.id + 100, {}), errc::not_found);
}

TEST(Labels, KeysAndValuesFollowKubernetesRulesAndABadOneWritesNothing) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto o = w.create({}, {"red", 1});
  for (Labels bad : std::vector<Labels>{{{"", "x"}},
                                        {{"-a", "x"}},
                                        {{"a", "x y"}},
                                        {{std::string(64, 'k'), "x"}},
                                        {{"a", std::string(64, 'v')}},
                                        {{"Bad_Prefix/a", "x"}},
                                        {{"a/b/c", "x"}}}) {
    EXPECT_ERRC(w.create({}, {"blue", 1}, with_labels(bad)), errc::invalid_argument);
    EXPECT_ERRC(w.set_labels({}, o.id, bad), errc::invalid_argument);
  }
  EXPECT_EQ(w.list({}).size(), 1u);
  EXPECT_EQ(w.get({}, o.id).resource_version, o.resource_version);
  // The longest legal forms.
  w.create({}, {"ok", 1},
           with_labels({{std::string(63, 'k'), std::string(63, 'v')},
                        {"a.example.com/" + std::string(63, 'n'), ""}}));
}

TEST(Labels, TheSlugWritesApplyThemOnlyWhenTheyCreate) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create_or_update({}, "a", {"red", 1}, with_labels({{"v", "1"}}));
  EXPECT_EQ(a.labels, (Labels{{"v", "1"}}));
  auto again = w.create_or_update({}, "a", {"blue", 1}, with_labels({{"v", "2"}}));
  EXPECT_EQ(again.labels, (Labels{{"v", "1"}}));
  auto [b, created] = w.get_or_create({}, "b", {"red", 1}, with_labels({{"v", "3"}}));
  EXPECT_TRUE(created);
  EXPECT_EQ(w.get({}, b.id).labels, (Labels{{"v", "3"}}));
}

// Bad labels are refused whatever the store holds: when the slug is taken too, nothing
// is written.
TEST(Labels, TheSlugWritesRefuseBadLabelsWhetherTheyCreateOrNot) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create_or_update({}, "a", {"red", 1});
  EXPECT_ERRC(w.create_or_update({}, "a", {"blue", 1}, with_labels({{"-bad", "x"}})),
              errc::invalid_argument);
  EXPECT_ERRC(w.create_or_update({}, "a", {"red", 1}, with_labels({{"-bad", "x"}})),
              errc::invalid_argument);  // converged: refused all the same
  EXPECT_ERRC(w.get_or_create({}, "a", {"red", 1}, with_labels({{"ok", "-bad value"}})),
              errc::invalid_argument);
  EXPECT_EQ(w.get({}, a.id).resource_version, a.resource_version);  // nothing written
  // The actor surface refuses them too.
  caf::scoped_actor self{actor_system_of(t.beehive())};
  auto code = [&]<class Reply>(auto request, Reply*) {
    std::optional<errc> out;
    self->request(t.beehive().store_writer(), std::chrono::seconds(10), std::move(request))
        .receive([](const Reply&) {}, [&](caf::error& e) { out = to_errc(e); });
    return out;
  };
  create_or_update_request cu;
  cu.gk = widget_kind;
  cu.slug = "a";
  cu.spec = R"({"color":"green","size":1})";
  cu.labels = {{"-bad", "x"}};
  EXPECT_EQ(code(cu, static_cast<ObjectRow*>(nullptr)), errc::invalid_argument);
  get_or_create_request gc{widget_kind, "a", R"({"color":"red","size":1})"};
  gc.labels = {{"-bad", "x"}};
  EXPECT_EQ(code(gc, static_cast<get_or_create_reply*>(nullptr)), errc::invalid_argument);
  EXPECT_EQ(w.get({}, a.id).resource_version, a.resource_version);
}

// -- selectors ----------------------------------------------------------------------------

class Selectors : public ::testing::Test {
 protected:
  void SetUp() override {
    gold = w.create({}, {"g", 1}, with_labels({{"tier", "gold"}, {"env", "prod"}})).id;
    silver = w.create({}, {"s", 1}, with_labels({{"tier", "silver"}, {"env", "dev"}})).id;
    plain = w.create({}, {"p", 1}).id;
    Client<WidgetSpec, WidgetStatus>(t.beehive(), gadget_kind)
        .create({}, {"other kind", 1}, with_labels({{"tier", "gold"}}));
  }
  std::vector<ObjectID> select(std::string_view s) { return ids_of(w.list({}, with_selector(s))); }

  TestBeehive t;
  Widgets w{t.beehive(), widget_kind};
  ObjectID gold = 0, silver = 0, plain = 0;
};

TEST_F(Selectors, ListSelectsByEveryOperator) {
  using V = std::vector<ObjectID>;
  EXPECT_EQ(select("tier=gold"), V{gold});
  EXPECT_EQ(select("tier==gold"), V{gold});
  EXPECT_EQ(select("tier!=gold"), (V{silver, plain}));  // absent keys match !=
  EXPECT_EQ(select("tier in (gold, silver)"), (V{gold, silver}));
  EXPECT_EQ(select("tier notin (gold)"), (V{silver, plain}));
  EXPECT_EQ(select("tier"), (V{gold, silver}));
  EXPECT_EQ(select("!tier"), V{plain});
  EXPECT_EQ(select("tier,env=dev"), V{silver});
  EXPECT_EQ(select("tier=gold,env=dev"), V{});
  EXPECT_EQ(select(""), (V{gold, silver, plain}));
  // Loads still apply.
  auto with_owner = w.list({}, load_owner(), with_selector("tier=gold"));
  ASSERT_EQ(with_owner.size(), 1u);
  EXPECT_FALSE(with_owner[0].get_owner());
}

TEST_F(Selectors, ABadSelectorIsInvalidArgument) {
  // (`tier=` is not among them: it selects the empty value, as in Kubernetes.)
  for (auto bad : {"=gold", "tier in ()", "tier in (a", "tier >> 3", "a,,b", "!"}) {
    SCOPED_TRACE(bad);
    EXPECT_ERRC(w.list({}, with_selector(bad)), errc::invalid_argument);
  }
  EXPECT_ERRC(w.watch_list({}, with_selector("a in (")), errc::invalid_argument);
  EXPECT_ERRC(w.list_page({}, 10, "", with_selector("!!a")), errc::invalid_argument);
}

// Each requirement is a subquery and each value a parameter: a huge selector failed with
// errc::store, on SQLite from 1 000 requirements (its expression depth) and on
// PostgreSQL from 65 535 values (its parameters). Both backends now take the same
// bounds and refuse more as invalid_argument.
TEST_F(Selectors, ASelectorHoldsAtMost256RequirementsAnd4096Values) {
  auto requirements = [](int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? ",k" : "k") + std::to_string(i) + "!=x";
    return out;
  };
  auto values = [](int n) {
    std::string out = "tier in (gold";
    for (int i = 1; i < n; ++i) out += ",v" + std::to_string(i);
    return out + ")";
  };
  EXPECT_EQ(w.list({}, with_selector(requirements(256))).size(), 3u);
  EXPECT_EQ(w.list({}, with_selector(values(4096))).size(), 1u);
  EXPECT_ERRC(w.list({}, with_selector(requirements(257))), errc::invalid_argument);
  EXPECT_ERRC(w.list({}, with_selector(requirements(1000))), errc::invalid_argument);
  EXPECT_ERRC(w.list({}, with_selector(values(4097))), errc::invalid_argument);
  EXPECT_ERRC(w.list({}, with_selector(values(70000))), errc::invalid_argument);
  EXPECT_ERRC(w.watch_list({}, with_selector(requirements(257))), errc::invalid_argument);
}

TEST_F(Selectors, AWatchSeesObjectsStartAndStopMatching) {
  auto watch = w.watch_list({}, with_selector("tier=gold"));
  auto c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, ChangeType::Added);
  EXPECT_EQ(c->object.id, gold);
  // A change of a matching object, then one of an object that never matched (nothing).
  w.update({}, gold, {"g", 2});
  w.update({}, plain, {"p", 2});
  c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, ChangeType::Modified);
  EXPECT_EQ(c->object.id, gold);
  // Silver starts matching: Added; gold stops: Deleted, with its body.
  w.set_labels({}, silver, {{"tier", "gold"}});
  c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, ChangeType::Added);
  EXPECT_EQ(c->object.id, silver);
  w.set_labels({}, gold, {{"tier", "bronze"}});
  c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, ChangeType::Deleted);
  EXPECT_EQ(c->object.id, gold);
  EXPECT_EQ(c->object.labels, (Labels{{"tier", "bronze"}}));
  // Gold no longer matches: its changes are not delivered; a new matching object is.
  w.update({}, gold, {"g", 3});
  auto fresh = w.create({}, {"n", 1}, with_labels({{"tier", "gold"}})).id;
  c = watch.next_for(5s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, ChangeType::Added);
  EXPECT_EQ(c->object.id, fresh);
  EXPECT_FALSE(watch.next_for(50ms));
}

// -- paging -------------------------------------------------------------------------------

TEST(Paging, PagesCoverTheKindInIdOrderOnce) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  std::vector<ObjectID> created;
  for (int i = 0; i < 25; ++i) created.push_back(w.create({}, {"c", i}).id);
  std::vector<ObjectID> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = w.list_page({}, 10, token);
    ++pages;
    EXPECT_LE(page.items.size(), 10u);
    for (auto& o : page.items) seen.push_back(o.id);
    token = page.continue_token;
    // Created between pages, with a higher id: on a later page.
    if (pages == 1) created.push_back(w.create({}, {"late", 0}).id);
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, created);
  // No limit: everything, no token.
  auto all = w.list_page({}, 0, "");
  EXPECT_EQ(all.items.size(), 26u);
  EXPECT_TRUE(all.continue_token.empty());
  // An exact fit ends with an empty token rather than an empty page.
  auto first = w.list_page({}, 13, "");
  auto second = w.list_page({}, 13, first.continue_token);
  EXPECT_EQ(second.items.size(), 13u);
  EXPECT_TRUE(second.continue_token.empty());
  // A limit past what SQL's LIMIT can say is all of them too, not a store error.
  for (std::size_t huge :
       {std::size_t{std::numeric_limits<std::int64_t>::max()} - 1,
        std::size_t{std::numeric_limits<std::int64_t>::max()},
        std::numeric_limits<std::size_t>::max() - 1, std::numeric_limits<std::size_t>::max()}) {
    SCOPED_TRACE(huge);
    auto page = w.list_page({}, huge, "");
    EXPECT_EQ(page.items.size(), 26u);
    EXPECT_TRUE(page.continue_token.empty());
    EXPECT_EQ(w.list_page({}, huge, "", with_selector("!tier")).items.size(), 26u);
  }
}

TEST(Paging, SelectorsAndPagesCombine) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  std::vector<ObjectID> gold;
  for (int i = 0; i < 12; ++i) {
    auto o = w.create({}, {"c", i}, with_labels({{"tier", i % 3 == 0 ? "gold" : "lead"}}));
    if (i % 3 == 0) gold.push_back(o.id);
  }
  auto p1 = w.list_page({}, 3, "", with_selector("tier=gold"));
  auto p2 = w.list_page({}, 3, p1.continue_token, with_selector("tier=gold"));
  EXPECT_EQ(ids_of(p1.items), std::vector<ObjectID>(gold.begin(), gold.begin() + 3));
  EXPECT_EQ(ids_of(p2.items), std::vector<ObjectID>(gold.begin() + 3, gold.end()));
  EXPECT_TRUE(p2.continue_token.empty());
}

// Every selector reads, whole or a page at a time, the objects the in-memory matcher (the
// watches') selects, whichever requirement drives the store's read; the other kind's
// objects with the same labels never.
TEST(Paging, EverySelectorPagesToWhatTheMatcherSelects) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  Widgets g(t.beehive(), gadget_kind);
  std::vector<std::pair<ObjectID, Labels>> all;
  const char* tiers[] = {"gold", "silver", nullptr};
  const char* envs[] = {"prod", "dev", nullptr};
  for (int i = 0; i < 30; ++i) {
    Labels l;
    if (auto tier = tiers[i % 3]) l["tier"] = tier;
    if (auto env = envs[(i / 3) % 3]) l["env"] = env;
    if (i % 4 == 0) l["zone"] = "eu";
    g.create({}, {"g", i}, with_labels(l));  // ids of both kinds interleave
    all.emplace_back(w.create({}, {"w", i}, with_labels(l)).id, l);
  }
  for (std::string_view s : {"tier=gold", "tier=gold,env=dev", "tier=gold,env!=dev",
                             "tier=silver,env in (dev, prod)", "tier=gold,env notin (prod)",
                             "env=prod,zone", "env=prod,!zone", "tier=gold,env=prod,zone=eu",
                             "tier in (gold,silver),zone", "!tier", "tier", "tier=bronze"}) {
    SCOPED_TRACE(s);
    auto matcher = store::LabelSelector::parse(s);
    std::vector<ObjectID> want;
    for (auto& [id, labels] : all)
      if (matcher.matches(labels)) want.push_back(id);
    EXPECT_EQ(ids_of(w.list({}, with_selector(s))), want);
    std::vector<ObjectID> paged;
    std::string token;
    for (int pages = 0; pages < 20; ++pages) {
      auto p = w.list_page({}, 3, token, with_selector(s));
      for (auto& o : p.items) paged.push_back(o.id);
      token = p.continue_token;
      if (token.empty()) break;
    }
    EXPECT_EQ(paged, want);
  }
}

TEST(Paging, AMalformedTokenIsInvalidArgument) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  w.create({}, {"c", 1});
  auto token = w.list_page({}, 0, "").continue_token;
  for (auto bad : {"x", "12", "bh1.", "bh1.-5", "bh1.!!", "bh1.5", "bh2.1", "bh2.1.", "bh2..1",
                   "bh2.-1.5", "bh2.1.!!", "bh2.1.2.3"}) {
    SCOPED_TRACE(bad);
    EXPECT_ERRC(w.list_page({}, 1, bad), errc::invalid_argument);
  }
  // Passed through from a request, say: the message shows only its start.
  std::string huge = "bh2.1." + std::string(1 << 20, 'z');
  try {
    w.list_page({}, 1, huge);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.value(), errc::invalid_argument);
    EXPECT_LT(std::string_view(e.what()).size(), 300u);
  }
}

TEST(Paging, ATokenFromAnotherKindOrSelectorIsInvalidArgument) {
  // A token handed to another list would skip that list's ids below the one it carries.
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  Widgets g(t.beehive(), GroupKind{"other.example", "Gadget"});
  for (int i = 0; i < 4; ++i) {
    w.create({}, {"w", i}, with_labels({{"tier", "gold"}}));
    g.create({}, {"g", i}, with_labels({{"tier", "gold"}}));
  }
  auto token = w.list_page({}, 2, "").continue_token;
  ASSERT_FALSE(token.empty());
  EXPECT_ERRC(g.list_page({}, 2, token), errc::invalid_argument);
  EXPECT_ERRC(w.list_page({}, 2, token, with_selector("tier=gold")), errc::invalid_argument);
  auto gold = w.list_page({}, 2, "", with_selector("tier=gold")).continue_token;
  EXPECT_ERRC(w.list_page({}, 2, gold), errc::invalid_argument);
  EXPECT_ERRC(w.list_page({}, 2, gold, with_selector("tier=lead")), errc::invalid_argument);
  // Its own list takes it.
  EXPECT_EQ(w.list_page({}, 2, token).items.size(), 2u);
  EXPECT_EQ(w.list_page({}, 2, gold, with_selector("tier=gold")).items.size(), 2u);
  // The same selection spelled otherwise is the same list.
  EXPECT_EQ(w.list_page({}, 2, gold, with_selector(" tier == gold ")).items.size(), 2u);
  EXPECT_EQ(w.list_page({}, 2, token, with_selector("  ")).items.size(), 2u);
}

TEST(Paging, InsideWithinAPageSeesTheBlocksOwnWrites) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  std::promise<std::size_t> seen;
  std::atomic<bool> first{true};
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind,
      [&](const Context& ctx, ControllerClient<WidgetStatus>& c,
          const Object<WidgetSpec, WidgetStatus>&) {
        if (!first.exchange(false)) return Result{};
        c.within(ctx, [&](const Context& tx) {
          w.create(tx, {"c", 2}, with_labels({{"a", "b"}}));
          seen.set_value(w.list_page(tx, 10, "", with_selector("a=b")).items.size());
        });
        return Result{};
      });
  w.create({}, {"c", 1}, with_labels({{"a", "b"}}));
  t.start();
  t.settle();
  EXPECT_EQ(seen.get_future().get(), 2u);
}

TEST_F(Selectors, TheActorSurfaceListsBySelector) {
  caf::scoped_actor self{actor_system_of(t.beehive())};
  std::vector<ObjectID> got;
  std::optional<errc> code;
  list_request req{widget_kind};
  req.selector = "tier in (gold,silver),env=prod";
  self->request(t.beehive().store_writer(), 10s, req)
      .receive(
          [&](const std::vector<ObjectRow>& rows) {
            for (auto& r : rows) got.push_back(r.meta.id);
          },
          [&](caf::error& err) { code = to_errc(err); });
  EXPECT_EQ(got, std::vector<ObjectID>{gold});
  req.selector = "tier in (";
  self->request(t.beehive().store_writer(), 10s, req)
      .receive([&](const std::vector<ObjectRow>&) { code.reset(); },
               [&](caf::error& err) { code = to_errc(err); });
  EXPECT_EQ(code, errc::invalid_argument);
}

}  // namespace
}  // namespace beehive::test
