// The SQLite store: opening, schema versioning, durability across restarts.

#include <future>
#include <optional>

#include <SQLiteCpp/SQLiteCpp.h>

#include "beehive_core.hpp"
#include "fixture.hpp"
#include "schema_downgrade.hpp"
#include "store/sqlite/run_lock.hpp"
#include "store/sqlite/sqlite_connection.hpp"

namespace beehive::test {
namespace {

TEST(StoreTest, OpenCreatesTheFileAndItsFolders) {
  TempDir dir;
  auto path = dir.path() / "a" / "b" / "c.db";
  auto store = sqlite::open(path);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_NE(store->describe().find("c.db"), std::string::npos);
}

TEST(StoreTest, OpenUsesWalAndRecordsTheSchemaVersion) {
  TempDir dir;
  auto path = dir.file("s.db");
  { auto store = sqlite::open(path); }
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "wal");
  EXPECT_EQ(db.execAndGet("SELECT version FROM beehive_schema").getInt(), 10);
}

// A newer build opened beside a running beehive of an older one (a rolling deploy)
// does not migrate the file under it: the running one could write no more.
TEST(StoreTest, AnOlderSchemaThatABeehiveRunsOnIsNotMigrated) {
  TempDir dir;
  auto path = dir.file("old.db");
  { auto store = sqlite::open(path); }
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    downgrade_schema(db, 9);
  }
  auto schema = [&] {
    SQLite::Database db(path.string(), SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT version FROM beehive_schema").getInt();
  };
  {
    // The older build's run lock (taken here: flock conflicts within one process too).
    auto running = store::RunLock::acquire(std::filesystem::canonical(path), 1);
    EXPECT_ERRC_WITH(sqlite::open(path), errc::store_in_use, "older schema 9");
    EXPECT_EQ(schema(), 9);
  }
  auto store = sqlite::open(path);  // nothing runs now
  EXPECT_EQ(schema(), 10);
}

TEST(StoreTest, AnOlderSchemaIsMigratedForwardKeepingItsRows) {
  TempDir dir;
  auto path = dir.file("old.db");
  Context ctx;
  ObjectID id;
  {
    auto store = sqlite::open(path);
    Beehive bh(store);
    id = Widgets(bh, widget_kind).create(ctx, {"kept", 1}).id;
  }
  {  // turn the file back into a version-1 database
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    downgrade_schema(db, 1);
    // A condition written by the old version: the migration counts it.
    db.exec(
        "INSERT INTO conditions (object_id, type, status, reason, message, "
        "last_transition_at) VALUES (" +
        std::to_string(id) + ", 'Ready', 'True', 'Up', 'kept too', 0)");
  }
  auto store = sqlite::open(path);
  Beehive bh(store);
  auto kept = Widgets(bh, widget_kind).get(ctx, id);
  EXPECT_EQ(kept.spec.color, "kept");
  ASSERT_EQ(kept.conditions.size(), 1u);
  EXPECT_EQ(kept.conditions[0].type, "Ready");
  EXPECT_EQ(kept.conditions[0].message, "kept too");
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT version FROM beehive_schema").getInt(), 10);
  EXPECT_EQ(
      db.execAndGet("SELECT count(*) FROM sqlite_master WHERE name = 'objects_unsettled'").getInt(),
      1);
  EXPECT_EQ(
      db.execAndGet("SELECT count(*) FROM sqlite_master WHERE name = 'events_by_run'").getInt(), 1);
  EXPECT_EQ(
      db.execAndGet("SELECT count(*) FROM sqlite_master WHERE name = 'events_by_age'").getInt(), 1);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM sqlite_master WHERE name = 'objects_collectible'")
                .getInt(),
            1);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM pragma_table_info('events') "
                          "WHERE name = 'resource_version'")
                .getInt(),
            1);
}

TEST(StoreTest, ReopeningKeepsTheSchemaAndStartsANewSession) {
  TempDir dir;
  auto path = dir.file("s.db");
  { auto store = sqlite::open(path); }
  { auto store = sqlite::open(path); }
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT value FROM beehive_meta WHERE key = 'session'").getInt(), 2);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM beehive_schema").getInt(), 1);
}

TEST(StoreTest, NewerSchemaIsRefused) {
  TempDir dir;
  auto path = dir.file("s.db");
  { auto store = sqlite::open(path); }
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    db.exec("UPDATE beehive_schema SET version = 999");
  }
  // Which file: an application may open several.
  EXPECT_ERRC_WITH(sqlite::open(path), errc::store,
                   "sqlite: cannot open " + std::filesystem::canonical(path).string() +
                       ": database schema version 999 is newer than this build's");
}

