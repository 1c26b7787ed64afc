// Schema-version migration: lazy per-column conversion through a Migrator, re-stamping
// on write, downgrades refused on every path.

#include <caf/scoped_actor.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

// Version 0: unversioned.
struct SpecV0 {
  std::string name;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpecV0, name)

// Version 1: `name` renamed to `title`.
struct SpecV1 {
  std::string title;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpecV1, title)

// Version 2: `title` ("first last") split in two.
struct SpecV2 {
  std::string first;
  std::string last;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpecV2, first, last)

struct StatusV {
  int seen = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StatusV, seen)

nlohmann::json rename(nlohmann::json j) { return {{"title", j.at("name")}}; }
nlohmann::json split(nlohmann::json j) {
  auto t = j.at("title").get<std::string>();
  auto sp = t.find(' ');
  return {{"first", t.substr(0, sp)}, {"last", sp == std::string::npos ? "" : t.substr(sp + 1)}};
}

class MigratorV1 : public Migrator {
 public:
  int schema_version_spec() const override { return 1; }
  int schema_version_status() const override { return 1; }
  nlohmann::json convert_spec(int from, nlohmann::json raw) const override {
    if (from == 0) return rename(std::move(raw));
    throw std::runtime_error("unknown version");
  }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }
};

class MigratorV2 : public Migrator {
 public:
  int schema_version_spec() const override { return 2; }
  int schema_version_status() const override { return 1; }
  nlohmann::json convert_spec(int from, nlohmann::json raw) const override {
    if (from == 0) raw = rename(std::move(raw));
    return split(std::move(raw));
  }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }
};

/// A build at the given versions whose shapes did not change: converts nothing.
template <int SpecVersion, int StatusVersion>
class Identity : public Migrator {
 public:
  int schema_version_spec() const override { return SpecVersion; }
  int schema_version_status() const override { return StatusVersion; }
  nlohmann::json convert_spec(int, nlohmann::json raw) const override { return raw; }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }
};

/// Status v0 stored `count`; v1 calls it `seen` (StatusV). Specs stay unversioned.
struct StatusV0 {
  int count = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StatusV0, count)

class StatusRename : public Migrator {
 public:
  int schema_version_spec() const override { return 0; }
  int schema_version_status() const override { return 1; }
  nlohmann::json convert_spec(int, nlohmann::json) const override {
    throw std::runtime_error("specs are not versioned");
  }
  nlohmann::json convert_status(int from, nlohmann::json raw) const override {
    if (from == 0) return {{"seen", raw.at("count")}};
    throw std::runtime_error("unknown version");
  }
};

/// Always refuses: a converter that throws.
class BrokenMigrator : public MigratorV1 {
 public:
  nlohmann::json convert_spec(int, nlohmann::json) const override {
    throw std::runtime_error("cannot convert");
  }
};

const GroupKind person_kind{"acme.com", "Person"};

class MigrationTest : public ::testing::Test {
 protected:
  template <class Spec, class M = void>
  void open(std::shared_ptr<Migrator> m = nullptr) {
    close();
    store_ = open_test_store(dir_.file("m.db"));
    bh_ = std::make_unique<Beehive>(store_, with_clock(clock_));
    if (m)
      cc_ = std::make_shared<ControllerClient<StatusV>>(register_controller<Spec, StatusV>(
          *bh_, person_kind,
          [this](auto&, auto&, auto& o) {
            std::lock_guard lk(mu_);
            ++reconciles_[o.id];
            return Result{};
          },
          with_migrator(m)));
  }
  void close() {
    cc_.reset();
    bh_.reset();
    store_.reset();
  }
  void TearDown() override { close(); }
  /// The object's stored `columns`, as the database holds them.
  std::vector<std::vector<std::string>> stored(ObjectID id, const std::string& columns) {
    return query_test_store(dir_.file("m.db"),
                            "SELECT " + columns + " FROM objects WHERE id = " + std::to_string(id));
  }
  std::pair<int, int> versions(ObjectID id) {
    auto rows = query_test_store(
        dir_.file("m.db"),
        "SELECT spec_version, status_version FROM objects WHERE id = " + std::to_string(id));
    if (rows.size() != 1) throw std::runtime_error("no object " + std::to_string(id));
    return {std::stoi(rows[0].at(0)), std::stoi(rows[0].at(1))};
  }

