// Secure by default: files beehive creates are private whatever the umask, objects are
// bounded in size on both surfaces, and secrets in stored text do not reach the logs.

#include <sys/stat.h>

#include <cstdio>

#include <SQLiteCpp/SQLiteCpp.h>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

/// Sets the process umask for one test (each CTest test runs in a process of its own).
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

class FileModeTest : public ::testing::TestWithParam<mode_t> {};

TEST_P(FileModeTest, FilesAndDirectoriesBeehiveCreatesArePrivate) {
  Umask umask(GetParam());
  TempDir dir;
  auto db = dir.path() / "new" / "nested" / "beehive.db";
  {
    auto store = sqlite::open(db);
    Beehive bh(store);
    register_controller<WidgetSpec, WidgetStatus>(bh, widget_kind,
                                                  [](auto&, auto&, auto&) { return Result{}; });
    auto stop = bh.start(Context{});
    Widgets(bh, widget_kind).create(Context{}, {"a", 1});
    auto lock = db;
    lock += ".beehive-lock";
    auto wal = db;
    wal += "-wal";
    auto shm = db;
    shm += "-shm";
    EXPECT_EQ(mode_of(dir.path() / "new"), 0700u);
    EXPECT_EQ(mode_of(dir.path() / "new" / "nested"), 0700u);
    EXPECT_EQ(mode_of(db), 0600u);
    EXPECT_EQ(mode_of(wal), 0600u);
    EXPECT_EQ(mode_of(shm), 0600u);
    EXPECT_EQ(mode_of(lock), 0600u);
    stop(Context{});
  }
}

INSTANTIATE_TEST_SUITE_P(Umasks, FileModeTest, ::testing::Values(mode_t{022}, mode_t{027}));

TEST(FileModeTest, AnExistingReadableDatabaseKeepsItsModeAndIsWarnedAbout) {
  Umask umask(022);
  TempDir dir;
  auto db = dir.file("shared.db");
  { SQLite::Database create(db.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE); }
  ::chmod(db.c_str(), 0644);
  std::filesystem::create_directories(dir.path() / "kept");
  ::chmod((dir.path() / "kept").c_str(), 0755);
  LogCapture log;
  auto store = sqlite::open(db);
  Beehive bh(store, with_logger(log.logger()));
  auto stop = bh.start(Context{});
  EXPECT_EQ(mode_of(db), 0644u);  // left alone
  EXPECT_TRUE(log.contains("readable by every user"));
  stop(Context{});
  auto kept = sqlite::open(dir.path() / "kept" / "k.db");
  EXPECT_EQ(mode_of(dir.path() / "kept"), 0755u);  // an existing directory is left alone
  EXPECT_EQ(mode_of(dir.path() / "kept" / "k.db"), 0600u);
}

/// A spec of exactly `bytes` bytes of JSON text: {"color":"aaa…","size":0}.
WidgetSpec spec_of_size(std::size_t bytes) {
  return {std::string(bytes - std::string(R"({"color":"","size":0})").size(), 'a'), 0};
}

class SizeLimitTest : public BeehiveTest {
 protected:
  void SetUp() override {
    store_ = open_test_store(db_path());
    bh_ = std::make_unique<Beehive>(store_, with_max_object_bytes(100));
  }
};

TEST_F(SizeLimitTest, ASpecOrStatusOverTheLimitIsRefusedOnTheBlockingSurface) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto at_limit = w.create(ctx_, spec_of_size(100));
  EXPECT_ERRC_WITH(w.create(ctx_, spec_of_size(101)), errc::invalid_argument, "limit");
  EXPECT_ERRC(w.update(ctx_, at_limit.id, spec_of_size(101)), errc::invalid_argument);
  EXPECT_ERRC(w.create_or_update(ctx_, "s", spec_of_size(101)), errc::invalid_argument);
  EXPECT_EQ(w.list(ctx_).size(), 1u);  // nothing written
  EXPECT_EQ(w.get(ctx_, at_limit.id).resource_version, at_limit.resource_version);
  // A status: raw JSON, to size it exactly.
  auto raw = register_controller<nlohmann::json, nlohmann::json>(
      bh(), gadget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Client<nlohmann::json, nlohmann::json> gadgets(bh(), gadget_kind);
  auto g = gadgets.create(ctx_, nlohmann::json::object());
  auto status = [](std::size_t bytes) {  // {"s":"aaa…"}
    return nlohmann::json{{"s", std::string(bytes - 8, 'a')}};
  };
  EXPECT_NO_THROW(raw.update_status(ctx_, g.id, 1, status(100)));
  EXPECT_ERRC(raw.update_status(ctx_, g.id, 1, status(101)), errc::invalid_argument);
  EXPECT_EQ(gadgets.get(ctx_, g.id).status->at("s").get<std::string>().size(), 92u);
  // Events: a message over 64 KiB.
  EXPECT_ERRC(raw.record_event(ctx_, g.id, {"", EventType::Normal, "Big", std::string(65537, 'm')}),
              errc::invalid_argument);
  EXPECT_NO_THROW(
      raw.record_event(ctx_, g.id, {"", EventType::Normal, "Ok", std::string(65536, 'm')}));
  (void)cc;
}

