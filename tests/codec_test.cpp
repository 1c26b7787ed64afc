// Bad and unusual input: values that do not encode, do not round-trip, are large, or
// carry hostile strings.

#include <cmath>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "fixture.hpp"
#include "storable_text.hpp"

namespace beehive::test {
namespace {

// Throws while encoding.
struct Unencodable {
  bool fail = true;
};
void to_json(nlohmann::json& j, const Unencodable& u) {
  if (u.fail) throw std::runtime_error("cannot encode");
  j = nlohmann::json::object();
}
void from_json(const nlohmann::json&, Unencodable& u) { u.fail = false; }

struct Empty {};

struct Text {
  std::string s;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Text, s)

struct Ratio {
  double r = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Ratio, r)

using Json = nlohmann::json;

Json nested(int levels) { return nested_json(levels); }

std::string nested_text(int levels) {
  return std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']');
}

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

class CodecTest : public BeehiveTest {};

TEST_F(CodecTest, SpecThatDoesNotRoundTripRollsBackCreate) {
  Client<PickySpec, Empty> c(bh(), widget_kind);
  EXPECT_ERRC(c.create(ctx_, PickySpec{-1}, with_slug("p")), errc::decode);
  EXPECT_TRUE(c.list(ctx_).empty());
  // The slug is still free.
  auto o = c.create(ctx_, PickySpec{1}, with_slug("p"));
  EXPECT_EQ(o.spec.v, 1);
}

TEST_F(CodecTest, SpecThatDoesNotRoundTripKeepsThePriorSpec) {
  Client<PickySpec, Empty> c(bh(), widget_kind);
  auto o = c.create(ctx_, PickySpec{1}, with_slug("p"));
  EXPECT_ERRC(c.update(ctx_, o.id, PickySpec{-5}), errc::decode);
  EXPECT_ERRC(c.create_or_update(ctx_, "p", PickySpec{-5}), errc::decode);
  auto got = c.get(ctx_, o.id);
  EXPECT_EQ(got.spec.v, 1);
  EXPECT_EQ(got.generation, 1);
  EXPECT_EQ(got.resource_version, o.resource_version);
}

TEST_F(CodecTest, GetOrCreateThatDoesNotRoundTripCreatesNothing) {
  Client<PickySpec, Empty> c(bh(), widget_kind);
  EXPECT_ERRC(c.get_or_create(ctx_, "g", PickySpec{-1}), errc::decode);
  EXPECT_ERRC(c.get_by_slug(ctx_, "g"), errc::not_found);
  EXPECT_ERRC(c.create_or_update(ctx_, "g2", PickySpec{-1}), errc::decode);
  EXPECT_ERRC(c.get_by_slug(ctx_, "g2"), errc::not_found);
}

/// Records the thread every decoding of a value of this type runs on.
struct DecodedWhere {
  static inline std::mutex mu;
  static inline std::vector<std::thread::id> threads;
  static void record() {
    std::lock_guard lk(mu);
    threads.push_back(std::this_thread::get_id());
  }
  static std::vector<std::thread::id> take() {
    std::lock_guard lk(mu);
    return std::exchange(threads, {});
  }
};
struct TracedValue {
  int v = 0;
};
void to_json(nlohmann::json& j, const TracedValue& t) { j = {{"v", t.v}}; }
void from_json(const nlohmann::json& j, TracedValue& t) {
  DecodedWhere::record();
  t.v = j.at("v").get<int>();
}

TEST_F(CodecTest, TheCallersValuesAreDecodedOnTheCallersThread) {
  // The writer thread runs transactions, not the application's from_json: a value the
  // caller writes is decoded (its round trip checked) before it is handed over.
  auto cc = register_controller<TracedValue, TracedValue>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Client<TracedValue, TracedValue> c(bh(), widget_kind);
  auto o = c.create(ctx_, {1}, with_slug("t"));
  EXPECT_EQ(c.update(ctx_, o.id, {2}).spec.v, 2);
  EXPECT_EQ(c.create_or_update(ctx_, "t", {3}).spec.v, 3);
  EXPECT_EQ(c.create_or_update(ctx_, "u", {4}).spec.v, 4);
  auto [created, was_new] = c.get_or_create(ctx_, "v", {5});
  EXPECT_TRUE(was_new);
  EXPECT_EQ(created.spec.v, 5);
  auto [existing, again] = c.get_or_create(ctx_, "v", {6});
  EXPECT_FALSE(again);
  EXPECT_EQ(existing.spec.v, 5);  // the stored one, decoded here: nothing was written
  cc.update_status(ctx_, o.id, 3, {7});
  auto here = std::this_thread::get_id();
  auto threads = DecodedWhere::take();
  EXPECT_FALSE(threads.empty());
  for (auto& t : threads) EXPECT_EQ(t, here);
  EXPECT_EQ(c.get(ctx_, o.id).status->v, 7);
}

TEST_F(CodecTest, UnencodableSpecIsInvalidArgumentAndWritesNothing) {
  Client<Unencodable, Empty> c(bh(), widget_kind);
  EXPECT_ERRC(c.create(ctx_, Unencodable{}), errc::invalid_argument);
  Client<Text, Empty> t(bh(), widget_kind);
  EXPECT_ERRC(t.create(ctx_, Text{"bad \xff\xfe utf-8"}), errc::invalid_argument);
  EXPECT_TRUE(t.list(ctx_).empty());
}

TEST_F(CodecTest, TextThatIsNotUtf8IsRejectedBeforeAnythingIsWritten) {
  Widgets w(bh(), widget_kind);
  EXPECT_ERRC(w.create(ctx_, {"a", 1}, with_slug("bad\xc0\xaf")),
              errc::invalid_argument);  // overlong
  EXPECT_ERRC(w.create(ctx_, {"a", 1}, with_finalizers({"f\xed\xa0\x80"})), errc::invalid_argument);
  EXPECT_ERRC(w.create_or_update(ctx_, "\xff", {"a", 1}), errc::invalid_argument);
  EXPECT_ERRC(w.get_or_create(ctx_, "\xf8\x88\x80\x80\x80", {"a", 1}), errc::invalid_argument);
  EXPECT_ERRC((Widgets(bh(), {"acme.com", "K\xe2\x82"})), errc::invalid_argument);
  EXPECT_TRUE(w.list(ctx_).empty());
  auto ok =
      w.create(ctx_, {"a", 1}, with_slug("\xf0\x9f\x90\x9d \xc3\xa9"));  // valid 4- and 2-byte
  EXPECT_EQ(w.get_by_slug(ctx_, "\xf0\x9f\x90\x9d \xc3\xa9").id, ok.id);
}

// PostgreSQL's text cannot hold a NUL character: libpq would cut the text there, so a slug
// "a\0b" was stored as "a". Both backends refuse it, and a spec carries one escaped.
TEST_F(CodecTest, TextWithANulCharacterIsRefusedAndASpecKeepsIt) {
  Widgets w(bh(), widget_kind);
  const std::string nul("a\0b", 3);
  EXPECT_ERRC_WITH(w.create(ctx_, {"a", 1}, with_slug(nul)), errc::invalid_argument, "NUL");
  EXPECT_ERRC(w.create(ctx_, {"a", 1}, with_finalizers({nul})), errc::invalid_argument);
  EXPECT_ERRC(w.create_or_update(ctx_, nul, {"a", 1}), errc::invalid_argument);
  EXPECT_ERRC(w.get_or_create(ctx_, nul, {"a", 1}), errc::invalid_argument);
  EXPECT_ERRC(w.get_by_slug(ctx_, nul), errc::invalid_argument);
  EXPECT_ERRC((Widgets(bh(), {"acme.com", nul})), errc::invalid_argument);
  EXPECT_TRUE(w.list(ctx_).empty());
  EXPECT_ERRC(w.get_by_slug(ctx_, "a"), errc::not_found);
  auto o = w.create(ctx_, {nul, 1});
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, nul);
}