  TempDir dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  std::shared_ptr<ControllerClient<StatusV>> cc_;
  int reconciles(ObjectID id) {
    std::lock_guard lk(mu_);
    return reconciles_[id];
  }
  std::mutex mu_;
  std::map<ObjectID, int> reconciles_;
  Context ctx_;
};

TEST_F(MigrationTest, UpgradeStoryAcrossRestarts) {
  open<SpecV0>();
  auto a = Client<SpecV0, StatusV>(*bh_, person_kind).create(ctx_, {"Ada Lovelace"});
  auto b = Client<SpecV0, StatusV>(*bh_, person_kind).create(ctx_, {"Alan Turing"});
  EXPECT_EQ(versions(a.id), std::make_pair(0, 0));

  // v1: a migrator added to a kind that already has unversioned rows.
  open<SpecV1>(std::make_shared<MigratorV1>());
  Client<SpecV1, StatusV> v1(*bh_, person_kind);
  EXPECT_EQ(v1.get(ctx_, a.id).spec.title, "Ada Lovelace");
  EXPECT_EQ(versions(a.id), std::make_pair(0, 0));  // lazy: reading writes nothing
  v1.update(ctx_, b.id, {"Alan M. Turing"});
  EXPECT_EQ(versions(b.id), std::make_pair(1, 0));
  cc_->update_status(ctx_, a.id, 1, {7});  // a status-only write re-stamps only status
  EXPECT_EQ(versions(a.id), std::make_pair(0, 1));

  // v2: rows at 0 and at 1 both convert up.
  open<SpecV2>(std::make_shared<MigratorV2>());
  Client<SpecV2, StatusV> v2(*bh_, person_kind);
  auto all = v2.list(ctx_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].spec.first, "Ada");
  EXPECT_EQ(all[0].spec.last, "Lovelace");
  EXPECT_EQ(all[0].status->seen, 7);
  EXPECT_EQ(all[1].spec.first, "Alan");
  EXPECT_EQ(all[1].spec.last, "M. Turing");
  EXPECT_EQ(versions(b.id), std::make_pair(1, 0));  // reading rewrote nothing
  auto s = v2.watch_list(ctx_);                     // watches decode through it too
  std::map<ObjectID, std::string> firsts;
  for (int i = 0; i < 2; ++i) {
    auto c = s.next_for(5s);
    ASSERT_TRUE(c.has_value());
    firsts[c->object.id] = c->object.spec.first;
  }
  EXPECT_EQ(firsts[a.id], "Ada");
  EXPECT_EQ(firsts[b.id], "Alan");
  v2.update(ctx_, a.id, {"Ada", "King"});
  EXPECT_EQ(versions(a.id), std::make_pair(2, 1));
  auto stop = bh_->start(ctx_);  // the reconcile loop decodes through the migrator too
  EXPECT_TRUE(eventually([&] { return reconciles(a.id) == 1 && reconciles(b.id) == 1; }));
  EXPECT_EQ(versions(b.id), std::make_pair(1, 0));  // nor did start: no bulk rewrite
  stop(ctx_);
}

