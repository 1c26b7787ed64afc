// Load options: relations attached to reads, batched on list, and not_loaded when a
// read did not ask. Edges and events are written straight into the store's tables here
// (on either backend); their write paths are tested with the features that write them.

#include "fixture.hpp"

namespace beehive::test {
namespace {

class LoadTest : public BeehiveTest {
 protected:
  void edge(ObjectID from, const char* rel, ObjectID to) {
    write_test_store(db_path(), "INSERT INTO refs (from_id, relation, to_id) VALUES (" +
                                    std::to_string(from) + ", '" + rel + "', " +
                                    std::to_string(to) + ")");
  }
  void event(ObjectID id, const std::string& category, const std::string& reason, int at) {
    const auto n = std::to_string(at);
    write_test_store(db_path(),
                     "INSERT INTO events (object_id, category, type, reason, message, detail, "
                     "count, first_at, last_at) VALUES (" +
                         std::to_string(id) + ", '" + category + "', 'Normal', '" + reason +
                         "', 'm', '{\"n\":" + n + "}', 1, " + n + ", " + n + ")");
  }
};

TEST_F(LoadTest, AccessorsThrowNotLoadedWithoutTheOption) {
  Widgets w(bh(), widget_kind);
  auto o = w.get(ctx_, w.create(ctx_, {"a", 1}).id);
  EXPECT_ERRC(o.get_owner(), errc::not_loaded);
  EXPECT_ERRC(o.list_dependencies(), errc::not_loaded);
  EXPECT_ERRC(o.list_dependents(), errc::not_loaded);
  EXPECT_ERRC(o.list_owned(), errc::not_loaded);
  EXPECT_ERRC(o.list_events(), errc::not_loaded);
}

TEST_F(LoadTest, LoadedButEmptyMeansNone) {
  Widgets w(bh(), widget_kind);
  auto id = w.create(ctx_, {"a", 1}).id;
  auto o = w.get(ctx_, id, load_owner(), load_dependencies(), load_dependents(), load_owned(),
                 load_events());
  EXPECT_FALSE(o.get_owner().has_value());
  EXPECT_TRUE(o.list_dependencies().empty());
  EXPECT_TRUE(o.list_dependents().empty());
  EXPECT_TRUE(o.list_owned().empty());
  EXPECT_TRUE(o.list_events().empty());
}

TEST_F(LoadTest, RelationsAcrossKinds) {
  Widgets w(bh(), widget_kind);
  Widgets g(bh(), gadget_kind);
  auto owner = g.create(ctx_, {"owner", 0});
  auto a = w.create(ctx_, {"a", 1}, with_slug("a"));
  auto b = w.create(ctx_, {"b", 2});
  auto c = w.create(ctx_, {"c", 3});
  edge(a.id, "owned_by", owner.id);
  edge(b.id, "owned_by", owner.id);
  edge(a.id, "depends_on", c.id);
  edge(b.id, "depends_on", c.id);

  auto ga = w.get_by_slug(ctx_, "a", load_owner(), load_dependencies());
  ASSERT_TRUE(ga.get_owner().has_value());
  EXPECT_EQ(*ga.get_owner(), (Ref{owner.id, "acme.com", "Gadget"}));
  EXPECT_EQ(ga.list_dependencies(), (std::vector<Ref>{{c.id, "acme.com", "Widget"}}));
  EXPECT_ERRC(ga.list_owned(), errc::not_loaded);

  auto go = g.get(ctx_, owner.id, load_owned());
  EXPECT_EQ(go.list_owned(),
            (std::vector<Ref>{{a.id, "acme.com", "Widget"}, {b.id, "acme.com", "Widget"}}));

  auto all = w.list(ctx_, load_dependents(), load_owner());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].list_dependents().empty());
  EXPECT_TRUE(all[1].list_dependents().empty());
  EXPECT_EQ(all[2].list_dependents(),
            (std::vector<Ref>{{a.id, "acme.com", "Widget"}, {b.id, "acme.com", "Widget"}}));
  EXPECT_TRUE(all[0].get_owner().has_value());
  EXPECT_TRUE(all[1].get_owner().has_value());
  EXPECT_FALSE(all[2].get_owner().has_value());
}

TEST_F(LoadTest, LoadEventsKeepsTheTenNewestPerCategoryNewestFirst) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  for (int i = 1; i <= 12; ++i)
    event(o.id, "probe", std::string("R").append(std::to_string(i)), i * 1000);
  event(o.id, "sync", "Synced", 500);
  auto got = w.get(ctx_, o.id, load_events());
  const auto& ev = got.list_events();
  ASSERT_EQ(ev.size(), 11u);
  std::vector<std::string> probe_reasons;
  for (auto& e : ev)
    if (e.category == "probe") probe_reasons.push_back(e.reason);
  ASSERT_EQ(probe_reasons.size(), 10u);
  EXPECT_EQ(probe_reasons.front(), "R12");
  EXPECT_EQ(probe_reasons.back(), "R3");
  auto sync = std::find_if(ev.begin(), ev.end(), [](auto& e) { return e.category == "sync"; });
  ASSERT_NE(sync, ev.end());
  EXPECT_EQ(event_detail<nlohmann::json>(*sync).at("n"), 500);
  EXPECT_EQ(sync->last_at, from_millis(500));
}

}  // namespace
}  // namespace beehive::test
