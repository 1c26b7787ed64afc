// beehive-ctl's write commands (apply, delete, label, requeue) and the selections of get
// and watch (labels, owner, pages, resuming from a version), run as a separate process on
// a database built through the public API; and a beehive running in a third process that
// reacts to the tool's writes through the change log.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/beehive.hpp>
#include <beehive/postgres.hpp>

#include "controller_fixture.hpp"
#include "schema_downgrade.hpp"
#include "tools/ctl_location.hpp"
#include "tools/process.hpp"
#include "tools/text.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

/// The first field of each table row (the ids), the header left out.
std::vector<std::string> ids(const std::string& table) {
  std::vector<std::string> out;
  auto all = lines(table);
  for (std::size_t i = 1; i < all.size(); ++i)
    if (auto f = fields(all[i]); !f.empty()) out.push_back(f[0]);
  return out;
}

/// Widgets in acme.com, some labelled, one owning two gadgets; nothing started: the
/// test's Beehive only writes and reads, as an application that is not running.
class CtlWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = open_test_store(db_path());
    bh_ = std::make_unique<Beehive>(store_);
  }

  std::filesystem::path db_path() const { return dir_.file("app.db"); }
  std::vector<std::string> args(std::vector<std::string> rest) const {
    return ctl_command(BEEHIVE_CTL, db_path(), std::move(rest));
  }
  RunResult ctl(std::vector<std::string> rest) { return run(args(std::move(rest))); }
  std::string write_file(const std::string& name, const std::string& text) {
    auto p = dir_.file(name);
    std::ofstream(p) << text;
    return p.string();
  }
  Widgets widgets() const { return Widgets(*bh_, widget_kind); }
  /// The store's schema version, read from the database itself.
  int schema_version() const {
    if (test_backend_is_postgres())
      return std::stoi(query_test_store(db_path(), "SELECT version FROM beehive_schema")[0][0]);
    SQLite::Database db(db_path().string(), SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT version FROM beehive_schema").getInt();
  }

  TempDir dir_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Context ctx_;
};

#define EXPECT_OK(r) EXPECT_EQ((r).status, 0) << (r).err

TEST_F(CtlWriteTest, ApplyCreatesThenUpdatesBySlug) {
  auto file = write_file("a.json", R"({"group": "acme.com", "kind": "Widget", "slug": "a",
      "spec": {"color": "red", "size": 1}, "labels": {"tier": "web"}})");
  auto r = ctl({"apply", "-f", file});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a created\n");
  auto a = widgets().get_by_slug(ctx_, "a");
  EXPECT_EQ(a.spec, (WidgetSpec{"red", 1}));
  EXPECT_EQ(a.labels, (Labels{{"tier", "web"}}));
  EXPECT_EQ(a.generation, 1);

  r = ctl({"apply", "-f", file});  // the same again writes nothing
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a unchanged\n");
  EXPECT_EQ(widgets().get_by_slug(ctx_, "a").resource_version, a.resource_version);

  // A spec change without a "labels" member keeps the labels.
  file = write_file("a2.json", R"({"group": "acme.com", "kind": "Widget", "slug": "a",
      "spec": {"color": "blue", "size": 2}})");
  r = ctl({"apply", "-f", file});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a configured\n");
  a = widgets().get_by_slug(ctx_, "a");
  EXPECT_EQ(a.spec, (WidgetSpec{"blue", 2}));
  EXPECT_EQ(a.generation, 2);
  EXPECT_EQ(a.labels, (Labels{{"tier", "web"}}));

  // A "labels" member replaces them, the spec as it is.
  file = write_file("a3.json", R"({"group": "acme.com", "kind": "Widget", "slug": "a",
      "spec": {"color": "blue", "size": 2}, "labels": {"env": "prod"}})");
  r = ctl({"apply", "-f", file});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a configured\n");
  a = widgets().get_by_slug(ctx_, "a");
  EXPECT_EQ(a.labels, (Labels{{"env", "prod"}}));
  EXPECT_EQ(a.generation, 2);
}

// apply reports what it did as its own transaction found the object: one another process
// created while the tool waited for the store's write lock was configured, not created.
TEST_F(CtlWriteTest, PgApplyReportsWhatItsOwnTransactionFound) {
  REQUIRE_POSTGRES();
  auto file = write_file("raced.json", R"({"group": "acme.com", "kind": "Widget",
      "slug": "raced", "spec": {"color": "blue", "size": 2}})");
  auto waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'beehive " +
                 test_schema_for(db_path()) + "' AND wait_event_type = 'Lock'";
  std::optional<Process> apply;
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; });  // never started
  cc.within(ctx_, [&](const Context& tx) {
    widgets().create(tx, {"red", 1}, with_slug("raced"));
    apply.emplace(args({"apply", "-f", file}));
    // The tool has looked for the object, and waits for this transaction's lock.
    EXPECT_TRUE(eventually([&] { return query_test_store(db_path(), waiting)[0][0] == "1"; }));
  });
  ASSERT_TRUE(apply);
  auto r = apply->wait();
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/raced configured\n");
  EXPECT_EQ(widgets().get_by_slug(ctx_, "raced").spec, (WidgetSpec{"blue", 2}));
}

TEST_F(CtlWriteTest, ApplyAnArrayFromStdin) {
  widgets().create(ctx_, {"red", 1}, with_slug("old"));
  auto docs = R"([
    {"group": "acme.com", "kind": "Widget", "slug": "old", "spec": {"color": "red", "size": 5}},
    {"group": "acme.com", "kind": "Widget", "slug": "new", "spec": {"color": "green", "size": 1},
     "labels": {"tier": "db"}}])";
  auto r = run_with_input(args({"apply", "-f", "-"}), docs);
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/old configured\nWidget.acme.com/new created\n");
  EXPECT_EQ(widgets().get_by_slug(ctx_, "old").spec.size, 5);
  EXPECT_EQ(widgets().get_by_slug(ctx_, "new").labels, (Labels{{"tier", "db"}}));
}

// A reader that goes early (`apply ... | head -1`) does not stop the writes halfway:
// every document is applied, and the lost output is reported (status 1).
TEST_F(CtlWriteTest, ApplyWhoseReaderWentAppliesEveryDocumentAndSaysTheOutputIsLost) {
  auto docs = Json::array();
  constexpr int n = 3000;  // ~90 KB of report: more than a pipe holds
  for (int i = 0; i < n; ++i)
    docs.push_back({{"group", "acme.com"},
                    {"kind", "Widget"},
                    {"slug", std::string("w").append(std::to_string(i))},
                    {"spec", {{"color", "red"}, {"size", i}}}});
  auto file = write_file("many.json", docs.dump());
  Process p(args({"apply", "-f", file}));
  ASSERT_TRUE(p.read_line().has_value());
  p.close_stdout();
  auto r = p.wait();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot write the output"), std::string::npos) << r.err;
  EXPECT_EQ(widgets().list(ctx_).size(), static_cast<std::size_t>(n));
}

