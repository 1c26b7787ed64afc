// Large writes, in both synchronous modes (and on PostgreSQL, as pg.*, in one). What a
// user relies on: every commit, however large (a spec of megabytes; a `within` block that
// outgrows SQLite's page cache, which then spills pages to the WAL and writes some of them
// again before the commit; one of ten thousand writes), is read back whole, by the
// writer's own transaction, by read connections (while writers run, too) and after a
// restart, and the SQLite file stays sound. (What a SIGKILL right after such a
// block leaves: Crash.LargeWithinBlocksSurviveKillsMidFlightAndWhileIdle.)

#include <SQLiteCpp/SQLiteCpp.h>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

class LargeWriteTest : public ControllerTest,
                       public ::testing::WithParamInterface<sqlite::Synchronous> {
 protected:
  void SetUp() override {
    store_options_.synchronous = GetParam();
    ControllerTest::SetUp();
  }

  /// The SQLite file passes its integrity check. (On PostgreSQL the server owns its
  /// files: what the tests read back is the whole check there.)
  void expect_sound() {
    if (test_backend_is_postgres()) return;
    SQLite::Database db(dir_.file("beehive.db").string(), SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
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

TEST_P(LargeWriteTest, ASpecOfMegabytesIsStoredWhole) {
  auto w = widgets();
  auto big = filler(3 * 1024 * 1024, 1);  // hundreds of overflow pages in one commit
  auto o = w.create(ctx_, {big, 1});
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, big);
  open();
  EXPECT_EQ(widgets().get(ctx_, o.id).spec.color, big);
  expect_sound();
}

TEST_P(LargeWriteTest, ATransactionThatOutgrowsThePageCacheIsStoredWhole) {
  // Far more pages than SQLite's page cache holds (2000 KiB by default), each written
  // twice: SQLite spills pages to the WAL mid-transaction and reads them back before the
  // commit.
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
  expect_sound();
}

TEST_P(LargeWriteTest, ConcurrentWritersAreAllReadBackAfterARestart) {
  auto w = widgets();
  constexpr int kThreads = 6, kEach = 40;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        w.create(ctx_, {filler(100 + 700 * (i % 9), t * kEach + i), t * kEach + i},
                 with_slug(slug_of(t * kEach + i)));
    });
  // Readers meanwhile: every object they find is whole (its spec decodes and is the one
  // written for it), never a commit published before its frames reached the file.
  std::atomic<bool> writing{true};
  std::atomic<int> seen{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      auto mine = widgets();
      while (writing.load()) {
        for (const auto& o : mine.list(ctx_)) {
          const int n = o.spec.size;
          EXPECT_EQ(o.spec.color, filler(100 + 700 * (n % kEach % 9), n));
          ++seen;
        }
      }
    });
  for (auto& t : ts) t.join();
  writing = false;
  for (auto& t : readers) t.join();
  EXPECT_GT(seen.load(), 0);
  open();
  auto again = widgets();
  for (int n = 0; n < kThreads * kEach; ++n) {
    auto o = again.get_by_slug(ctx_, slug_of(n));
    EXPECT_EQ(o.spec.size, n);
    EXPECT_EQ(o.spec.color, filler(100 + 700 * (n % kEach % 9), n));
  }
  expect_sound();
}

TEST_P(LargeWriteTest, AWithinBlockOfTenThousandWritesIsStoredWhole) {
  auto cc = register_widgets();
  auto w = widgets();
  constexpr int kObjects = 5000;
  cc.within(ctx_, [&](const Context& tx) {
    for (int i = 0; i < kObjects; ++i) {
      auto o = w.create(tx, {"a", i});
      w.update(tx, o.id, {"b", i});
    }
  });
  auto check = [&] {
    auto all = widgets().list(ctx_);
    ASSERT_EQ(all.size(), static_cast<std::size_t>(kObjects));
    for (int i = 0; i < kObjects; ++i) ASSERT_EQ(all[i].spec.size, i);
  };
  check();
  open();
  check();
  expect_sound();
}

INSTANTIATE_TEST_SUITE_P(Modes, LargeWriteTest,
                         ::testing::Values(sqlite::Synchronous::normal, sqlite::Synchronous::full),
                         [](const auto& info) {
                           return info.param == sqlite::Synchronous::full ? "full" : "normal";
                         });

}  // namespace
}  // namespace beehive::test