// Re-applying the spec an object holds is no write, also when the build added a migrator
// since: an older blob that converts to the very bytes written holds that spec already
// (re-applying every object after deploying a migrator reconciled each one again).
// It is re-stamped by its next real write.
TEST_F(MigrationTest, TheSpecAnOlderBlobConvertsToIsNoWriteAtANewerVersion) {
  open<SpecV0>();
  auto a = Client<SpecV0, StatusV>(*bh_, person_kind).create(ctx_, {"same"}, with_slug("a"));
  auto grace = Client<SpecV0, StatusV>(*bh_, person_kind).create(ctx_, {"Grace Hopper"});
  const auto rv = Client<SpecV0, StatusV>(*bh_, person_kind).get(ctx_, grace.id).resource_version;
  open<SpecV0>(std::make_shared<Identity<1, 1>>());
  Client<SpecV0, StatusV> c(*bh_, person_kind);
  EXPECT_EQ(c.update(ctx_, a.id, {"same"}).generation, 1);
  EXPECT_EQ(c.create_or_update(ctx_, "a", {"same"}).generation, 1);
  EXPECT_EQ(versions(a.id).first, 0);                // not re-stamped: no write at all
  auto changed = c.update(ctx_, a.id, {"changed"});  // a real write re-stamps it
  EXPECT_EQ(changed.generation, 2);
  EXPECT_EQ(versions(a.id).first, 1);
  // Converted, not just the same bytes: v0's "Grace Hopper" is v2's {Grace, Hopper}.
  open<SpecV2>(std::make_shared<MigratorV2>());
  Client<SpecV2, StatusV> v2(*bh_, person_kind);
  auto same = v2.update(ctx_, grace.id, {"Grace", "Hopper"});
  EXPECT_EQ(same.generation, 1);
  EXPECT_EQ(same.resource_version, rv);
  EXPECT_EQ(versions(grace.id).first, 0);
  EXPECT_EQ(v2.update(ctx_, grace.id, {"Grace", "Brewster"}).generation, 2);
  EXPECT_EQ(versions(grace.id).first, 2);
}

TEST_F(MigrationTest, IdenticalStatusBytesAtANewerVersionAreARealWrite) {
  open<SpecV0>(std::make_shared<Identity<0, 0>>());
  auto a = Client<SpecV0, StatusV>(*bh_, person_kind).create(ctx_, {"x"});
  cc_->update_status(ctx_, a.id, 1, {5});
  auto before = Client<SpecV0, StatusV>(*bh_, person_kind).get(ctx_, a.id).resource_version;
  EXPECT_EQ(versions(a.id), std::make_pair(0, 0));
  open<SpecV0>(std::make_shared<Identity<0, 1>>());
  Client<SpecV0, StatusV> c(*bh_, person_kind);
  cc_->update_status(ctx_, a.id, 1, {5});
  EXPECT_EQ(versions(a.id), std::make_pair(0, 1));
  auto after = c.get(ctx_, a.id).resource_version;
  EXPECT_GT(after, before);
  cc_->update_status(ctx_, a.id, 1, {5});  // now the same bytes at the same version
  EXPECT_EQ(c.get(ctx_, a.id).resource_version, after);
}

TEST_F(MigrationTest, StatusBlobsConvertOnReadAndDowngradesAreRefused) {
  open<SpecV0>();
  ObjectID a = 0;
  {
    auto cc0 = register_controller<SpecV0, StatusV0>(*bh_, person_kind,
                                                     [](auto&, auto&, auto&) { return Result{}; });
    a = Client<SpecV0, StatusV0>(*bh_, person_kind).create(ctx_, {"Ada"}).id;
    cc0.update_status(ctx_, a, 1, {3});
  }
  open<SpecV0>(std::make_shared<StatusRename>());
  Client<SpecV0, StatusV> c(*bh_, person_kind);
  EXPECT_EQ(c.get(ctx_, a).status->seen, 3);
  EXPECT_EQ(c.list(ctx_).at(0).status->seen, 3);
  auto s = c.watch(ctx_, a);
  auto first = s.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->object.status->seen, 3);
  s.close();
  EXPECT_EQ(versions(a), std::make_pair(0, 0));  // lazy
  cc_->update_status(ctx_, a, 1, {4});
  EXPECT_EQ(versions(a), std::make_pair(0, 1));

  open<SpecV0>(std::make_shared<Identity<0, 2>>());  // a newer build writes status v2
  cc_->update_status(ctx_, a, 1, {5});
  EXPECT_EQ(versions(a), std::make_pair(0, 2));
  open<SpecV0>(std::make_shared<StatusRename>());  // the older build again
  Client<SpecV0, StatusV> older(*bh_, person_kind);
  EXPECT_ERRC(older.get(ctx_, a), errc::schema_version_downgrade);
  EXPECT_ERRC(cc_->update_status(ctx_, a, 1, {6}), errc::schema_version_downgrade);
}