// A newer build that opens the file while this one runs migrates the schema under it:
// this process's next write is refused, as on PostgreSQL (it can no longer know what its
// rows mean), and its reads go on. Another process's ordinary commits change nothing.
TEST(StoreTest, ANewerBuildsMigrationStopsThisProcesssWrites) {
  TempDir dir;
  auto path = dir.file("s.db");
  Beehive bh(sqlite::open(path));
  Widgets w(bh, widget_kind);
  auto o = w.create({}, {"before", 1});
  {
    Beehive other(sqlite::open(path));  // another writer of the file
    Widgets(other, widget_kind).create({}, {"theirs", 1});
  }
  EXPECT_EQ(w.update({}, o.id, {"still", 2}).spec.color, "still");
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    db.exec("CREATE TABLE added_by_a_newer_build (x INTEGER)");
    db.exec("UPDATE beehive_schema SET version = version + 1");
  }
  EXPECT_ERRC_WITH(w.update({}, o.id, {"after", 3}), errc::store, "newer build");
  EXPECT_ERRC_WITH(w.create({}, {"after", 4}), errc::store, "newer build");
  EXPECT_EQ(w.get({}, o.id).spec.color, "still");
  EXPECT_EQ(w.list({}).size(), 2u);
}

TEST(StoreTest, NotADatabaseIsAStoreError) {
  TempDir dir;
  auto path = dir.file("junk.db");
  {
    std::ofstream f(path);
    f << std::string(4096, 'j');
  }
  EXPECT_ERRC(sqlite::open(path), errc::store);
}

// Another application's database, opened by mistake, is refused and left as it was: not
// switched to WAL, no beehive table added.
TEST(StoreTest, AnotherApplicationsDatabaseIsRefusedAndLeftAsItWas) {
  TempDir dir;
  auto path = dir.file("theirs.db");
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES ('ada')");
  }
  EXPECT_ERRC_WITH(sqlite::open(path), errc::store, "not a beehive database");
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "delete");
  EXPECT_EQ(db.execAndGet("SELECT group_concat(name) FROM sqlite_master").getString(), "customers");
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM customers").getInt(), 1);
}

// A path the process cannot even look at (here: a directory name longer than the
// system allows) is a store error, as every other open failure is.
TEST(StoreTest, AnUnusablePathIsAStoreError) {
  TempDir dir;
  EXPECT_ERRC(sqlite::open(dir.file(std::string(300, 'd')) / "b.db"), errc::store);
}

// Another process that removes the schema table makes the writes fail (errc::store)
// without leaving a transaction open: once the table is back, writes work again.
TEST(StoreTest, AWriteThatFindsTheSchemaTableGoneLeavesNoTransactionOpen) {
  TempDir dir;
  auto path = dir.file("s.db");
  Context ctx;
  auto store = sqlite::open(path);
  Beehive bh(store);
  Widgets w(bh, widget_kind);
  w.create(ctx, {"a", 1});
  SQLite::Database other(path.string(), SQLite::OPEN_READWRITE);
  other.exec("ALTER TABLE beehive_schema RENAME TO kept_aside");
  EXPECT_ERRC(w.create(ctx, {"b", 1}), errc::store);
  EXPECT_ERRC(w.create(ctx, {"c", 1}), errc::store);
  other.exec("ALTER TABLE kept_aside RENAME TO beehive_schema");
  EXPECT_NO_THROW(w.create(ctx, {"d", 1}));
  EXPECT_EQ(w.list(ctx).size(), 2u);
}

// A transaction far larger than the WAL's steady size leaves no file of its size
// behind: once the log starts over, the writer cuts the file back to the limit.
TEST(StoreTest, TheWalFileShrinksBackAfterALargeTransaction) {
  TempDir dir;
  auto path = dir.file("s.db");
  Context ctx;
  Beehive bh(sqlite::open(path));
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh, widget_kind);
  const std::string mib(1024 * 1024, 'x');
  cc.within(ctx, [&](const Context& tx) {
    for (int i = 0; i < 24; ++i) w.create(tx, {mib, i});
  });
  auto wal = dir.file("s.db-wal");
  ASSERT_GT(std::filesystem::file_size(wal), 24u * 1024 * 1024);
  // The commit checkpointed the log (nothing read meanwhile); the next write starts it
  // over and, at its commit, cuts the file.
  w.create(ctx, {"small", 1});
  EXPECT_LE(std::filesystem::file_size(wal), static_cast<std::uintmax_t>(store::wal_size_limit));
  EXPECT_EQ(w.list(ctx).size(), 25u);
}