// Labels count against the object's limit; a condition's text and an event's reason
// are bounded too, since they ride in every read and watch of the object (and a reason
// over its bound would make an unread event watch hold what the store does not).
TEST_F(SizeLimitTest, LabelsConditionsAndReasonsOverTheirBoundsAreRefused) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  Labels many;
  for (int i = 0; i < 20; ++i) many["k" + std::to_string(i)] = "0123";  // 20 * 6 bytes
  EXPECT_ERRC_WITH(w.create(ctx_, {"a", 1}, with_labels(many)), errc::invalid_argument, "labels");
  auto o = w.create(ctx_, {"a", 1}, with_labels({{"k", std::string(63, 'v')}}));
  EXPECT_ERRC(w.set_labels(ctx_, o.id, many), errc::invalid_argument);
  EXPECT_EQ(w.get(ctx_, o.id).labels.at("k").size(), 63u);
  // Refused whatever the store holds: an unchanged spec (no write), or a slug taken
  // (nothing created), alike.
  w.create(ctx_, {"b", 1}, with_slug("b"));
  EXPECT_ERRC_WITH(w.create_or_update(ctx_, "b", {"b", 1}, with_labels(many)),
                   errc::invalid_argument, "labels");
  EXPECT_ERRC_WITH(w.create_or_update(ctx_, "b", {"b", 2}, with_labels(many)),
                   errc::invalid_argument, "labels");
  EXPECT_ERRC_WITH(w.get_or_create(ctx_, "b", {"b", 1}, with_labels(many)),
                   errc::invalid_argument, "labels");

  EXPECT_ERRC_WITH(
      cc.set_condition(ctx_, o.id, {"Ready", ConditionStatus::True, std::string(1025, 'r'), "m"}),
      errc::invalid_argument, "condition reason");
  EXPECT_ERRC_WITH(
      cc.set_condition(ctx_, o.id, {"Ready", ConditionStatus::True, "R", std::string(65537, 'm')}),
      errc::invalid_argument, "condition message");
  EXPECT_NO_THROW(cc.set_condition(
      ctx_, o.id,
      {"Ready", ConditionStatus::True, std::string(1024, 'r'), std::string(65536, 'm')}));
  EXPECT_ERRC_WITH(
      cc.record_event(ctx_, o.id, {"", EventType::Normal, std::string(1025, 'r'), "m"}),
      errc::invalid_argument, "event reason");
  EXPECT_NO_THROW(
      cc.record_event(ctx_, o.id, {"", EventType::Normal, std::string(1024, 'r'), "m"}));
  EXPECT_EQ(w.list_events(ctx_, o.id).size(), 1u);
  EXPECT_EQ(w.get(ctx_, o.id).conditions.at(0).reason.size(), 1024u);
}

// An object's finalizers, read with every row, hold at most 64 KiB of names together:
// given at create, or added one by one.
TEST_F(SizeLimitTest, FinalizersOverTheirBoundAreRefused) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto name = [](int i) { return std::to_string(i) + std::string(508, 'f'); };  // 509-511
  std::vector<std::string> too_many;
  std::size_t bytes = 0;
  for (int i = 0; bytes <= 64 * 1024; ++i) bytes += (too_many.emplace_back(name(i))).size();
  EXPECT_ERRC_WITH(w.create(ctx_, {"a", 1}, with_finalizers(too_many)), errc::invalid_argument,
                   "finalizers");
  EXPECT_TRUE(w.list(ctx_).empty());
  // The same whatever the store holds: the slug's spec unchanged (no write) or changed.
  auto b = w.create(ctx_, {"b", 1}, with_slug("b"));
  EXPECT_ERRC_WITH(w.create_or_update(ctx_, "b", {"b", 1}, with_finalizers(too_many)),
                   errc::invalid_argument, "finalizers");
  EXPECT_ERRC_WITH(w.create_or_update(ctx_, "b", {"b", 2}, with_finalizers(too_many)),
                   errc::invalid_argument, "finalizers");
  EXPECT_EQ(w.get(ctx_, b.id).generation, 1);
  w.remove(ctx_, b.id);
  auto o = w.create(ctx_, {"a", 1});
  for (std::size_t i = 0; i + 1 < too_many.size(); ++i) cc.add_finalizer(ctx_, o.id, too_many[i]);
  EXPECT_ERRC_WITH(cc.add_finalizer(ctx_, o.id, too_many.back()), errc::invalid_argument,
                   "finalizers");
  EXPECT_EQ(w.get(ctx_, o.id).finalizers.size(), too_many.size() - 1);
}