/// `bytes` letters that do not compress (PostgreSQL compresses a long index entry).
std::string incompressible(std::size_t bytes) {
  std::string s;
  std::uint32_t x = 2463534242u;
  while (s.size() < bytes) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    s += static_cast<char>('a' + x % 26);
  }
  return s;
}

// Both backends index the names objects are found by, and PostgreSQL refuses an index
// entry over 2.7 kB (a 5 kB slug failed there with errc::store, and worked on SQLite).
TEST_F(CodecTest, NamesHoldAtMost512BytesOnEveryBackend) {
  const auto longest = incompressible(512), over = incompressible(513);
  Widgets w(bh(), widget_kind);
  EXPECT_ERRC_WITH(w.create(ctx_, {"a", 1}, with_slug(over)), errc::invalid_argument, "512");
  EXPECT_ERRC(w.create_or_update(ctx_, over, {"a", 1}), errc::invalid_argument);
  EXPECT_ERRC(w.get_or_create(ctx_, over, {"a", 1}), errc::invalid_argument);
  EXPECT_ERRC(w.get_by_slug(ctx_, over), errc::invalid_argument);
  EXPECT_ERRC((Widgets(bh(), {over, "Widget"})), errc::invalid_argument);
  EXPECT_ERRC((Widgets(bh(), {"acme.com", over})), errc::invalid_argument);
  EXPECT_TRUE(w.list(ctx_).empty());
  EXPECT_ERRC(w.create(ctx_, {"a", 1}, with_finalizers({over})), errc::invalid_argument);
  // The longest names, all four at once, are stored and found.
  Widgets big(bh(), {longest, longest});
  auto o = big.create(ctx_, {"a", 1}, with_slug(longest), with_finalizers({longest}));
  EXPECT_EQ(big.get_by_slug(ctx_, longest).id, o.id);
  EXPECT_EQ(big.get(ctx_, o.id).finalizers, std::vector<std::string>{longest});
}