TEST_F(MigrationTest, AnUnversionedReaderTakesVersionedBlobsAsTheyAre) {
  open<SpecV2>(std::make_shared<MigratorV2>());
  auto v2 = Client<SpecV2, StatusV>(*bh_, person_kind).create(ctx_, {"Grace", "Hopper"});
  close();
  open<SpecV2>();  // a client-only build of the kind: no migrator, version 0
  auto got = Client<SpecV2, StatusV>(*bh_, person_kind).get(ctx_, v2.id);
  EXPECT_EQ(got.spec.first, "Grace");
  EXPECT_EQ(got.spec.last, "Hopper");
}

// It cannot write over them at version 0, though: the kind's application would convert
// what it wrote as the oldest format. It writes at a version it states (an actor's
// request), which the application then reads as it is.
TEST_F(MigrationTest, AClientOnlyProcessWritesOverAVersionedBlobOnlyAtAVersionItStates) {
  open<SpecV2>(std::make_shared<MigratorV2>());
  auto v2 = Client<SpecV2, StatusV>(*bh_, person_kind).create(ctx_, {"Grace", "Hopper"});
  close();
  open<SpecV2>();  // client-only: no migrator
  Client<SpecV2, StatusV> client_only(*bh_, person_kind);
  EXPECT_ERRC(client_only.update(ctx_, v2.id, {"Grace", "Brewster"}),
              errc::schema_version_downgrade);
  EXPECT_EQ(client_only.get(ctx_, v2.id).spec.last, "Hopper");
  EXPECT_EQ(versions(v2.id).first, 2);
  {  // the actor ends before the beehive, whose end waits for it
    auto writer = bh_->store_writer();
    caf::scoped_actor self{writer->home_system()};
    update_request stated{person_kind, v2.id, nlohmann::json(SpecV2{"Grace", "Brewster"}).dump(),
                          2};
    self->request(writer, caf::infinite, stated)
        .receive([](const ObjectRow& row) { EXPECT_EQ(row.spec_version, 2); },
                 [](caf::error& e) { ADD_FAILURE() << to_string(e); });
  }
  close();
  open<SpecV2>(std::make_shared<MigratorV2>());
  auto got = Client<SpecV2, StatusV>(*bh_, person_kind).get(ctx_, v2.id);
  EXPECT_EQ(got.spec.first, "Grace");
  EXPECT_EQ(got.spec.last, "Brewster");
}

TEST_F(MigrationTest, ADowngradeIsRefusedOnEveryPath) {
  // The newer build kept v1's shape, so only the version check tells the row apart.
  open<SpecV1>(std::make_shared<Identity<2, 1>>());
  auto newer =
      Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Grace Hopper"}, with_slug("g"));
  close();
  open<SpecV1>(std::make_shared<MigratorV1>());  // an older build
  Client<SpecV1, StatusV> v1(*bh_, person_kind);
  auto ok = v1.create(ctx_, {"Ok Row"});
  EXPECT_ERRC(v1.get(ctx_, newer.id), errc::schema_version_downgrade);
  EXPECT_ERRC(v1.get_by_slug(ctx_, "g"), errc::schema_version_downgrade);
  ::testing::internal::CaptureStderr();
  auto all = v1.list(ctx_);  // skipped and logged
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, ok.id);
  auto s = v1.watch_list(ctx_);
  auto first = s.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->object.id, ok.id);
  EXPECT_FALSE(s.next_for(30ms).has_value());
  auto stop = bh_->start(ctx_);  // the reconcile loop quarantines it
  EXPECT_TRUE(eventually([&] { return reconciles(ok.id) == 1; }));
  beehive::testing::settle(*bh_, ctx_);
  EXPECT_EQ(reconciles(newer.id), 0);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("quarantined Person.acme.com " + std::to_string(newer.id)), std::string::npos)
      << err;
  EXPECT_ERRC(v1.update(ctx_, newer.id, {"Overwrite"}), errc::schema_version_downgrade);
  // Refused before its commit: nothing written (the version and labels as they were).
  auto as_it_was = stored(newer.id, "resource_version, labels");
  EXPECT_ERRC(v1.set_labels(ctx_, newer.id, {{"tier", "gold"}}), errc::schema_version_downgrade);
  EXPECT_EQ(stored(newer.id, "resource_version, labels"), as_it_was);
  // A deletion-pending poison row is still collected: GC needs no decode.
  v1.remove(ctx_, newer.id);
  EXPECT_TRUE(eventually([&] {
    try {
      Client<SpecV0, StatusV>(*bh_, person_kind).get(ctx_, newer.id);
      return false;
    } catch (const Error& e) {
      return e.code() == errc::not_found;
    }
  }));
  stop(ctx_);
}

