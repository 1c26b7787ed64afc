// Slug-keyed writes under concurrency: losers observe the winner's row and never see a
// constraint error (create_or_update, get_or_create); create's loser gets already_exists.

#include <thread>

#include "fixture.hpp"

namespace beehive::test {
namespace {

constexpr int threads = 8;

class RaceTest : public BeehiveTest {
 protected:
  template <class Fn>
  void race(Fn fn) {
    run_together(threads, fn);
  }
};

TEST_F(RaceTest, GetOrCreateInsertsOnce) {
  Widgets w(bh(), widget_kind);
  for (int round = 0; round < 5; ++round) {
    auto slug = "goc-" + std::to_string(round);
    std::atomic<int> created{0};
    std::vector<ObjectID> ids(threads);
    race([&](int i) {
      auto [o, c] = w.get_or_create(ctx_, slug, {"t", i});
      ids[i] = o.id;
      if (c) ++created;
    });
    EXPECT_EQ(created.load(), 1);
    for (auto id : ids) EXPECT_EQ(id, ids[0]);
  }
  EXPECT_EQ(w.list(ctx_).size(), 5u);
}

TEST_F(RaceTest, CreateOrUpdateInsertsOnceAndAppliesEveryone) {
  Widgets w(bh(), widget_kind);
  std::vector<ObjectID> ids(threads);
  race([&](int i) { ids[i] = w.create_or_update(ctx_, "cou", {"t", i}).id; });
  for (auto id : ids) EXPECT_EQ(id, ids[0]);
  auto all = w.list(ctx_);
  ASSERT_EQ(all.size(), 1u);
  // One insert and then only real changes: generation counts distinct applied specs.
  EXPECT_GE(all[0].generation, 1);
  EXPECT_LE(all[0].generation, threads);
}

TEST_F(RaceTest, CreateLosersGetAlreadyExists) {
  Widgets w(bh(), widget_kind);
  std::atomic<int> ok{0}, exists{0};
  race([&](int i) {
    try {
      w.create(ctx_, {"t", i}, with_slug("c"));
      ++ok;
    } catch (const Error& e) {
      if (e.code() == errc::already_exists) ++exists;
    }
  });
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(exists.load(), threads - 1);
}

TEST_F(RaceTest, RemoveBySlugRacesWithGetOrCreate) {
  Widgets w(bh(), widget_kind);
  w.create(ctx_, {"t", 0}, with_slug("r"), with_finalizers({"f"}));
  race([&](int i) {
    if (i % 2)
      w.remove_by_slug(ctx_, "r");
    else
      w.get_or_create(ctx_, "r", {"t", i});
  });
  auto all = w.list(ctx_);
  ASSERT_EQ(all.size(), 1u);  // the tombstone still holds the slug
  EXPECT_TRUE(all[0].deletion_requested_at.has_value());
}

TEST_F(RaceTest, ReadsProceedWhileWritersRun) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"t", 0}, with_slug("hot"));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 1; !stop; ++i) w.update(ctx_, o.id, {"t", i});
  });
  int last = -1;
  for (int i = 0; i < 200; ++i) {
    auto got = w.get(ctx_, o.id);
    EXPECT_GE(got.spec.size, last);  // reads see committed states in order
    last = got.spec.size;
  }
  stop = true;
  writer.join();
}

}  // namespace
}  // namespace beehive::test
