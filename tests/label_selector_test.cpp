// Label validation, selector parsing and matching, and the SQL a selector becomes, run
// against a real SQLite database so that SQL and in-memory matching are shown to agree.

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <beehive/errors.hpp>

#include "storable_text.hpp"
#include "store/label_selector.hpp"

namespace beehive::store {

// Readable failures for EXPECT_EQ on requirements (found by argument-dependent lookup).
void PrintTo(const LabelRequirement& r, std::ostream* os) { *os << r.to_string(); }

namespace {

using Op = LabelRequirement::Op;

// The code an invalid call throws; fails the test when it throws nothing.
errc error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.value();
  }
  ADD_FAILURE() << "no beehive::Error thrown";
  return errc{};
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.message();
  }
  ADD_FAILURE() << "no beehive::Error thrown";
  return {};
}

LabelRequirement req(Op op, std::string key, std::vector<std::string> values = {}) {
  return {op, std::move(key), std::move(values)};
}

std::vector<LabelRequirement> parsed(std::string_view text) {
  return LabelSelector::parse(text).requirements();
}

TEST(LabelSelector, ParsesEveryOperatorWithoutWhitespace) {
  EXPECT_EQ(parsed("a=b"), std::vector{req(Op::equals, "a", {"b"})});
  EXPECT_EQ(parsed("a==b"), std::vector{req(Op::equals, "a", {"b"})});
  EXPECT_EQ(parsed("a!=b"), std::vector{req(Op::not_equals, "a", {"b"})});
  EXPECT_EQ(parsed("a in(x,y)"), std::vector{req(Op::in, "a", {"x", "y"})});
  EXPECT_EQ(parsed("a notin(x)"), std::vector{req(Op::not_in, "a", {"x"})});
  EXPECT_EQ(parsed("a"), std::vector{req(Op::exists, "a")});
  EXPECT_EQ(parsed("!a"), std::vector{req(Op::not_exists, "a")});
  EXPECT_EQ(parsed("example.com/a-b_c.d=V.1"),
            std::vector{req(Op::equals, "example.com/a-b_c.d", {"V.1"})});
}

TEST(LabelSelector, ParsesEveryOperatorWithWhitespace) {
  EXPECT_EQ(parsed(" a = b "), std::vector{req(Op::equals, "a", {"b"})});
  EXPECT_EQ(parsed("a\t==\tb"), std::vector{req(Op::equals, "a", {"b"})});
  EXPECT_EQ(parsed("a != b"), std::vector{req(Op::not_equals, "a", {"b"})});
  EXPECT_EQ(parsed("a in ( x , y )"), std::vector{req(Op::in, "a", {"x", "y"})});
  EXPECT_EQ(parsed("a\nnotin\n(\nx\n)"), std::vector{req(Op::not_in, "a", {"x"})});
  EXPECT_EQ(parsed("  a  "), std::vector{req(Op::exists, "a")});
  EXPECT_EQ(parsed(" ! a "), std::vector{req(Op::not_exists, "a")});
  EXPECT_EQ(parsed("a = b , !c , d in (e)"),
            (std::vector{req(Op::equals, "a", {"b"}), req(Op::not_exists, "c"),
                         req(Op::in, "d", {"e"})}));
}

TEST(LabelSelector, EmptyOrBlankTextIsTheEmptySelector) {
  for (std::string_view text : {"", " ", " \t\r\n "}) {
    const auto s = LabelSelector::parse(text);
    EXPECT_TRUE(s.empty()) << '"' << text << '"';
    EXPECT_EQ(s.to_string(), "");
  }
  EXPECT_TRUE(LabelSelector{}.empty());
  EXPECT_FALSE(LabelSelector::parse("a").empty());
}