TEST_F(CtlWriteTest, ApplyRefusesMalformedInputAndWritesNothing) {
  auto r = run_with_input(args({"apply", "-f", "-"}), "{not json");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not valid JSON: parse error at line 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;  // the parser's own code

  // A member given twice: which one counts is nobody's guess, anywhere in the document.
  for (auto text :
       {R"({"group": "acme.com", "kind": "Widget", "slug": "f", "spec": {}, "slug": "g"})",
        R"({"group": "acme.com", "kind": "Widget", "slug": "f", "spec": {"a": 1, "a": 2}})"}) {
    r = run_with_input(args({"apply", "-f", "-"}), text);
    EXPECT_EQ(r.status, 1) << text;
    EXPECT_NE(r.err.find("appears twice"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(widgets().list(ctx_).empty());

  // The second document has no spec: the first is not written either.
  r = run_with_input(args({"apply", "-f", "-"}),
                     R"([{"group": "acme.com", "kind": "Widget", "slug": "x", "spec": {}},
                         {"group": "acme.com", "kind": "Widget", "slug": "y"}])");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[1]: \"spec\" is missing"), std::string::npos) << r.err;
  EXPECT_TRUE(widgets().list(ctx_).empty());

  // A label the library refuses.
  r = run_with_input(args({"apply", "-f", "-"}),
                     R"({"group": "acme.com", "kind": "Widget", "slug": "x", "spec": {},
                         "labels": {"bad key": "v"}})");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("invalid argument"), std::string::npos) << r.err;

  // Labels over the object's limit together (8 MiB of keys and values), each one valid:
  // refused before the first document is written, as the library would refuse them.
  nlohmann::json many = nlohmann::json::object();
  const std::string prefix =
      std::string(60, 'a') + "." + std::string(60, 'b') + "." + std::string(60, 'c') + ".io/n";
  for (int i = 0; i < 33000; ++i) many[prefix + std::to_string(i)] = std::string(63, 'v');
  nlohmann::json docs = nlohmann::json::array({{{"group", "acme.com"},
                                                {"kind", "Widget"},
                                                {"slug", "x"},
                                                {"spec", nlohmann::json::object()}},
                                               {{"group", "acme.com"},
                                                {"kind", "Widget"},
                                                {"slug", "y"},
                                                {"spec", nlohmann::json::object()},
                                                {"labels", many}}});
  r = run_with_input(args({"apply", "-f", "-"}), docs.dump());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[1]: labels of"), std::string::npos) << r.err;
  EXPECT_TRUE(widgets().list(ctx_).empty());

  // Numbers the spec cannot hold as written: one beyond a double's range, and an integer
  // beyond 64 bits (it would be stored rounded, as 1.2345678901234568e+29).
  r = run_with_input(
      args({"apply", "-f", "-"}),
      R"({"group": "acme.com", "kind": "Widget", "slug": "x", "spec": {"n": 1e400}})");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = run_with_input(
      args({"apply", "-f", "-"}),
      R"({"group": "acme.com", "kind": "Widget", "slug": "x", "spec": {"n": 123456789012345678901234567890}})");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("beyond 64 bits"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("1234567890"), std::string::npos) << r.err;  // not quoted: a secret?
  EXPECT_TRUE(widgets().list(ctx_).empty());

  r = ctl({"apply", "-f", dir_.file("missing.json").string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  r = ctl({"apply", "-f", dir_.path().string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(": a directory"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"apply"}).status, 2);  // -f is required
  // A mistyped -f that never ends (or a huge log) is refused at 64 MiB, not read whole.
  r = ctl({"apply", "-f", "/dev/zero"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("more than 64 MiB of input"), std::string::npos) << r.err;
}

// The empty slug is a slug like any other, to apply as to the library; an empty kind
// names none.
TEST_F(CtlWriteTest, ApplyTakesTheEmptySlugAndRefusesAnEmptyKind) {
  auto r = run_with_input(args({"apply", "-f", "-"}),
                          R"({"group": "acme.com", "kind": "Widget", "slug": "",
                              "spec": {"color": "red", "size": 1}})");
  EXPECT_OK(r);
  EXPECT_EQ(widgets().get_by_slug(ctx_, "").spec, (WidgetSpec{"red", 1}));
  // Listed as "" (a blank cell would shift the columns after it).
  auto id = std::to_string(widgets().get_by_slug(ctx_, "").id);
  r = ctl({"get", "Widget"});
  EXPECT_OK(r);
  std::vector<std::string> listed;
  for (auto& line : lines(r.out))
    if (auto f = fields(line); !f.empty() && f[0] == id) listed = f;
  ASSERT_GE(listed.size(), 3u) << r.out;
  EXPECT_EQ(listed[1], "\"\"");
  EXPECT_EQ(listed[2], "1");  // the generation, in its column
  // Slugs spelled like the placeholders are quoted: each cell names one slug.
  for (std::string slug : {"<none>", "\"\""}) widgets().create(ctx_, {"red", 3}, with_slug(slug));
  widgets().create(ctx_, {"red", 3});  // no slug
  r = ctl({"get", "Widget"});
  EXPECT_OK(r);
  std::multiset<std::string> cells;
  for (auto& line : lines(r.out))
    if (auto f = fields(line); f.size() > 2 && f[0] != "ID") cells.insert(f[1]);
  EXPECT_EQ(cells.count("<none>"), 1u) << r.out;
  EXPECT_EQ(cells.count("\"<none>\""), 1u) << r.out;
  EXPECT_EQ(cells.count("\"\\\"\\\"\""), 1u) << r.out;  // "\"\""
  // It names an owner too, as "KIND/".
  auto child = widgets().create(ctx_, {"red", 2}, with_slug("child"), with_owner(std::stoll(id)));
  r = ctl({"get", "Widget", "--owner", "Widget/"});
  EXPECT_OK(r);
  EXPECT_EQ(ids(r.out), (std::vector<std::string>{std::to_string(child.id)}));
  r = run_with_input(args({"apply", "-f", "-"}),
                     R"({"group": "acme.com", "kind": "", "slug": "x", "spec": {}})");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("\"kind\" must not be empty"), std::string::npos) << r.err;
}