TEST(StoreTest, ObjectsSurviveARestart) {
  TempDir dir;
  auto path = dir.file("r.db");
  Context ctx;
  ObjectID id;
  std::int64_t rv;
  {
    auto store = sqlite::open(path, {.synchronous = sqlite::Synchronous::full});
    Beehive bh(store);
    Widgets w(bh, widget_kind);
    auto o = w.create(ctx, {"red", 1}, with_slug("keep"), with_finalizers({"f"}));
    o = w.update(ctx, o.id, {"red", 2});
    w.create(ctx, {"gone", 1}, with_slug("del"), with_finalizers({"f"}));
    w.remove_by_slug(ctx, "del");
    id = o.id;
    rv = w.get_by_slug(ctx, "del").resource_version;
  }
  auto store = sqlite::open(path);
  Beehive bh(store);
  Widgets w(bh, widget_kind);
  auto o = w.get(ctx, id);
  EXPECT_EQ(o.slug, "keep");
  EXPECT_EQ(o.spec, (WidgetSpec{"red", 2}));
  EXPECT_EQ(o.generation, 2);
  EXPECT_EQ(o.finalizers, std::vector<std::string>{"f"});
  EXPECT_TRUE(w.get_by_slug(ctx, "del").deletion_requested_at.has_value());
  // Resource versions continue where they were, never reused.
  auto n = w.create(ctx, {"new", 1});
  EXPECT_GT(n.resource_version, rv);
  EXPECT_GT(n.id, id);
}

/// Two stores and beehives on one file, as two processes would have.
class TwoOnOneFileTest : public ::testing::Test {
 protected:
  TempDir dir;
  Context ctx;
  std::shared_ptr<Store> s1 = sqlite::open(dir.file("two.db")),
                         s2 = sqlite::open(dir.file("two.db"));
  Beehive a{s1}, b{s2};
  Widgets wa{a, widget_kind}, wb{b, widget_kind};
};

TEST_F(TwoOnOneFileTest, EachSeesTheOthersWrites) {
  auto o = wa.create(ctx, {"red", 1}, with_slug("shared"));
  EXPECT_EQ(wb.get_by_slug(ctx, "shared").id, o.id);
  EXPECT_ERRC(wb.create(ctx, {"red", 1}, with_slug("shared")), errc::already_exists);
}

TEST_F(TwoOnOneFileTest, WritersTakingTurnsNeverShareAnIdOrAVersion) {
  // Each writer counts ids and resource versions from memory, and must notice the
  // other's commits.
  std::vector<ObjectID> ids;
  std::vector<std::int64_t> rvs;
  auto made = [&](const auto& o) {
    ids.push_back(o.id);
    rvs.push_back(o.resource_version);
  };
  for (int i = 0; i < 20; ++i) {
    made(wa.create(ctx, {"a", i}));
    if (i % 3 == 0) wa.remove(ctx, ids.back());
    made(wb.create(ctx, {"b", i}));
    made(wb.update(ctx, ids.back(), {"b", i + 100}));
    made(wb.create(ctx, {"b", i}));
  }
  for (std::size_t i = 1; i < ids.size(); ++i) {
    EXPECT_LE(ids[i - 1], ids[i]) << i;  // an update repeats its object's id
    EXPECT_LT(rvs[i - 1], rvs[i]) << i;
  }
}

TEST(StoreTest, ManyReadersShareFewConnections) {
  TempDir dir;
  auto store = sqlite::open(dir.file("pool.db"), {.read_connections = 1});
  Beehive bh(store);
  Widgets w(bh, widget_kind);
  Context ctx;
  auto o = w.create(ctx, {"red", 1});
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      for (int j = 0; j < 50; ++j)
        if (w.get(ctx, o.id).id == o.id) ++ok;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 200);
}

// A read waiting for a free connection gives up at its caller's deadline, as any blocking
// call does.
TEST(StoreTest, AReadWaitingForAConnectionGivesUpAtItsCallersDeadline) {
  TempDir dir;
  Beehive bh(sqlite::open(dir.file("pool.db"), {.read_connections = 1}));
  Widgets w(bh, widget_kind);
  Context ctx;
  auto o = w.create(ctx, {"red", 1});
  auto held = std::make_optional(bh.core()->backend().reader());
  auto waiting = std::async(std::launch::async, [&] {
    w.get(Context{}.with_timeout(std::chrono::milliseconds(200)), o.id);
  });
  EXPECT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the read waited for the connection past its deadline";
  held.reset();
  EXPECT_ERRC(waiting.get(), errc::deadline_exceeded);
  EXPECT_EQ(w.get(ctx, o.id).spec.color, "red");
}

}  // namespace
}  // namespace beehive::test