// A rollback to a build whose controller does not version the kind (no migrator, or a
// version of 0) quarantines the rows a newer build versioned: it would read them as its
// own format, and its status writes over them are refused, which failed every pass,
// retried with backoff for ever.
TEST_F(MigrationTest, AControllerThatDoesNotVersionAColumnQuarantinesRowsVersionedThere) {
  open<SpecV1>(std::make_shared<Identity<0, 1>>());  // versions the status alone
  auto plain = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Ada"});
  auto status_versioned = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Grace"});
  cc_->update_status(ctx_, status_versioned.id, 1, {3});
  open<SpecV1>(std::make_shared<Identity<1, 0>>());  // versions the spec alone
  auto spec_versioned = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Edsger"});
  ASSERT_EQ(versions(status_versioned.id), std::make_pair(0, 1));
  ASSERT_EQ(versions(spec_versioned.id), std::make_pair(1, 0));
  for (bool with_a_migrator : {false, true}) {
    SCOPED_TRACE(with_a_migrator ? "a migrator at version 0" : "no migrator");
    close();
    reconciles_.clear();
    store_ = open_test_store(dir_.file("m.db"));
    bh_ = std::make_unique<Beehive>(store_, with_clock(clock_));
    auto count = [this](auto&, auto&, auto& o) {
      std::lock_guard lk(mu_);
      ++reconciles_[o.id];
      return Result{};
    };
    if (with_a_migrator)
      register_controller<SpecV1, StatusV>(*bh_, person_kind, count,
                                           with_migrator(std::make_shared<Identity<0, 0>>()));
    else
      register_controller<SpecV1, StatusV>(*bh_, person_kind, count);
    ::testing::internal::CaptureStderr();
    auto stop = bh_->start(ctx_);
    EXPECT_TRUE(eventually([&] { return reconciles(plain.id) == 1; }));
    beehive::testing::settle(*bh_, ctx_);
    clock_->advance(1min);  // a retry would have come by now
    beehive::testing::settle(*bh_, ctx_);
    stop(ctx_);
    auto err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(reconciles(status_versioned.id), 0);
    EXPECT_EQ(reconciles(spec_versioned.id), 0);
    for (auto id : {status_versioned.id, spec_versioned.id})
      EXPECT_NE(err.find("quarantined Person.acme.com " + std::to_string(id)), std::string::npos)
          << err;
    EXPECT_NE(err.find("status written at schema version 1, which this build does not version"),
              std::string::npos)
        << err;
    EXPECT_EQ(err.find("retrying"), std::string::npos) << err;
  }
}

// A request from an actor brings no types to decode the written row back with, as the
// blocking Client does: the writes that decode back are refused all the same when the row
// holds a status this build cannot read, and write nothing.
TEST_F(MigrationTest, AnActorsWriteOverANewerStatusIsRefusedToo) {
  open<SpecV1>(std::make_shared<Identity<1, 2>>());  // a newer build: status at 2
  auto newer = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Ada"}, with_slug("a"));
  cc_->update_status(ctx_, newer.id, newer.generation, {3});
  close();
  open<SpecV1>(std::make_shared<Identity<1, 1>>());  // an older one reads status up to 1
  const std::string columns = "resource_version, spec, labels";
  auto as_it_was = stored(newer.id, columns);
  auto writer = bh_->store_writer();
  caf::scoped_actor self{writer->home_system()};
  auto refused = [&](const auto& request) {
    errc code{};
    self->request(writer, caf::infinite, request)
        .receive([](const ObjectRow&) { ADD_FAILURE() << "written"; },
                 [&](caf::error& e) { code = to_errc(e).value_or(errc::store); });
    return code;
  };
  const auto spec = nlohmann::json(SpecV1{"Ada Lovelace"}).dump();
  EXPECT_EQ(refused(update_request{person_kind, newer.id, spec}), errc::schema_version_downgrade);
  create_or_update_request cu;
  cu.gk = person_kind;
  cu.slug = "a";
  cu.spec = spec;
  EXPECT_EQ(refused(cu), errc::schema_version_downgrade);
  EXPECT_EQ(refused(set_labels_request{person_kind, newer.id, {{"tier", "gold"}}}),
            errc::schema_version_downgrade);
  EXPECT_EQ(stored(newer.id, columns), as_it_was);
}