// Names and labels are checked by the library's own rules before the first write too: a
// bad one in a later document writes none of the documents, and a document whose spec is
// fine but whose labels are not leaves its object as it was.
TEST_F(CtlWriteTest, ApplyChecksNamesAndLabelsBeforeTheFirstWrite) {
  auto x = widgets().create(ctx_, {"red", 1}, with_slug("x"), with_labels({{"tier", "web"}}));
  auto widget = [](const std::string& slug, const std::string& rest = "") {
    return R"({"group": "acme.com", "kind": "Widget", "slug": ")" + slug +
           R"(", "spec": {"color": "blue", "size": 1})" + rest + "}";
  };
  const std::string huge = R"({"group": "acme.com", "kind": "Widget", "slug": "z", "spec": ")" +
                           std::string(8 * 1024 * 1024, 'x') + R"("})";
  for (auto bad :
       {widget("z", R"(, "labels": {"bad key": "v"})"),
        widget("z", R"(, "labels": {"tier": "-web-"})"), widget(std::string(513, 's')),
        R"({"kind": ")" + std::string(513, 'k') + R"(", "slug": "z", "spec": {}})", huge}) {
    auto r = run_with_input(args({"apply", "-f", "-"}), "[" + widget("y") + ", " + bad + "]");
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_NE(r.err.find("<stdin> [1]: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("invalid argument"), std::string::npos) << r.err;
    EXPECT_EQ(widgets().list(ctx_).size(), 1u) << bad;
  }
  auto r = run_with_input(args({"apply", "-f", "-"}),
                          R"({"group": "acme.com", "kind": "Widget", "slug": "x",
                              "spec": {"color": "blue", "size": 2}, "labels": {"tier": "w b"}})");
  EXPECT_EQ(r.status, 1);
  auto after = widgets().get(ctx_, x.id);
  EXPECT_EQ(after.spec, (WidgetSpec{"red", 1}));
  EXPECT_EQ(after.resource_version, x.resource_version);
}

/// Widget specs at schema version 2; an older spec's color says what it was converted from.
class WidgetsV2 : public Migrator {
 public:
  int schema_version_spec() const override { return 2; }
  int schema_version_status() const override { return 0; }
  nlohmann::json convert_spec(int from, nlohmann::json raw) const override {
    raw["color"] = "converted from " + std::to_string(from);
    return raw;
  }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }
};

