// Bad and unusual input: values that do not encode, do not round-trip, are large, or
// carry hostile strings.

#include "fixture.hpp"

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

TEST_F(CodecTest, EmptyStructsNeedNoConverter) {
  Client<Empty, Empty> c(bh(), widget_kind);
  auto o = c.create(ctx_, Empty{}, with_slug("e"));
  EXPECT_EQ(c.get(ctx_, o.id).id, o.id);
  auto same = c.update(ctx_, o.id, Empty{});
  EXPECT_EQ(same.generation, 1);  // "{}" again: a no-op
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
      std::string(1000, 'z'),
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