// A watch skips what this build cannot read, but its position never passes it: the
// same watch resumed by a build that reads the row delivers it. A removal of such a row
// arrives all the same, with the row's metadata (a reader's cache drops it).
TEST_F(MigrationTest, AWatchResumedAfterAnUpgradeDeliversWhatItSkipped) {
  open<SpecV1>(std::make_shared<MigratorV1>());  // an older build
  auto ok = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Ok Row"});
  close();
  open<SpecV1>(std::make_shared<Identity<2, 1>>());  // a newer one
  auto newer = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"Grace Hopper"});
  close();
  open<SpecV1>(std::make_shared<MigratorV1>());  // the older again
  Client<SpecV1, StatusV> v1(*bh_, person_kind);
  ::testing::internal::CaptureStderr();
  auto s = v1.watch_list(ctx_);
  auto first = s.next_for(5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->object.id, ok.id);
  EXPECT_FALSE(s.next_for(30ms).has_value());
  auto position = s.resource_version();
  EXPECT_LT(position, newer.resource_version);
  auto later = v1.create(ctx_, {"Later Row"});
  ASSERT_EQ(s.next_for(5s)->object.id, later.id);
  EXPECT_LT(s.resource_version(), newer.resource_version);  // still held below it
  s.close();
  ::testing::internal::GetCapturedStderr();
  close();

  open<SpecV1>(std::make_shared<Identity<2, 1>>());  // upgraded
  Client<SpecV1, StatusV> v2(*bh_, person_kind);
  auto resumed = v2.watch_list(ctx_, with_resume_from(position));
  std::set<ObjectID> seen;
  for (int i = 0; i < 2; ++i) {
    auto c = resumed.next_for(5s);
    ASSERT_TRUE(c.has_value());
    seen.insert(c->object.id);
  }
  // And the later row again: a resume replays everything above the position.
  EXPECT_EQ(seen, (std::set<ObjectID>{newer.id, later.id}));
  resumed.close();
  close();

  open<SpecV1>(std::make_shared<MigratorV1>());  // the older build again
  Client<SpecV1, StatusV> old(*bh_, person_kind);
  ::testing::internal::CaptureStderr();
  auto watch = old.watch(ctx_, newer.id);
  auto stop = bh_->start(ctx_);
  old.remove(ctx_, newer.id);  // collected at once: no finalizers
  auto gone = watch.next_for(5s);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->type, ChangeType::Deleted);
  EXPECT_EQ(gone->object.id, newer.id);
  EXPECT_FALSE(gone->object.status.has_value());
  // Delivered, the removal lifts what was held below the row: the position moves on.
  EXPECT_GE(watch.resource_version(), gone->object.resource_version);
  stop(ctx_);
}

TEST_F(MigrationTest, AConverterThatThrowsIsADecodeError) {
  open<SpecV0>();
  auto a = Client<SpecV0, StatusV>(*bh_, person_kind).create(ctx_, {"x"});
  open<SpecV1>(std::make_shared<BrokenMigrator>());
  Client<SpecV1, StatusV> c(*bh_, person_kind);
  EXPECT_ERRC(c.get(ctx_, a.id), errc::decode);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(c.list(ctx_).empty());
  ::testing::internal::GetCapturedStderr();
}