// A kind whose application versions its specs (a Migrator): written at version 0, a
// document would be converted as the oldest format there is, so apply must be told the
// version its spec is written in, and stores it at that version.
TEST_F(CtlWriteTest, ApplyToAKindWithVersionedSpecsWritesAtTheVersionItIsTold) {
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, widget_kind, [](auto&, auto&, auto&) { return Result{}; },
      with_migrator(std::make_shared<WidgetsV2>()));
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"));  // at version 2
  auto widget = [](const std::string& slug, const std::string& color, const std::string& rest) {
    return R"({"group": "acme.com", "kind": "Widget", "slug": ")" + slug +
           R"(", "spec": {"color": ")" + color + R"(", "size": 1})" + rest + "}";
  };
  auto apply = [&](const std::string& docs) {
    return run_with_input(args({"apply", "-f", "-"}), docs);
  };
  // Not told: refused before the first write, with what to say.
  auto r = apply("[" + widget("b", "blue", R"(, "spec_version": 2)") + ", " +
                 widget("c", "blue", "") + "]");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("<stdin> [1]: Widget.acme.com has specs stored at schema version 2"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("\"spec_version\""), std::string::npos) << r.err;
  EXPECT_EQ(widgets().list(ctx_).size(), 1u);
  // A kind with nothing versioned stored yet: the other documents of the input tell.
  r = apply(
      "[" + widget("b", "blue", R"(, "spec_version": 2)") + ", " +
      R"({"kind": "Gadget", "group": "acme.com", "slug": "g", "spec": {}, "spec_version": 1},)" +
      R"({"kind": "Gadget", "group": "acme.com", "slug": "h", "spec": {}}])");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("<stdin> [2]: other documents give Gadget.acme.com specs a schema version"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(widgets().list(ctx_).size(), 1u);
  // Told: stored at that version, read as written.
  EXPECT_OK(apply(widget("b", "blue", R"(, "spec_version": 2)")));
  EXPECT_EQ(widgets().get_by_slug(ctx_, "b").spec.color, "blue");
  r = apply(widget("a", "green", R"(, "spec_version": 2)"));
  EXPECT_OK(r);
  EXPECT_NE(r.out.find("configured"), std::string::npos) << r.out;
  EXPECT_EQ(widgets().get(ctx_, a.id).spec.color, "green");
  EXPECT_NE(apply(widget("a", "green", R"(, "spec_version": 2)")).out.find("unchanged"),
            std::string::npos);
  // An older version: converted when read, like the application's own older specs; over
  // a newer stored spec, refused as a downgrade, the object left as it was.
  EXPECT_OK(apply(widget("c", "x", R"(, "spec_version": 1)")));
  EXPECT_EQ(widgets().get_by_slug(ctx_, "c").spec.color, "converted from 1");
  r = apply(widget("a", "white", R"(, "spec_version": 1)"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("schema version 2 cannot be overwritten at version 1"), std::string::npos)
      << r.err;
  EXPECT_EQ(widgets().get(ctx_, a.id).spec.color, "green");
  // Refused before the first write, as a document written at an older version than an
  // earlier document of the input wrote.
  for (auto docs : {"[" + widget("e", "blue", R"(, "spec_version": 2)") + ", " +
                        widget("a", "white", R"(, "spec_version": 1)") + "]",
                    "[" + widget("e", "blue", R"(, "spec_version": 2)") + ", " +
                        widget("e", "white", R"(, "spec_version": 1)") + "]"}) {
    r = apply(docs);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("<stdin> [1]: Widget.acme.com/"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("schema version 2 cannot be overwritten at version 1"), std::string::npos)
        << r.err;
    EXPECT_THROW(widgets().get_by_slug(ctx_, "e"), Error) << docs;
  }
  EXPECT_EQ(widgets().get(ctx_, a.id).spec.color, "green");
  // Not a version.
  for (auto bad : {"-1", "1.5", "\"2\"", "2147483648"}) {
    r = apply(widget("d", "blue", std::string(R"(, "spec_version": )") + bad));
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_NE(r.err.find("\"spec_version\" must be an integer from 0 to 2147483647"),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(widgets().list(ctx_).size(), 3u);
}

// Any text is a kind or a group to the library, dots and slashes included: apply writes
// such kinds, and the other commands name them (any dot may end the kind, any '/' of an
// --owner may end it).
TEST_F(CtlWriteTest, KindsWithDotsAndSlashesAreNamedByEveryCommand) {
  auto r = run_with_input(args({"apply", "-f", "-"}), R"([
      {"kind": "Foo.v1", "slug": "a", "spec": {"color": "core", "size": 1}},
      {"group": "v1", "kind": "Foo", "slug": "a", "spec": {"color": "v1", "size": 1}},
      {"group": "acme.com", "kind": "Bar/v2", "slug": "b", "spec": {"color": "", "size": 0}}])");
  EXPECT_OK(r);
  // Each is printed as the other commands read it back: the core group's "Foo.v1." apart
  // from kind Foo of group v1.
  EXPECT_EQ(r.out, "Foo.v1./a created\nFoo.v1/a created\nBar/v2.acme.com/b created\n");
  auto kind_of = [&](const std::string& text, const std::string& slug) -> std::string {
    auto got = ctl({"get", text, slug, "-o", "json"});
    if (got.status != 0) return "status " + std::to_string(got.status) + ": " + got.err;
    auto j = Json::parse(got.out);
    return j["kind"].get<std::string>() + " in \"" + j["group"].get<std::string>() + "\"";
  };
  // "Foo.v1" reads both ways; spelled exactly, the kind Foo of group v1 wins, and the
  // core group's kind is "Foo.v1." (the core group named, as for any kind).
  EXPECT_EQ(kind_of("Foo.v1", "a"), "Foo in \"v1\"");
  EXPECT_EQ(kind_of("Foo.v1.", "a"), "Foo.v1 in \"\"");
  EXPECT_EQ(kind_of("Bar/v2", "b"), "Bar/v2 in \"acme.com\"");
  EXPECT_EQ(kind_of("bar/v2.acme.com", "b"), "Bar/v2 in \"acme.com\"");
  r = ctl({"label", "Foo.v1.", "a", "env=dev"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Foo.v1./a labeled\n");
  EXPECT_EQ(Widgets(*bh_, GroupKind{"", "Foo.v1"}).get_by_slug(ctx_, "a").labels,
            (Labels{{"env", "dev"}}));
  EXPECT_EQ(Widgets(*bh_, GroupKind{"v1", "Foo"}).get_by_slug(ctx_, "a").labels, Labels{});
  EXPECT_OK(ctl({"describe", "Bar/v2", "b"}));

  auto owner = Widgets(*bh_, GroupKind{"acme.com", "Bar/v2"}).get_by_slug(ctx_, "b");
  auto child = widgets().create(ctx_, {"red", 1}, with_slug("child"), with_owner(owner.id));
  r = ctl({"get", "Widget", "--owner", "Bar/v2.acme.com/b"});
  EXPECT_OK(r);
  EXPECT_EQ(ids(r.out), (std::vector<std::string>{std::to_string(child.id)}));
  r = ctl({"get", "Widget", "--owner", "Bar/v2/nope"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("kinds present: "), std::string::npos) << r.err;
}

// A stored kind name holding a newline is escaped in the messages that list kinds: it
// cannot forge a line of the tool's output.
TEST_F(CtlWriteTest, AKindNameWithANewlineCannotForgeAMessageLine) {
  Widgets odd(*bh_, {"acme.com", "W\nbeehive-ctl: all objects healthy"});
  odd.create(ctx_, {"red", 1});
  auto r = ctl({"get", "nosuchkind"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.find("\nbeehive-ctl: all objects healthy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("W\\nbeehive-ctl"), std::string::npos) << r.err;
}

TEST_F(CtlWriteTest, DeleteRequestsDeletion) {
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"), with_finalizers({"keep"}));
  auto r = ctl({"delete", "widgets", "a"});  // kinds by plural, as for reads
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a deletion requested\n");
  EXPECT_TRUE(widgets().get(ctx_, a.id).deletion_requested_at.has_value());
  EXPECT_EQ(ctl({"delete", "widget", "a"}).out, "Widget.acme.com/a already deleting\n");
  // With the version it is at, the deletion is a write of nothing: said so too.
  auto again = widgets().get(ctx_, a.id);
  auto precise =
      ctl({"delete", "widget", "a", "--resource-version", std::to_string(again.resource_version)});
  EXPECT_OK(precise);
  EXPECT_EQ(precise.out, "Widget.acme.com/a already deleting\n");
  EXPECT_EQ(widgets().get(ctx_, a.id).resource_version, again.resource_version);
  auto missing = ctl({"delete", "widget", "nope"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;
  // A stale --resource-version is a conflict, nothing written.
  auto b = widgets().create(ctx_, {"red", 1}, with_slug("b"));
  widgets().update(ctx_, b.id, {"red", 2});
  auto stale =
      ctl({"delete", "widget", "b", "--resource-version", std::to_string(b.resource_version)});
  EXPECT_EQ(stale.status, 1);
  EXPECT_NE(stale.err.find("conflict"), std::string::npos) << stale.err;
  EXPECT_FALSE(widgets().get(ctx_, b.id).deletion_requested_at.has_value());
  // A mistyped --db (--schema) creates no database.
  auto absent = dir_.file("absent.db");
  auto no_store = run(ctl_command(BEEHIVE_CTL, absent, {"delete", "widget", "a"}));
  EXPECT_EQ(no_store.status, 1);
  EXPECT_NE(no_store.err.find(no_store_message()), std::string::npos) << no_store.err;
  EXPECT_FALSE(store_exists(absent));
}

// A beehive database another connection holds locked is busy, not foreign: a write
// command says so, and a file that is no database at all is the foreign one.
TEST_F(CtlWriteTest, AWriteCommandSaysABusyDatabaseIsBusyNotForeign) {
  auto file = dir_.file("busy.db");
  { auto store = sqlite::open(file); }
  SQLite::Database holder(file.string(), SQLite::OPEN_READWRITE);
  holder.exec("PRAGMA locking_mode = EXCLUSIVE");
  holder.exec("BEGIN EXCLUSIVE");
  auto r =
      run({BEEHIVE_CTL, "--db", file.string(), "--busy-timeout", "50ms", "delete", "widget", "a"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("database is locked"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not a beehive database"), std::string::npos) << r.err;
  holder.exec("ROLLBACK");
  auto junk = dir_.file("junk.db");
  std::ofstream(junk) << std::string(4096, 'x');
  r = run({BEEHIVE_CTL, "--db", junk.string(), "delete", "widget", "a"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is not a beehive database"), std::string::npos) << r.err;
}

// A database this user may read but not write is refused before SQLite touches it: it
// would open it read-only, and its first read would leave -wal and -shm files with the
// database's mode behind, so that opens kept failing once the mode was put right.
TEST_F(CtlWriteTest, ADatabaseThisUserCannotWriteIsRefusedAndLeftAsItWas) {
  namespace fs = std::filesystem;
  std::vector<std::string> as;
  auto dir = dir_.file("ro");
  fs::create_directory(dir);
  auto file = dir / "app.db";
  {
    auto store = sqlite::open(file);
    Beehive bh(store);
    Widgets(bh, widget_kind).create(ctx_, {"a", 1}, with_slug("a"));
  }
  if (::geteuid() == 0) {  // as another user, whom the mode binds
    ASSERT_TRUE(fs::exists("/usr/bin/setpriv"))
        << "run as root, the test needs setpriv to run the tool as another user";
    as = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    for (auto& p : {dir, file}) ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0) << p;
  }
  fs::permissions(file, fs::perms::owner_read);
  auto label = [&] {
    std::vector<std::string> cmd{as};
    for (auto& a : std::vector<std::string>{BEEHIVE_CTL, "--db", file.string(), "label",
                                            "Widget.acme.com", "a", "env=x"})
      cmd.push_back(a);
    return run(cmd);
  };
  auto r = label();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot open for writing"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "app.db-wal"));
  EXPECT_FALSE(fs::exists(dir / "app.db-shm"));
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  r = label();
  EXPECT_OK(r);
}

// A database named by a bare file name, in the working directory, nothing running on it
// (no -wal or -shm beside it): the write commands take it.
TEST_F(CtlWriteTest, AWriteCommandTakesADatabaseNamedRelativeToTheWorkingDirectory) {
  auto dir = dir_.file("here");
  std::filesystem::create_directory(dir);
  {
    Beehive bh(sqlite::open(dir / "app.db"));
    Widgets(bh, widget_kind).create(ctx_, {"a", 1}, with_slug("a"));
  }
  ASSERT_FALSE(std::filesystem::exists(dir / "app.db-wal"));
  auto r =
      run({"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" --db app.db label Widget.acme.com a env=x",
           dir.string(), BEEHIVE_CTL});
  EXPECT_OK(r);
  Beehive bh(sqlite::open(dir / "app.db"));
  EXPECT_EQ(Widgets(bh, widget_kind).get_by_slug(ctx_, "a").labels, (Labels{{"env", "x"}}));
}

// Another program's SQLite database given by mistake: every write command refuses it,
// and leaves it as it was (no beehive tables, its journal mode unchanged).
TEST_F(CtlWriteTest, WriteCommandsRefuseAnSqliteFileThatHoldsNoStore) {
  auto other = dir_.file("other.db");
  {
    SQLite::Database db(other.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE t (x INTEGER)");
  }
  auto doc = write_file("a.json", R"({"group": "acme.com", "kind": "Widget", "slug": "a",
      "spec": {}})");
  for (auto cmd : std::vector<std::vector<std::string>>{{"delete", "widget", "a"},
                                                        {"label", "widget", "a", "env=x"},
                                                        {"requeue", "widget", "a"},
                                                        {"apply", "-f", doc}}) {
    std::vector<std::string> line{BEEHIVE_CTL, "--db", other.string()};
    line.insert(line.end(), cmd.begin(), cmd.end());
    auto r = run(line);
    EXPECT_EQ(r.status, 1) << cmd[0];
    EXPECT_NE(r.err.find("is not a beehive database"), std::string::npos) << r.err;
  }
  SQLite::Database db(other.string(), SQLite::OPEN_READONLY);
  SQLite::Statement tables(db, "SELECT group_concat(name) FROM sqlite_master");
  ASSERT_TRUE(tables.executeStep());
  EXPECT_EQ(tables.getColumn(0).getString(), "t");
  EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "delete");
}

// Slugs are any text, so "7" can be one object's id and another's slug: the tool
// refuses to guess (a delete would remove the wrong object) until --by says which.
TEST_F(CtlWriteTest, ATokenThatIsOneObjectsIdAndAnothersSlugIsNamedWithBy) {
  auto by_id = widgets().create(ctx_, {"red", 1}, with_slug("first"));
  const auto token = std::to_string(by_id.id);
  auto by_slug = widgets().create(ctx_, {"blue", 1}, with_slug(token));
  auto deleting = [&](const Object<WidgetSpec, WidgetStatus>& o) {
    return widgets().get(ctx_, o.id).deletion_requested_at.has_value();
  };
  for (std::vector<std::string> cmd : {std::vector<std::string>{"delete", "widget", token},
                                       {"describe", "widget", token},
                                       {"label", "widget", token, "a=b"},
                                       {"get", "widget", "--owner", "widget/" + token}}) {
    auto r = ctl(cmd);
    EXPECT_EQ(r.status, 1) << cmd[0] << ": " << r.out;
    EXPECT_NE(r.err.find("ambiguous"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--by id or --by slug"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(deleting(by_id));
  EXPECT_FALSE(deleting(by_slug));
  EXPECT_TRUE(widgets().get(ctx_, by_slug.id).labels.empty());

  auto r = ctl({"delete", "widget", token, "--by", "slug"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/" + token + " deletion requested\n");
  EXPECT_TRUE(deleting(by_slug));
  EXPECT_FALSE(deleting(by_id));
  EXPECT_OK(ctl({"label", "widget", token, "a=b", "--by", "id"}));
  EXPECT_EQ(widgets().get(ctx_, by_id.id).labels, (std::map<std::string, std::string>{{"a", "b"}}));
  // Only that reading: a slug is not found --by id, nor an id --by slug.
  auto slug_by_id = ctl({"describe", "widget", "first", "--by", "id"});
  EXPECT_EQ(slug_by_id.status, 1);
  EXPECT_NE(slug_by_id.err.find("not an id of the kind"), std::string::npos) << slug_by_id.err;
  auto other = widgets().create(ctx_, {"green", 1});
  auto id_by_slug = ctl({"describe", "widget", std::to_string(other.id), "--by", "slug"});
  EXPECT_EQ(id_by_slug.status, 1);
  EXPECT_NE(id_by_slug.err.find("not a slug of the kind"), std::string::npos) << id_by_slug.err;
  // An object whose slug is its own id is no ambiguity.
  auto self = widgets().create(ctx_, {"white", 1}, with_slug(std::to_string(other.id + 1)));
  ASSERT_EQ(self.id, other.id + 1);
  EXPECT_OK(ctl({"describe", "widget", std::to_string(self.id)}));
  EXPECT_EQ(ctl({"get", "widget", "--by", "name"}).status, 2);
}

TEST_F(CtlWriteTest, LabelSetsAndRemoves) {
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"),
                            with_labels({{"tier", "web"}, {"team", "x"}}));
  auto r = ctl({"label", "Widget", "a", "env=prod", "team-"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a labeled\n");
  EXPECT_EQ(widgets().get(ctx_, a.id).labels, (Labels{{"env", "prod"}, {"tier", "web"}}));
  EXPECT_NE(ctl({"describe", "Widget", "a"}).out.find("Labels:              env=prod,tier=web"),
            std::string::npos);
  // By id too; the same labels again write nothing.
  r = ctl({"label", "Widget", std::to_string(a.id), "env=prod"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a unchanged\n");
  // The command line's own mistakes are usage errors.
  EXPECT_EQ(ctl({"label", "Widget", "a", "justakey"}).status, 2);
  EXPECT_EQ(ctl({"label", "Widget", "a", "bad key=v"}).status, 2);
  EXPECT_EQ(ctl({"label", "Widget", "a"}).status, 2);
  for (auto pair : {std::pair{"x=1", "x-"}, {"x-", "x=z"}, {"x=1", "x=2"}}) {
    auto twice = ctl({"label", "Widget", "a", pair.first, pair.second});
    EXPECT_EQ(twice.status, 2) << pair.first << " " << pair.second;
    EXPECT_NE(twice.err.find("changed twice"), std::string::npos) << twice.err;
  }
}

TEST_F(CtlWriteTest, LabelWithAStaleResourceVersionIsAConflict) {
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"));
  auto stale = a.resource_version;
  widgets().update(ctx_, a.id, {"red", 2});
  auto r = ctl({"label", "Widget", "a", "x=1", "--resource-version", std::to_string(stale)});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("conflict"), std::string::npos) << r.err;
  EXPECT_TRUE(widgets().get(ctx_, a.id).labels.empty());

  auto current = widgets().get(ctx_, a.id).resource_version;
  EXPECT_OK(ctl({"label", "Widget", "a", "x=1", "--resource-version", std::to_string(current)}));
  EXPECT_EQ(widgets().get(ctx_, a.id).labels, (Labels{{"x", "1"}}));
}

TEST_F(CtlWriteTest, GetSelectsByLabels) {
  auto web = widgets().create(ctx_, {"red", 1}, with_slug("web"), with_labels({{"tier", "web"}}));
  auto db = widgets().create(ctx_, {"red", 1}, with_slug("db"), with_labels({{"tier", "db"}}));
  widgets().create(ctx_, {"red", 1}, with_slug("bare"));

  auto r = ctl({"get", "widgets", "-l", "tier=web"});
  EXPECT_OK(r);
  EXPECT_EQ(ids(r.out), std::vector<std::string>{std::to_string(web.id)}) << r.out;
  EXPECT_EQ(fields(lines(r.out).at(0)).back(), "LABELS");
  EXPECT_EQ(fields(lines(r.out).at(1)).back(), "tier=web");

  r = ctl({"get", "widgets", "--selector", "tier in (db, web)"});
  EXPECT_OK(r);
  EXPECT_EQ(ids(r.out), (std::vector<std::string>{std::to_string(web.id), std::to_string(db.id)}));
  r = ctl({"get", "widgets", "-l", "!tier", "-o", "json"});
  EXPECT_OK(r);
  auto j = Json::parse(r.out);
  ASSERT_EQ(j.size(), 1u) << r.out;
  EXPECT_EQ(j[0]["slug"], "bare");

  auto bad = ctl({"get", "widgets", "-l", "tier in ("});
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_EQ(ctl({"get", "widgets", "web", "-l", "tier=web"}).status, 2);  // a name and -l
}

TEST_F(CtlWriteTest, GetSelectsByOwner) {
  auto parent = Widgets(*bh_, gadget_kind).create(ctx_, {"big", 1}, with_slug("parent"));
  auto other = Widgets(*bh_, gadget_kind).create(ctx_, {"big", 1}, with_slug("other"));
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"), with_owner(parent.id));
  widgets().create(ctx_, {"red", 1}, with_slug("b"), with_owner(other.id));
  auto c = widgets().create(ctx_, {"red", 1}, with_slug("c"), with_owner(parent.id));
  widgets().create(ctx_, {"red", 1}, with_slug("d"));

  auto r = ctl({"get", "Widget", "--owner", "gadgets/parent"});
  EXPECT_OK(r);
  EXPECT_EQ(ids(r.out), (std::vector<std::string>{std::to_string(a.id), std::to_string(c.id)}));
  r = ctl({"get", "Widget", "--owner", "Gadget.acme.com/" + std::to_string(other.id)});
  EXPECT_EQ(ids(r.out).size(), 1u) << r.out;
  EXPECT_EQ(ctl({"get", "Widget", "--owner", "Gadget/nope"}).status, 1);
  EXPECT_EQ(ctl({"get", "Widget", "--owner", "parent"}).status, 2);

  // A page's token is for the owner, however it is named; another owner's is refused.
  r = ctl({"get", "Widget", "--owner", "gadgets/parent", "--limit", "1"});
  ASSERT_EQ(r.err.rfind("continue: ", 0), 0u) << r.err;
  auto token = r.err.substr(10, r.err.find('\n') - 10);
  r = ctl({"get", "Widget", "--owner", "Gadget/" + std::to_string(parent.id), "--limit", "1",
           "--continue", token});
  EXPECT_OK(r);
  EXPECT_EQ(ids(r.out), std::vector<std::string>{std::to_string(c.id)});
  r = ctl({"get", "Widget", "--owner", "gadgets/other", "--limit", "1", "--continue", token});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a token of this listing"), std::string::npos) << r.err;
}

TEST_F(CtlWriteTest, PagesCoverEveryObjectOnce) {
  for (int i = 0; i < 5; ++i)
    widgets().create(ctx_, {"red", i}, with_slug(std::string("w").append(std::to_string(i))));
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  for (;;) {
    std::vector<std::string> cmd{"get", "widgets", "--limit", "2"};
    if (!token.empty()) cmd.insert(cmd.end(), {"--continue", token});
    auto r = ctl(cmd);
    ASSERT_EQ(r.status, 0) << r.err;
    ++pages;
    auto page = ids(r.out);
    EXPECT_LE(page.size(), 2u);
    seen.insert(seen.end(), page.begin(), page.end());
    // The token is on stderr, "continue: TOKEN", only when another page follows.
    if (r.err.rfind("continue: ", 0) != 0) break;
    token = r.err.substr(10, r.err.find('\n') - 10);
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 5u);

  // As JSON, the page carries its token.
  auto r = ctl({"get", "widgets", "--limit", "3", "-o", "json"});
  EXPECT_OK(r);
  auto j = Json::parse(r.out);
  EXPECT_EQ(j["items"].size(), 3u);
  ASSERT_TRUE(j["continue"].is_string()) << r.out;
  r = ctl({"get", "widgets", "--limit", "3", "--continue", j["continue"], "-o", "json"});
  EXPECT_OK(r);
  j = Json::parse(r.out);
  EXPECT_EQ(j["items"].size(), 2u);
  EXPECT_TRUE(j["continue"].is_null());
  EXPECT_EQ(ctl({"get", "widgets", "--continue", "garbage"}).status, 2);
  // A token is for the listing that gave it: with another selector it is a usage error.
  r = ctl({"get", "widgets", "--limit", "3", "-l", "!tier", "--continue", token});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.err.find("not a token of this listing"), std::string::npos) << r.err;
  // The same selection spelled otherwise is the same listing (here: none, and blanks).
  r = ctl({"get", "widgets", "--limit", "3", "-l", " ", "--continue", token});
  EXPECT_OK(r);
}

TEST_F(CtlWriteTest, WatchResumesFromAVersion) {
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"));
  auto from = widgets().create(ctx_, {"red", 1}, with_slug("untouched")).resource_version;
  widgets().update(ctx_, a.id, {"red", 2});
  auto b = widgets().create(ctx_, {"red", 1}, with_slug("b"));
  auto r = ctl({"watch", "Widget", "--resume-from", std::to_string(from), "--max-changes", "2",
                "--interval", "20ms"});
  EXPECT_OK(r);
  auto out = lines(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;  // the header, no EXISTING rows, two changes
  EXPECT_EQ(fields(out[0]).at(0), "EVENT");
  auto m = fields(out[1]), added = fields(out[2]);
  EXPECT_EQ(std::vector<std::string>(m.begin(), m.begin() + 4),
            (std::vector<std::string>{"MODIFIED", std::to_string(a.id), "a", "2"}));
  EXPECT_EQ(std::vector<std::string>(added.begin(), added.begin() + 3),
            (std::vector<std::string>{"ADDED", std::to_string(b.id), "b"}));

  auto too_new = ctl({"watch", "Widget", "--resume-from", "1000000", "--for", "1s"});
  EXPECT_EQ(too_new.status, 1);
  EXPECT_NE(too_new.err.find("watch_too_new"), std::string::npos) << too_new.err;
}

TEST_F(CtlWriteTest, WatchFromAVersionTheLogNoLongerHoldsIsTooOld) {
  // A manual clock, so that the entries are older than the trim's cut.
  auto clock = std::make_shared<ManualClock>();
  bh_.reset();  // a store serves one beehive at a time
  bh_ = std::make_unique<Beehive>(store_, with_clock(clock));
  auto stop = bh_->start(ctx_);  // trimming the log is the leader's (PostgreSQL)
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"));
  for (int i = 2; i < 5; ++i) widgets().update(ctx_, a.id, {"red", i});
  clock->advance(1h);
  caf::scoped_actor self{actor_system_of(*bh_)};
  int removed = 0;
  self->request(bh_->store_writer(), std::chrono::seconds(10), trim_change_log_request{1, 1min})
      .receive([&](int n) { removed = n; }, [](caf::error&) {});
  ASSERT_GT(removed, 0);
  auto r =
      ctl({"watch", "Widget", "--resume-from", std::to_string(a.resource_version), "--for", "1s"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("watch_too_old"), std::string::npos) << r.err;
  stop(ctx_);
}

TEST_F(CtlWriteTest, RequeueIsLoggedWithoutChangingTheObject) {
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"));
  auto stop = bh_->start(ctx_);  // the application the requeue is for
  ASSERT_TRUE(eventually([&] { return bh_->is_leader(); }));
  auto r = ctl({"requeue", "widget", "a"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a requeued\n");
  EXPECT_EQ(widgets().get(ctx_, a.id).resource_version, a.resource_version);
  // A watch does not show it: nothing about the object changed.
  auto w = ctl({"watch", "Widget", "--resume-from", std::to_string(a.resource_version), "--for",
                "100ms", "--interval", "20ms"});
  EXPECT_OK(w);
  EXPECT_EQ(lines(w.out).size(), 1u) << w.out;
  EXPECT_EQ(ctl({"requeue", "widget", "nope"}).status, 1);
  stop(ctx_);
}

// With no application running nothing would ever act on a requeue: it is refused, not
// reported done, and nothing is recorded.
TEST_F(CtlWriteTest, ARequeueWithNoApplicationRunningIsRefusedAndRecordsNothing) {
  widgets().create(ctx_, {"red", 1}, with_slug("a"));
  const auto logged = [&] {
    return query_test_store(db_path(), "SELECT count(*) FROM change_log");
  };
  const auto before = logged();
  auto r = ctl({"requeue", "widget", "a"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("Widget.acme.com/a not requeued: no application runs on"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(test_backend_is_postgres() ? "leadership lease" : "run lock"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(logged(), before);
  // A missing object is still said as such.
  EXPECT_NE(ctl({"requeue", "widget", "nope"}).err.find("nope"), std::string::npos);
}

// A write command migrates an older schema forward, but not under a running
// application of that older build, which could then no longer write.
TEST_F(CtlWriteTest, AWriteCommandDoesNotMigrateAnOlderSchemaUnderARunningApplication) {
  widgets().create(ctx_, {"red", 1}, with_slug("a"));
  const int latest = schema_version();
  int running = -1;  // SQLite: the run lock, held as an application of an older build does
  if (test_backend_is_postgres()) {
    // The test's own store stays connected: the running application.
    query_test_store(db_path(), "UPDATE beehive_schema SET version = version - 1 RETURNING 1");
  } else {
    bh_.reset();
    store_.reset();
    {
      SQLite::Database db(db_path().string(), SQLite::OPEN_READWRITE);
      downgrade_schema(db, latest - 1);
    }
    auto lock = std::filesystem::canonical(db_path()).string() + ".beehive-lock";
    running = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(running, 0);
    ASSERT_EQ(::flock(running, LOCK_EX | LOCK_NB), 0);
  }
  auto r = ctl({"requeue", "widget", "a"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("a process runs on it"), std::string::npos) << r.err;
  EXPECT_EQ(schema_version(), latest - 1);  // not migrated
  if (test_backend_is_postgres()) {
    query_test_store(db_path(), "UPDATE beehive_schema SET version = version + 1 RETURNING 1");
    return;
  }
  ::close(running);  // the application stopped: the write migrates the file
  EXPECT_OK(ctl({"label", "widget", "a", "env=prod"}));
  EXPECT_EQ(schema_version(), latest);
}

// The same whatever the schema is named (the server keeps printable ASCII alone of a
// session's name) and whatever the tool's connection string calls the tool's own session.
TEST_F(CtlWriteTest, PgAWriteCommandFindsTheRunningApplicationOfASchemaNamedInAnyLanguage) {
  REQUIRE_POSTGRES();
  const std::string schema = test_schema_for(db_path()) + "_\u0437\u0430\u043a\u0430\u0437\u044b";
  const std::string pg = std::getenv("BEEHIVE_TEST_PG");
  auto in_schema = [&](const std::string& sql) {
    write_test_store(db_path(), std::string(sql).replace(sql.find("$s"), 2, "\"" + schema + "\""));
  };
  {
    Beehive app(postgres::open(pg, {.schema = schema}));
    Widgets(app, widget_kind).create(ctx_, {"red", 1}, with_slug("a"));
    in_schema("UPDATE $s.beehive_schema SET version = version - 1");
    auto r = run({BEEHIVE_CTL, "--pg", pg + " application_name=ops", "--schema", schema, "requeue",
                  "widget", "a"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("a process runs on it"), std::string::npos) << r.err;
    in_schema("UPDATE $s.beehive_schema SET version = version + 1");
  }
  {
    // An application whose connection string names its sessions otherwise is found by
    // the leadership lease it holds.
    Beehive app(postgres::open(pg + " application_name=orders-api", {.schema = schema}));
    auto stop = app.start(ctx_);
    ASSERT_TRUE(eventually([&] { return app.is_leader(); }));
    in_schema("UPDATE $s.beehive_schema SET version = version - 1");
    auto r = run({BEEHIVE_CTL, "--pg", pg, "--schema", schema, "requeue", "widget", "a"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("a process runs on it"), std::string::npos) << r.err;
    in_schema("UPDATE $s.beehive_schema SET version = version + 1");
    stop(ctx_);
  }
  in_schema("SET client_min_messages TO warning; DROP SCHEMA $s CASCADE");
}

// An apply whose input cannot be read or does not parse changes nothing, not even an
// older schema's version: with no application running, opening the store to write would
// migrate it, and the stopped application of the older build could not start again.
TEST_F(CtlWriteTest, AnApplyOfABadInputLeavesAnOlderSchemaAsItWas) {
  widgets().create(ctx_, {"red", 1}, with_slug("a"));
  const int latest = schema_version();
  bh_.reset();  // no application runs
  store_.reset();
  if (test_backend_is_postgres()) {
    query_test_store(db_path(), "UPDATE beehive_schema SET version = version - 1 RETURNING 1");
  } else {
    SQLite::Database db(db_path().string(), SQLite::OPEN_READWRITE);
    downgrade_schema(db, latest - 1);
  }
  EXPECT_EQ(ctl({"apply", "-f", dir_.file("missing.json").string()}).status, 1);
  EXPECT_EQ(run_with_input(args({"apply", "-f", "-"}), "{not json").status, 1);
  EXPECT_EQ(schema_version(), latest - 1) << "a failed apply migrated the schema";
  if (test_backend_is_postgres()) {  // only the number was lowered: no migration to run
    query_test_store(db_path(), "UPDATE beehive_schema SET version = version + 1 RETURNING 1");
    return;
  }
  // A good input migrates it, and is written.
  EXPECT_OK(run_with_input(args({"apply", "-f", "-"}),
                           R"({"group": "acme.com", "kind": "Widget", "slug": "b", "spec": {}})"));
  EXPECT_EQ(schema_version(), latest);
}

TEST_F(CtlWriteTest, RequeueWithResetBackoffStartsTheRetryLadderOver) {
  auto clock = std::make_shared<ManualClock>();
  bh_.reset();  // a store serves one beehive at a time
  bh_ = std::make_unique<Beehive>(store_, with_clock(clock));
  std::atomic<int> passes{0};
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind,
                                                [&](auto&, auto&, auto&) -> Result {
                                                  ++passes;
                                                  throw std::runtime_error("down");
                                                });
  auto a = widgets().create(ctx_, {"red", 1}, with_slug("a"));
  auto stop = bh_->start(ctx_);
  const auto next_at = [&](std::chrono::seconds d) {
    return eventually(
        [&] { return widgets().get_schedule(ctx_, a.id).next_requeue_at == clock->now() + d; });
  };
  ASSERT_TRUE(next_at(1s));
  clock->advance(1s);
  ASSERT_TRUE(next_at(2s));
  EXPECT_OK(ctl({"requeue", "widget", "a"}));  // keeps the ladder
  ASSERT_TRUE(eventually([&] { return passes == 3; }));
  EXPECT_TRUE(next_at(4s));
  auto r = ctl({"requeue", "widget", "a", "--reset-backoff"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out, "Widget.acme.com/a requeued\n");
  ASSERT_TRUE(eventually([&] { return passes == 4; }));
  EXPECT_TRUE(next_at(1s));
  stop(ctx_);
}

TEST_F(CtlWriteTest, ARunningBeehiveReactsToApplyAndRequeue) {
  widgets().create(ctx_, {"red", 1}, with_slug("w"));
  std::vector<std::string> peer_args{BEEHIVE_CTL_PEER, "acme.com", "Widget"};
  for (auto& a : ctl_location(db_path())) peer_args.push_back(a);
  Process peer(peer_args, /*pipe_stdin=*/true);
  // The start's resync reconciles it (before or after "started" is printed).
  ASSERT_TRUE(peer.wait_for_line("reconciled w 1 1", 30s));

  // A spec change written by the tool reaches the peer's controller.
  auto r = run_with_input(args({"apply", "-f", "-"}),
                          R"({"group": "acme.com", "kind": "Widget", "slug": "w",
                              "spec": {"color": "red", "size": 2}})");
  EXPECT_OK(r);
  EXPECT_TRUE(peer.wait_for_line("reconciled w 2 2", 30s));

  // A requeue reconciles it again, the spec as it was.
  EXPECT_OK(ctl({"requeue", "Widget", "w"}));
  EXPECT_TRUE(peer.wait_for_line("reconciled w 2 3", 30s));

  peer.close_stdin();
  auto done = peer.wait();
  EXPECT_EQ(done.status, 0) << done.err;
}

}  // namespace
}  // namespace beehive::test