TEST_F(CodecTest, ASpecNestedTooDeepIsInvalidArgumentBeforeAnythingRecursesOverIt) {
  // 100,000 levels overflowed the stack of the code that prints a value (SIGSEGV).
  Client<Json, Json> c(bh(), widget_kind);
  auto deep = nested(100000);
  EXPECT_ERRC_WITH(c.create(ctx_, deep), errc::invalid_argument, "512");
  EXPECT_ERRC(c.create_or_update(ctx_, "d", deep), errc::invalid_argument);
  EXPECT_ERRC(c.get_or_create(ctx_, "d", deep), errc::invalid_argument);
  auto o = c.create(ctx_, Json::object());
  Json wrapped = Json::object();
  wrapped["inner"] = std::move(deep);
  EXPECT_ERRC(c.update(ctx_, o.id, wrapped), errc::invalid_argument);
  auto all = c.list(ctx_);
  ASSERT_EQ(all.size(), 1u);  // nothing else was written
  EXPECT_EQ(all[0].generation, 1);
}

TEST_F(CodecTest, NestingUpTo512LevelsRoundTripsAndOneMoreIsRefused) {
  Client<Json, Json> c(bh(), widget_kind);
  auto o = c.create(ctx_, nested(512));
  EXPECT_EQ(c.get(ctx_, o.id).spec, nested(512));
  EXPECT_ERRC(c.create(ctx_, nested(513)), errc::invalid_argument);
  EXPECT_EQ(c.list(ctx_).size(), 1u);
}

TEST_F(CodecTest, NaNAndInfinityAreRefusedRatherThanStoredAsNull) {
  Client<Json, Json> raw(bh(), widget_kind);
  for (double bad : {nan, inf, -inf})
    EXPECT_ERRC_WITH(raw.create(ctx_, Json{{"ratio", bad}}), errc::invalid_argument, "NaN");
  Client<Ratio, Empty> typed(bh(), widget_kind);
  EXPECT_ERRC(typed.create(ctx_, Ratio{nan}), errc::invalid_argument);
  auto o = typed.create(ctx_, Ratio{0.5});
  EXPECT_ERRC(typed.update(ctx_, o.id, Ratio{inf}), errc::invalid_argument);
  auto got = typed.get(ctx_, o.id);
  EXPECT_EQ(got.spec.r, 0.5);  // the prior spec stays
  EXPECT_EQ(got.generation, 1);
  EXPECT_EQ(typed.list(ctx_).size(), 1u);
}