// An object's conditions, read with every row as one value, hold at most 1 MiB of types,
// reasons and messages together, however many there are: one condition more is refused,
// a condition that replaces one of the same type is measured without the one it
// replaces, and the object stays readable and writable. Before, any number of 64 KiB
// messages were taken, until the object (and its kind's lists) could not be read.
TEST_F(SizeLimitTest, AnObjectsConditionsTogetherOverTheirBoundAreRefused) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  // With its 4-byte type and the 64 bytes counted for its other fields: 64 KiB.
  const std::string message(64 * 1024 - 4 - 64, 'm');
  auto condition = [&](int i) {
    char type[5];
    std::snprintf(type, sizeof type, "T%03d", i);
    return Condition{type, ConditionStatus::True, "", message};
  };
  for (int i = 0; i < 16; ++i) cc.set_condition(ctx_, o.id, condition(i));  // 1 MiB
  EXPECT_ERRC_WITH(cc.set_condition(ctx_, o.id, condition(16)), errc::invalid_argument,
                   "conditions");
  auto replacing = condition(3);
  replacing.status = ConditionStatus::False;
  cc.set_condition(ctx_, o.id, replacing);  // the same bytes in place of the old
  auto row = w.get(ctx_, o.id);
  EXPECT_EQ(row.conditions.size(), 16u);
  cc.remove_condition(ctx_, o.id, "T000");
  cc.set_condition(ctx_, o.id, condition(16));
  EXPECT_EQ(w.get(ctx_, o.id).conditions.size(), 16u);
  EXPECT_EQ(w.list(ctx_).size(), 1u);
  // Counted as stored: a control character is six bytes of JSON text; and however short,
  // each condition counts for its other fields, which bounds their number.
  auto other = w.create(ctx_, {"b", 1});
  auto escaped = Condition{"E", ConditionStatus::True, "", std::string(60 * 1024, '\x01')};
  for (int i = 0; i < 2; ++i) {
    escaped.type = "E" + std::to_string(i);
    cc.set_condition(ctx_, other.id, escaped);  // 360 KiB each as stored
  }
  escaped.type = "E2";
  EXPECT_ERRC_WITH(cc.set_condition(ctx_, other.id, escaped), errc::invalid_argument, "conditions");
  // One byte more in each message: the sixteenth no longer fits, for the bytes counted
  // for each condition's other fields (without them it would).
  auto third = w.create(ctx_, {"c", 1});
  auto longer = [&](int i) {
    auto c = condition(i);
    c.message += 'm';
    return c;
  };
  for (int i = 0; i < 15; ++i) cc.set_condition(ctx_, third.id, longer(i));
  EXPECT_ERRC_WITH(cc.set_condition(ctx_, third.id, longer(15)), errc::invalid_argument,
                   "conditions");
}

// An event detail holds at most 1 MiB of JSON text. One far over it (a large array, say)
// is refused on the caller's side, before it is copied into a request or printed; one
// that only prints over it (escapes) is measured by the store writer. Either way nothing
// is recorded, on the blocking and the actor surface alike.
TEST_F(SizeLimitTest, AnEventDetailOverItsBoundIsRefusedAndAFarLargerOneUnprinted) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  auto event = [](nlohmann::json detail) {
    return EventSpec{"", EventType::Normal, "R", "m", std::move(detail)};
  };
  const std::size_t mib = 1024 * 1024;
  cc.record_event(ctx_, o.id, event(std::string(mib - 2, 'd')));  // "ddd…": exactly 1 MiB
  EXPECT_ERRC_WITH(cc.record_event(ctx_, o.id, event(std::string(mib - 1, 'd'))),
                   errc::invalid_argument, "event detail");
  EXPECT_ERRC_WITH(
      cc.record_event(ctx_, o.id, event(std::string(mib / 4, '\x01'))),  // 6 bytes each
      errc::invalid_argument, "event detail");
  nlohmann::json far_over = nlohmann::json::array();
  for (int i = 0; i < 4096; ++i) far_over.push_back(std::string(1024, 'x'));
  EXPECT_ERRC_WITH(cc.record_event(ctx_, o.id, event(far_over)), errc::invalid_argument,
                   "more than");
  auto writer = bh().store_writer();
  caf::scoped_actor self{writer->home_system()};
  std::optional<caf::error> refused;
  self->request(writer, std::chrono::seconds(10),
                record_event_request{widget_kind, o.id, event(far_over)})
      .receive([](const Event&) {}, [&](caf::error& e) { refused = e; });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code(), static_cast<std::uint8_t>(errc::invalid_argument));
  auto events = w.list_events(ctx_, o.id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].count, 1);
}