TEST(LabelSelector, EqualsWithNothingAfterItComparesWithTheEmptyValue) {
  EXPECT_EQ(parsed("a="), std::vector{req(Op::equals, "a", {""})});
  EXPECT_EQ(parsed("a!= ,b"), (std::vector{req(Op::not_equals, "a", {""}), req(Op::exists, "b")}));
  EXPECT_EQ(LabelSelector::parse("a=").to_string(), "a=");
  EXPECT_TRUE(LabelSelector::parse("a=").matches({{"a", ""}}));
  EXPECT_FALSE(LabelSelector::parse("a=").matches({{"a", "x"}}));
  EXPECT_FALSE(LabelSelector::parse("a=").matches({}));
}

TEST(LabelSelector, KeywordsAreKeysOrValuesOutsideTheOperatorPosition) {
  EXPECT_EQ(parsed("in in (notin)"), std::vector{req(Op::in, "in", {"notin"})});
  EXPECT_EQ(parsed("notin=in"), std::vector{req(Op::equals, "notin", {"in"})});
}

TEST(LabelSelector, ToStringIsCanonicalAndParsesBack) {
  const auto s = LabelSelector::parse("z in (y, x, y), a==b, !m, a != c, k, a=b");
  EXPECT_EQ(s.to_string(), "a=b,a!=c,k,!m,z in (x,y)");
  EXPECT_EQ(LabelSelector::parse(s.to_string()), s);
  EXPECT_EQ(LabelSelector::parse("k,!m,a!=c,z in (x,y),a=b"), s);
  EXPECT_EQ(LabelSelector::parse("a notin (q)").to_string(), "a notin (q)");
}

TEST(LabelSelector, MatchesEachOperator) {
  const Labels l{{"env", "prod"}, {"tier", "web"}};
  auto m = [&](std::string_view text) { return LabelSelector::parse(text).matches(l); };
  EXPECT_TRUE(m("env=prod"));
  EXPECT_FALSE(m("env=dev"));
  EXPECT_TRUE(m("env==prod"));
  EXPECT_TRUE(m("env!=dev"));
  EXPECT_FALSE(m("env!=prod"));
  EXPECT_TRUE(m("env in (dev,prod)"));
  EXPECT_FALSE(m("env in (dev,qa)"));
  EXPECT_TRUE(m("env notin (dev,qa)"));
  EXPECT_FALSE(m("env notin (prod)"));
  EXPECT_TRUE(m("env"));
  EXPECT_FALSE(m("!env"));
  EXPECT_TRUE(m("env=prod,tier=web"));
  EXPECT_FALSE(m("env=prod,tier=db"));
  EXPECT_TRUE(m(""));
}

TEST(LabelSelector, AbsentKeyMatchesOnlyTheNegatedOperators) {
  const Labels l{{"env", "prod"}};
  auto m = [&](std::string_view text) { return LabelSelector::parse(text).matches(l); };
  EXPECT_TRUE(m("tier!=web"));
  EXPECT_TRUE(m("tier notin (web)"));
  EXPECT_TRUE(m("!tier"));
  EXPECT_FALSE(m("tier=web"));
  EXPECT_FALSE(m("tier in (web)"));
  EXPECT_FALSE(m("tier"));
  EXPECT_TRUE(LabelSelector{}.matches({}));
  EXPECT_TRUE(LabelSelector::parse("a!=b").matches({}));
}

TEST(LabelSelector, MalformedSelectorsAreInvalidArgument) {
  for (std::string_view text : {
           "a in ()",      // no values
           "a notin ( )",  // no values
           "a,",           // dangling comma
           ",a",          "a,,b",
           ",",
           "a in (x,)",  // dangling comma in a list
           "a in (,x)",   "a in (x,,y)",
           "a in (x",  // unbalanced parentheses
           "a in x)",     "a in (x))",
           "a in ((x))",  "(a)",
           "a)",          "a in",
           "a notin",
           "a > 1",  // unknown operators
           "a < 1",       "a >= 1",
           "a ~ b",       "a has (x)",
           "a === b",     "a =! b",
           "a = b c",  // a second value
           "a b",
           "!a=b",  // ! takes a bare key
           "!a in (x)",   "!",
           "!!a",
           "=b",  // no key
           "!=b",         "a=b=c",
           "-a=b",  // bad key or value
           "a=-b",        "a in (x, -y)",
           "a/b/c=d",     "A.com/b",
           "a=b\xc3\xa9",
       }) {
    EXPECT_EQ(error_of([&] { LabelSelector::parse(text); }), errc::invalid_argument)
        << '"' << text << '"';
  }
}