// A value a parse that failed without throwing leaves (discarded), or binary data: JSON
// text holds neither, and both are refused as the caller's mistake, storing nothing.
TEST_F(CodecTest, DiscardedAndBinaryValuesAreRefused) {
  Client<Json, Json> raw(bh(), widget_kind);
  auto discarded = Json::parse("{not json", nullptr, false);
  ASSERT_TRUE(discarded.is_discarded());
  EXPECT_ERRC_WITH(raw.create(ctx_, discarded), errc::invalid_argument, "discarded");
  EXPECT_ERRC(raw.create(ctx_, Json{{"a", discarded}}), errc::invalid_argument);
  EXPECT_ERRC_WITH(raw.create(ctx_, Json{{"b", Json::binary({1, 2})}}), errc::invalid_argument,
                   "binary");
  EXPECT_TRUE(raw.list(ctx_).empty());
  auto cc = register_controller<Json, Json>(bh(), widget_kind,
                                            [](auto&, auto&, auto&) { return Result{}; });
  auto o = raw.create(ctx_, Json::object());
  EventSpec e{"", EventType::Normal, "Probe"};
  e.detail = discarded;
  EXPECT_ERRC(cc.record_event(ctx_, o.id, e), errc::invalid_argument);
  EXPECT_TRUE(raw.list_events(ctx_, o.id).empty());
}

TEST_F(CodecTest, StatusAndEventDetailAreHeldToTheSameRules) {
  auto cc = register_controller<Json, Json>(bh(), widget_kind,
                                            [](auto&, auto&, auto&) { return Result{}; });
  Client<Json, Json> c(bh(), widget_kind);
  auto o = c.create(ctx_, Json::object());
  EXPECT_ERRC(cc.update_status(ctx_, o.id, 1, Json{{"x", nan}}), errc::invalid_argument);
  Json deep_status = Json::object();
  deep_status["x"] = nested(100000);
  EXPECT_ERRC(cc.update_status(ctx_, o.id, 1, deep_status), errc::invalid_argument);
  EXPECT_FALSE(c.get(ctx_, o.id).status.has_value());
  EventSpec e{"", EventType::Warning, "ProbeFailed"};
  e.detail = Json{{"latency", inf}};
  EXPECT_ERRC(cc.record_event(ctx_, o.id, e), errc::invalid_argument);
  e.detail = nested(100000);
  EXPECT_ERRC_WITH(cc.record_event(ctx_, o.id, e), errc::invalid_argument, "512");
  EXPECT_TRUE(c.list_events(ctx_, o.id).empty());
}

TEST_F(CodecTest, StoredJsonNestedTooDeepIsADecodeErrorNotACrash) {
  REQUIRE_SQLITE("plants the rows by writing into the SQLite file");
  // Written by another program: get reports it, list skips the row.
  Client<Json, Json> c(bh(), widget_kind);
  auto ok = c.create(ctx_, Json::object());
  auto bad = c.create(ctx_, Json::object());
  {
    SQLite::Database db(db_path().string(), SQLite::OPEN_READWRITE);
    SQLite::Statement spec(db, "UPDATE objects SET spec = ?1 WHERE id = ?2");
    spec.bind(1, nested_text(100000));
    spec.bind(2, bad.id);
    spec.exec();
    SQLite::Statement event(db,
                            "INSERT INTO events (object_id, category, type, reason, message, "
                            "detail, count, first_at, last_at) "
                            "VALUES (?1, '', 'Normal', 'Deep', '', ?2, 1, 0, 0)");
    event.bind(1, ok.id);
    event.bind(2, nested_text(100000));
    event.exec();
  }
  EXPECT_ERRC(c.get(ctx_, bad.id), errc::decode);
  auto all = c.list(ctx_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, ok.id);
  EXPECT_ERRC(c.list_events(ctx_, ok.id), errc::decode);
}

