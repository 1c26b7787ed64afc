// synchronous=FULL: the writer's -wal appends go out as one write per commit
// (src/store/wal_batch_vfs.hpp). What a user relies on: every commit, however large, is
// read back whole, by the writer's own transaction, by read connections and after a
// restart, and the file stays sound.

#include <SQLiteCpp/SQLiteCpp.h>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

class FullSyncTest : public ControllerTest {
 protected:
  void SetUp() override {
    store_options_.synchronous = sqlite::Synchronous::full;
    ControllerTest::SetUp();
  }

  std::string integrity_check() {
    SQLite::Database db(dir_.file("beehive.db").string(), SQLite::OPEN_READONLY);
    return db.execAndGet("PRAGMA integrity_check").getString();
  }
};

/// `n` bytes that differ from one object (and one version) to the next.
std::string filler(std::size_t n, int seed) {
  std::string s(n, 'x');
  for (std::size_t i = 0; i < n; i += 61) s[i] = static_cast<char>('a' + (i + seed) % 26);
  return s;
}

// (append, not operator+: GCC 12 warns falsely about the latter.)
std::string slug_of(int n) { return std::string("s").append(std::to_string(n)); }

TEST_F(FullSyncTest, ASpecLargerThanOneWriteIsStoredWhole) {
  auto w = widgets();
  auto big = filler(3 * 1024 * 1024, 1);  // hundreds of frames, many writes' worth
  auto o = w.create(ctx_, {big, 1});
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, big);
  open();
  EXPECT_EQ(widgets().get(ctx_, o.id).spec.color, big);
  EXPECT_EQ(integrity_check(), "ok");
}

TEST_F(FullSyncTest, ATransactionThatOutgrowsThePageCacheIsStoredWhole) {
  // Far more pages than SQLite's page cache holds (2 MiB by default), each written
  // twice: SQLite spills pages to the WAL mid-transaction, rewrites spilled frames in
  // place and reads them back before the commit.
  auto cc = register_widgets();
  auto w = widgets();
  constexpr int kObjects = 150;
  std::vector<ObjectID> ids;
  cc.within(ctx_, [&](const Context& tx) {
    for (int i = 0; i < kObjects; ++i) ids.push_back(w.create(tx, {filler(30000, i), i}).id);
    for (int i = 0; i < kObjects; ++i) w.update(tx, ids[i], {filler(30000, i + 1000), i});
    EXPECT_EQ(w.get(tx, ids[7]).spec.color, filler(30000, 1007));  // its own writes
  });
  auto check = [&] {
    auto all = widgets().list(ctx_);
    ASSERT_EQ(all.size(), static_cast<std::size_t>(kObjects));
    for (int i = 0; i < kObjects; ++i) {
      EXPECT_EQ(all[i].id, ids[i]);
      EXPECT_EQ(all[i].spec.color, filler(30000, i + 1000)) << i;
      EXPECT_EQ(all[i].generation, 2);
    }
  };
  check();
  open();
  check();
  EXPECT_EQ(integrity_check(), "ok");
}

TEST_F(FullSyncTest, ConcurrentWritersAreAllReadBackAfterARestart) {
  auto w = widgets();
  constexpr int kThreads = 6, kEach = 40;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        w.create(ctx_, {filler(100 + 700 * (i % 9), t * kEach + i), t * kEach + i},
                 with_slug(slug_of(t * kEach + i)));
    });
  for (auto& t : ts) t.join();
  open();
  auto again = widgets();
  for (int n = 0; n < kThreads * kEach; ++n) {
    auto o = again.get_by_slug(ctx_, slug_of(n));
    EXPECT_EQ(o.spec.size, n);
    EXPECT_EQ(o.spec.color, filler(100 + 700 * (n % kEach % 9), n));
  }
  EXPECT_EQ(integrity_check(), "ok");
}

}  // namespace
}  // namespace beehive::test