TEST(LabelSelector, ParseErrorsNameTheBadPart) {
  EXPECT_NE(message_of([] { LabelSelector::parse("a in ()"); }).find("at least one value"),
            std::string::npos);
  const auto unknown = message_of([] { LabelSelector::parse("env > 3"); });
  EXPECT_NE(unknown.find("unknown operator"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\">\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("position 4"), std::string::npos) << unknown;
  const auto bad_key = message_of([] { LabelSelector::parse("ok=1,-bad=1"); });
  EXPECT_NE(bad_key.find("\"-bad\""), std::string::npos) << bad_key;
  const auto dangling = message_of([] { LabelSelector::parse("a=1,"); });
  EXPECT_NE(dangling.find("the end"), std::string::npos) << dangling;
}

// A selector is quoted in its error cut to 80 bytes: at a character's end, so that the
// message stays UTF-8 (it may go on into JSON or an event); the cut split a character.
TEST(LabelSelector, AnErrorQuotesALongSelectorAsUtf8) {
  for (std::size_t pad = 76; pad <= 80; ++pad) {
    const auto text = std::string(pad, 'x') + "\u00e9\u00e9 > 3";  // é, two bytes each
    const auto msg = message_of([&] { LabelSelector::parse(text); });
    for (std::size_t i = 0; i < msg.size();) {
      auto n = beehive::detail::utf8_char_at(msg, i);
      ASSERT_GT(n, 0u) << "not UTF-8 at byte " << i << " of: " << msg;
      i += n;
    }
  }
}

TEST(LabelSelector, LabelKeyNameRules) {
  const std::string n63(63, 'a');
  const std::string n64(64, 'a');
  EXPECT_NO_THROW(validate_label_key("a"));
  EXPECT_NO_THROW(validate_label_key("A9"));
  EXPECT_NO_THROW(validate_label_key("a-b_c.d"));
  EXPECT_NO_THROW(validate_label_key(n63));
  EXPECT_EQ(error_of([&] { validate_label_key(n64); }), errc::invalid_argument);
  for (std::string_view bad : {"", "-a", "a-", "_a", "a_", ".a", "a.", "a b", "a@b", "é"}) {
    EXPECT_EQ(error_of([&] { validate_label_key(bad); }), errc::invalid_argument)
        << '"' << bad << '"';
  }
  EXPECT_NE(message_of([&] { validate_label_key(n64); }).find("63"), std::string::npos);
  EXPECT_NE(message_of([] { validate_label_key(""); }).find("empty"), std::string::npos);
}

TEST(LabelSelector, LabelKeyPrefixRules) {
  EXPECT_NO_THROW(validate_label_key("example.com/a"));
  EXPECT_NO_THROW(validate_label_key("app.kubernetes.io/name"));
  EXPECT_NO_THROW(validate_label_key("a-1.b2/c"));
  EXPECT_NO_THROW(validate_label_key("x/" + std::string(63, 'n')));
  // 253 characters: dot-separated parts of 63.
  const std::string p63(63, 'p');
  const std::string prefix253 = p63 + "." + p63 + "." + p63 + "." + std::string(61, 'p');
  ASSERT_EQ(prefix253.size(), 253u);
  EXPECT_NO_THROW(validate_label_key(prefix253 + "/a"));
  EXPECT_EQ(error_of([&] { validate_label_key(prefix253 + "p/a"); }), errc::invalid_argument);
  for (std::string_view bad : {
           "/a",             // empty prefix
           "a/",             // empty name
           "a/b/c",          // two slashes
           "Example.com/a",  // upper case
           "ex_ample.com/a",
           "-example.com/a",
           "example-.com/a",
           "example..com/a",
           ".example.com/a",
           "example.com./a",
           "exa mple/a",
           "example.com/-a",
       }) {
    EXPECT_EQ(error_of([&] { validate_label_key(bad); }), errc::invalid_argument)
        << '"' << bad << '"';
  }
  EXPECT_EQ(error_of([] { validate_label_key("x/" + std::string(64, 'n')); }),
            errc::invalid_argument);
  const auto msg = message_of([] { validate_label_key("Example.com/a"); });
  EXPECT_NE(msg.find("prefix"), std::string::npos) << msg;
}

TEST(LabelSelector, LabelValueRules) {
  EXPECT_NO_THROW(validate_label_value(""));
  EXPECT_NO_THROW(validate_label_value("v"));
  EXPECT_NO_THROW(validate_label_value("V1.2-rc_3"));
  EXPECT_NO_THROW(validate_label_value(std::string(63, 'v')));
  EXPECT_EQ(error_of([] { validate_label_value(std::string(64, 'v')); }), errc::invalid_argument);
  for (std::string_view bad : {"-v", "v-", "_v", "v.", "a/b", "a b", "a=b", "a,b", " "}) {
    EXPECT_EQ(error_of([&] { validate_label_value(bad); }), errc::invalid_argument)
        << '"' << bad << '"';
  }
  EXPECT_NE(message_of([] { validate_label_value("-v"); }).find("\"-v\""), std::string::npos);
}

TEST(LabelSelector, ValidateLabelsChecksEveryKeyAndValue) {
  EXPECT_NO_THROW(validate_labels({}));
  EXPECT_NO_THROW(validate_labels({{"a", ""}, {"example.com/b", "c"}}));
  EXPECT_EQ(error_of([] { validate_labels({{"a", "ok"}, {"-b", "ok"}}); }), errc::invalid_argument);
  EXPECT_EQ(error_of([] { validate_labels({{"", "ok"}}); }), errc::invalid_argument);
  const auto msg = message_of([] { validate_labels({{"a", "ok"}, {"b", "bad!"}}); });
  EXPECT_NE(msg.find("\"bad!\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"b\""), std::string::npos) << msg;
}

TEST(LabelSelector, ToSqlForEachOperator) {
  auto sql = [](std::string_view text) { return to_sql(LabelSelector::parse(text), "o.id"); };
  const std::string sub = "(SELECT object_id FROM labels WHERE key = ?";

  auto f = sql("a=b");
  EXPECT_EQ(f.where, "o.id IN " + sub + " AND value = ?)");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a", "b"}));

  f = sql("a!=b");
  EXPECT_EQ(f.where, "o.id NOT IN " + sub + " AND value = ?)");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a", "b"}));

  f = sql("a in (x,y)");
  EXPECT_EQ(f.where, "o.id IN " + sub + " AND value IN (?, ?))");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a", "x", "y"}));

  f = sql("a notin (x)");
  EXPECT_EQ(f.where, "o.id NOT IN " + sub + " AND value IN (?))");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a", "x"}));

  f = sql("a");
  EXPECT_EQ(f.where, "o.id IN " + sub + ")");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a"}));

  f = sql("!a");
  EXPECT_EQ(f.where, "o.id NOT IN " + sub + ")");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a"}));

  f = sql("a=b,!c");
  EXPECT_EQ(f.where, "o.id IN " + sub + " AND value = ?) AND o.id NOT IN " + sub + ")");
  EXPECT_EQ(f.binds, (std::vector<std::string>{"a", "b", "c"}));

  f = sql("");
  EXPECT_EQ(f.where, "");
  EXPECT_TRUE(f.binds.empty());
}

// Runs to_sql's output on SQLite over a few labelled objects and checks that it selects
// exactly the objects LabelSelector::matches selects, and the ids expected.
class SqliteLabels {
 public:
  SqliteLabels() : db_(":memory:", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE) {
    db_.exec("CREATE TABLE objects(id INTEGER PRIMARY KEY, name TEXT NOT NULL)");
    db_.exec(
        "CREATE TABLE labels(object_id INTEGER, key TEXT, value TEXT, "
        "PRIMARY KEY (key, value, object_id)) WITHOUT ROWID");
    add(1, {{"env", "prod"}, {"tier", "web"}});
    add(2, {{"env", "dev"}, {"tier", "web"}});
    add(3, {{"env", "prod"}});
    add(4, {});
    add(5, {{"env", ""}, {"app.kubernetes.io/name", "beehive"}});
  }

  std::vector<int> select_sql(std::string_view text) {
    const auto f = to_sql(LabelSelector::parse(text), "o.id");
    std::string q = "SELECT o.id FROM objects AS o";
    if (!f.where.empty()) q += " WHERE " + f.where;
    q += " ORDER BY o.id";
    SQLite::Statement st(db_, q);
    for (std::size_t i = 0; i < f.binds.size(); ++i) {
      st.bind(static_cast<int>(i + 1), f.binds[i]);
    }
    std::vector<int> ids;
    while (st.executeStep()) ids.push_back(st.getColumn(0).getInt());
    return ids;
  }

  std::vector<int> select_memory(std::string_view text) const {
    const auto s = LabelSelector::parse(text);
    std::vector<int> ids;
    for (const auto& [id, labels] : objects_) {
      if (s.matches(labels)) ids.push_back(id);
    }
    return ids;
  }

 private:
  void add(int id, const Labels& labels) {
    SQLite::Statement o(db_, "INSERT INTO objects(id, name) VALUES (?, ?)");
    o.bind(1, id);
    o.bind(2, "object-" + std::to_string(id));
    o.exec();
    for (const auto& [k, v] : labels) {
      SQLite::Statement l(db_, "INSERT INTO labels(object_id, key, value) VALUES (?, ?, ?)");
      l.bind(1, id);
      l.bind(2, k);
      l.bind(3, v);
      l.exec();
    }
    objects_[id] = labels;
  }

  SQLite::Database db_;
  std::map<int, Labels> objects_;
};

TEST(LabelSelector, ToSqlRunsOnSqliteAndSelectsWhatMatchesSelects) {
  SqliteLabels db;
  const std::vector<std::pair<std::string_view, std::vector<int>>> cases = {
      {"", {1, 2, 3, 4, 5}},
      {"env=prod", {1, 3}},
      {"env==dev", {2}},
      {"env=", {5}},
      {"env!=prod", {2, 4, 5}},
      {"env!=", {1, 2, 3, 4}},
      {"env in (prod, dev)", {1, 2, 3}},
      {"env in (qa)", {}},
      {"env notin (prod)", {2, 4, 5}},
      {"env notin (prod,dev)", {4, 5}},
      {"tier", {1, 2}},
      {"!tier", {3, 4, 5}},
      {"env", {1, 2, 3, 5}},
      {"!env", {4}},
      {"env=prod,tier=web", {1}},
      {"env=prod,!tier", {3}},
      {"tier notin (web), env", {3, 5}},
      {"app.kubernetes.io/name=beehive", {5}},
      {"app.kubernetes.io/name in (beehive, hive), env in (x)", {}},
      {"missing!=x,missing notin (y),!missing", {1, 2, 3, 4, 5}},
  };
  for (const auto& [text, want] : cases) {
    EXPECT_EQ(db.select_sql(text), want) << '"' << text << '"';
    EXPECT_EQ(db.select_memory(text), want) << '"' << text << '"';
  }
}

}  // namespace
}  // namespace beehive::store