// Versions count up from 0, the unversioned baseline: a migrator at a negative version
// would take every stored blob (at 0 or above) for a downgrade. register_controller
// refuses it, and the kind stays unregistered.
TEST_F(MigrationTest, AMigratorAtANegativeVersionIsRefusedAtRegistration) {
  store_ = open_test_store(dir_.file("m.db"));
  bh_ = std::make_unique<Beehive>(store_, with_clock(clock_));
  auto reconcile = [](auto&, auto&, auto&) { return Result{}; };
  EXPECT_ERRC_WITH(
      (register_controller<SpecV1, StatusV>(*bh_, person_kind, reconcile,
                                            with_migrator(std::make_shared<Identity<-1, 0>>()))),
      errc::invalid_argument, "schema versions");
  EXPECT_ERRC(
      (register_controller<SpecV1, StatusV>(*bh_, person_kind, reconcile,
                                            with_migrator(std::make_shared<Identity<1, -2>>()))),
      errc::invalid_argument);
  register_controller<SpecV1, StatusV>(*bh_, person_kind, reconcile,
                                       with_migrator(std::make_shared<Identity<1, 0>>()));
  auto stop = bh_->start(ctx_);
  auto a = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"t"});
  EXPECT_EQ(versions(a.id), std::make_pair(1, 0));
}

/// A kind this Beehive wrote before its controller was registered holds rows stamped
/// version 0 in this build's shape: a migrator registered afterwards would convert them
/// as version 0 ones. Registering it then is refused, whether the write came through a
/// Client or a request to the store_writer; nothing else changes (a metrics sink shows
/// no series of the refused controller).
TEST_F(MigrationTest, AMigratorRegisteredAfterTheKindWasWrittenIsRefused) {
  store_ = open_test_store(dir_.file("m.db"));
  auto prom = std::make_shared<PrometheusMetrics>();
  bh_ = std::make_unique<Beehive>(store_, with_clock(clock_), with_metrics(prom));
  Client<SpecV2, StatusV> c(*bh_, person_kind);
  auto a = c.create(ctx_, {"Grace", "Hopper"});
  auto reconcile = [](auto&, auto&, auto&) { return Result{}; };
  EXPECT_ERRC_WITH(
      (register_controller<SpecV2, StatusV>(*bh_, person_kind, reconcile,
                                            with_migrator(std::make_shared<MigratorV2>()))),
      errc::invalid_argument, "register the controller before");
  EXPECT_EQ(prom->text().find("Person"), std::string::npos) << prom->text();
  EXPECT_EQ(c.get(ctx_, a.id).spec.first, "Grace");
  EXPECT_EQ(versions(a.id), std::make_pair(0, 0));

  const GroupKind other{"acme.com", "Robot"};
  {
    auto writer = bh_->store_writer();
    caf::scoped_actor self{writer->home_system()};
    self->request(writer, caf::infinite,
                  create_request{other, nlohmann::json(SpecV2{"R", "2"}).dump()})
        .receive([](const ObjectRow& row) { EXPECT_EQ(row.spec_version, 0); },
                 [](caf::error& e) { ADD_FAILURE() << to_string(e); });
  }
  EXPECT_ERRC((register_controller<SpecV2, StatusV>(
                  *bh_, other, reconcile, with_migrator(std::make_shared<Identity<1, 0>>()))),
              errc::invalid_argument);

  // A migrator that versions only the status reads those specs as they are; so does none.
  register_controller<SpecV2, StatusV>(*bh_, person_kind, reconcile,
                                       with_migrator(std::make_shared<Identity<0, 1>>()));
  register_controller<SpecV2, StatusV>(*bh_, other, reconcile);
  auto stop = bh_->start(ctx_);
  EXPECT_EQ(c.get(ctx_, a.id).spec.last, "Hopper");
  EXPECT_EQ(versions(c.create(ctx_, {"Ada", "Lovelace"}).id), std::make_pair(0, 0));
}