TEST_F(CodecTest, EmptyStructsNeedNoConverter) {
  Client<Empty, Empty> c(bh(), widget_kind);
  auto o = c.create(ctx_, Empty{}, with_slug("e"));
  EXPECT_EQ(c.get(ctx_, o.id).id, o.id);
  auto same = c.update(ctx_, o.id, Empty{});
  EXPECT_EQ(same.generation, 1);  // "{}" again: a no-op
}

// Text beehive stores on its own account (an exception's message) is made storable: each
// byte that starts no character becomes U+FFFD, and a cut falls between characters,
// marked, within the bound. Whatever the bound, the result is text require_text takes.
TEST(StorableText, RepairsBytesAndCutsBetweenCharacters) {
  EXPECT_EQ(detail::storable_text("plain", 100), "plain");
  EXPECT_EQ(detail::storable_text("a\xff\xc3", 100), "a\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(detail::storable_text(std::string("a\0b", 3), 100),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(detail::storable_text("\xed\xa0\x80", 100), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  const std::string mixed = "a\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80z";  // 1, 2, 3, 4, 1 bytes
  EXPECT_EQ(detail::storable_text(mixed, mixed.size()), mixed);        // fits exactly: no cut
  for (std::size_t bound = 3; bound < mixed.size(); ++bound) {
    auto cut = detail::storable_text(mixed, bound);
    EXPECT_LE(cut.size(), bound) << bound;
    EXPECT_NO_THROW(detail::require_text(cut, "cut")) << bound;
    ASSERT_GE(cut.size(), 3u);
    EXPECT_EQ(cut.substr(cut.size() - 3), "\xe2\x80\xa6") << bound;
    EXPECT_EQ(mixed.compare(0, cut.size() - 3, cut, 0, cut.size() - 3), 0) << bound;
  }
}

TEST_F(CodecTest, FiveMegabyteSpecRoundTrips) {
  Client<Text, Empty> c(bh(), widget_kind);
  std::string big(5 * 1024 * 1024, 'x');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 26);
  auto o = c.create(ctx_, Text{big});
  EXPECT_EQ(c.get(ctx_, o.id).spec.s, big);
  EXPECT_EQ(c.list(ctx_).at(0).spec.s, big);
}

TEST_F(CodecTest, HostileSlugsKindsAndGroupsAreStoredVerbatim) {
  const std::vector<std::string> hostile = {
      "'; DROP TABLE objects; --",
      "\" OR 1=1 --",
      "semi;colon",
      "back\\slash",
      "unicode: \xc3\xa9\xe2\x9c\x93\xf0\x9f\x90\x9d",
      "  spaces  ",
      "%_like_wildcards%",
      std::string(512, 'z'),  // the longest name (max_name_bytes)
  };
  for (const auto& h : hostile) {
    Client<Text, Empty> c(bh(), {h, h});
    auto o = c.create(ctx_, Text{h}, with_slug(h));
    auto got = c.get_by_slug(ctx_, h);
    EXPECT_EQ(got.id, o.id);
    EXPECT_EQ(got.group, h);
    EXPECT_EQ(got.kind, h);
    EXPECT_EQ(got.slug, h);
    EXPECT_EQ(got.spec.s, h);
    EXPECT_EQ(c.list(ctx_).size(), 1u);
  }
}

TEST_F(CodecTest, UndecodableRowIsSkippedByListAndAnErrorForGet) {
  Client<Text, Empty> writer(bh(), widget_kind);
  auto text = writer.create(ctx_, Text{"ok"});
  // The same kind read through a type the Text rows cannot decode into.
  Client<PickySpec, Empty> picky(bh(), widget_kind);
  auto readable = picky.create(ctx_, PickySpec{4});
  EXPECT_ERRC(picky.get(ctx_, text.id), errc::decode);
  auto all = picky.list(ctx_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, readable.id);
}

}  // namespace
}  // namespace beehive::test