// An enum value outside its enumerators would be stored as one of them yet never compare
// equal to it (every record a new run, every identical condition a write): refused.
TEST_F(SizeLimitTest, AnEventTypeOrConditionStatusOutsideItsEnumIsRefused) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_ERRC_WITH(cc.record_event(ctx_, o.id, {"", static_cast<EventType>(2), "R", "m"}),
                   errc::invalid_argument, "event type");
  EXPECT_ERRC_WITH(cc.set_condition(ctx_, o.id, {"Ready", static_cast<ConditionStatus>(3)}),
                   errc::invalid_argument, "condition status");
  EXPECT_ERRC(w.list_events(ctx_, o.id, with_event_type(static_cast<EventType>(7))),
              errc::invalid_argument);
  auto writer = bh().store_writer();
  caf::scoped_actor self{writer->home_system()};
  std::optional<caf::error> refused;
  self->request(writer, std::chrono::seconds(10),
                record_event_request{widget_kind, o.id, {"", static_cast<EventType>(2), "R", "m"}})
      .receive([](const Event&) {}, [&](caf::error& e) { refused = e; });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code(), static_cast<std::uint8_t>(errc::invalid_argument));
  EXPECT_TRUE(w.list_events(ctx_, o.id).empty());
  EXPECT_TRUE(w.get(ctx_, o.id).conditions.empty());
}

TEST_F(SizeLimitTest, ASpecOrStatusOverTheLimitIsRefusedOnTheActorSurface) {
  auto w = bh().store_writer();
  auto& sys = w->home_system();
  caf::scoped_actor self{sys};
  auto ask = [&](auto request) {  // every request here replies with a row
    std::optional<caf::error> err;
    self->request(w, std::chrono::seconds(10), std::move(request))
        .receive([](const ObjectRow&) {}, [&](caf::error& e) { err = e; });
    return err;
  };
  auto text = [](std::size_t bytes) { return nlohmann::json(spec_of_size(bytes)).dump(); };
  EXPECT_FALSE(ask(create_request{widget_kind, text(100)}));
  auto refused = ask(create_request{widget_kind, text(101)});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code(), static_cast<std::uint8_t>(errc::invalid_argument));
  EXPECT_TRUE(
      ask(update_status_request{widget_kind, 1, 1, R"({"s":")" + std::string(100, 'a') + R"("})"}));
  EXPECT_EQ(Widgets(bh(), widget_kind).list(ctx_).size(), 1u);
}

using SecretTest = ControllerTest;

/// A secret in a stored spec that does not parse (written by another program) reaches
/// neither the logs nor the error a read throws.
TEST_F(SecretTest, AStoredSecretIsNotQuotedInLogsOrErrors) {
  REQUIRE_SQLITE("plants the broken row by writing into the SQLite file");
  const std::string planted = "hunter2-planted-password";
  LogCapture log;
  open(with_logger(log.logger()));
  auto stop_first = stop_before_locals();
  register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  {
    SQLite::Database db(dir_.file("beehive.db").string(), SQLite::OPEN_READWRITE);
    // An unterminated string: nlohmann's own message would quote all of it.
    db.exec("UPDATE objects SET spec = '{\"color\": \"x\", \"password\": \"" + planted +
            "' WHERE id = " + std::to_string(o.id));
  }
  try {
    w.get(ctx_, o.id);
    ADD_FAILURE() << "the broken row decoded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find(planted), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte"), std::string::npos) << e.what();
  }
  start();  // the reconcile loop quarantines the row and logs why
  ASSERT_TRUE(eventually([&] { return log.contains("quarantined"); }));
  EXPECT_FALSE(log.contains(planted));
  w.list(ctx_);  // skips the row and logs it
  EXPECT_FALSE(log.contains(planted));
}

// A number too large for a double is reported without its digits (a card number
// written with an exponent, say): nlohmann's own message would quote it.
TEST(SecretParse, AStoredNumberOutOfRangeIsNotQuoted) {
  const std::string digits = "4111111111111111";
  try {
    detail::parse_json(R"({"pin": )" + digits + R"(e999})");
    ADD_FAILURE() << "an out-of-range number parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::decode));
    EXPECT_EQ(std::string(e.what()).find(digits), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace beehive::test