// Through the actor surface likewise, for the version a request leaves unset: a status
// stored at status version 0 refuses a migrator that versions statuses; a spec given its
// version, and writes that store no versioned blob (labels), refuse nothing.
TEST_F(MigrationTest, AnActorsWriteBeforeRegistrationRefusesAMigratorOnlyForTheVersionItLeftUnset) {
  store_ = open_test_store(dir_.file("m.db"));
  bh_ = std::make_unique<Beehive>(store_, with_clock(clock_));
  auto writer = bh_->store_writer();
  caf::scoped_actor self{writer->home_system()};
  auto write = [&](auto request) {
    ObjectRow out;
    self->request(writer, caf::infinite, std::move(request))
        .receive([&](const ObjectRow& row) { out = row; },
                 [](caf::error& e) { ADD_FAILURE() << to_string(e); });
    return out;
  };
  const GroupKind statuses{"acme.com", "Statuses"}, labelled{"acme.com", "Labelled"};
  auto s = write(create_request{statuses, nlohmann::json(SpecV2{"S", "1"}).dump(), {}, {}, {}, 1});
  write(update_status_request{statuses, s.meta.id, 1, nlohmann::json(StatusV{3}).dump()});
  auto l = write(create_request{labelled, nlohmann::json(SpecV2{"L", "1"}).dump(), {}, {}, {}, 1});
  write(set_labels_request{labelled, l.meta.id, {{"tier", "web"}}});
  auto reconcile = [](auto&, auto&, auto&) { return Result{}; };
  EXPECT_ERRC_WITH(
      (register_controller<SpecV2, StatusV>(*bh_, statuses, reconcile,
                                            with_migrator(std::make_shared<Identity<1, 1>>()))),
      errc::invalid_argument, "at status version 0");
  // Its specs were given their version: a migrator of specs alone is taken.
  register_controller<SpecV2, StatusV>(*bh_, statuses, reconcile,
                                       with_migrator(std::make_shared<Identity<1, 0>>()));
  register_controller<SpecV2, StatusV>(*bh_, labelled, reconcile,
                                       with_migrator(std::make_shared<Identity<1, 1>>()));
}

// Only a write that stores a row leaves that mark: one that failed before registration
// (no such object, no such owner, a slug taken, a context that ended) wrote nothing a
// migrator could misread, and does not refuse it.
TEST_F(MigrationTest, AWriteThatFailedBeforeRegistrationDoesNotRefuseAMigrator) {
  store_ = open_test_store(dir_.file("m.db"));
  {
    Beehive earlier(store_, with_clock(clock_));
    register_controller<SpecV2, StatusV>(
        earlier, person_kind, [](auto&, auto&, auto&) { return Result{}; },
        with_migrator(std::make_shared<MigratorV2>()));
    Client<SpecV2, StatusV>(earlier, person_kind)
        .create(ctx_, {"Grace", "Hopper"}, with_slug("grace"));
  }
  bh_ = std::make_unique<Beehive>(store_, with_clock(clock_));
  Client<SpecV2, StatusV> c(*bh_, person_kind);
  EXPECT_ERRC(c.update(ctx_, 12345, {"Ada", "Lovelace"}), errc::not_found);
  EXPECT_ERRC(c.create(ctx_, {"Ada", "Lovelace"}, with_owner(12345)), errc::not_found);
  EXPECT_ERRC(c.create(ctx_, {"Ada", "Lovelace"}, with_slug("grace")), errc::already_exists);
  auto [grace, created] = c.get_or_create(ctx_, "grace", {"Ada", "Lovelace"});
  EXPECT_FALSE(created);  // read, not written
  auto [done, cancel] = ctx_.with_cancel();
  cancel();
  EXPECT_ERRC(c.create(done, {"Ada", "Lovelace"}), errc::cancelled);
  register_controller<SpecV2, StatusV>(
      *bh_, person_kind, [](auto&, auto&, auto&) { return Result{}; },
      with_migrator(std::make_shared<MigratorV2>()));
  auto stop = bh_->start(ctx_);
  EXPECT_EQ(c.get(ctx_, grace.id).spec.last, "Hopper");
}

TEST_F(MigrationTest, AMigratorGivenToTheBeehiveIsIgnored) {
  // with_migrator is for registered kinds only: the kind stays unversioned.
  store_ = open_test_store(dir_.file("m.db"));
  bh_ = std::make_unique<Beehive>(store_, with_migrator(std::make_shared<MigratorV1>()));
  auto a = Client<SpecV1, StatusV>(*bh_, person_kind).create(ctx_, {"plain"});
  EXPECT_EQ(versions(a.id), std::make_pair(0, 0));
}

}  // namespace
}  // namespace beehive::test
