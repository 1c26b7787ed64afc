// beehive-ctl against databases built through the public API: each command's output,
// the exit statuses, and that the tool reads a database a running Beehive is using
// without disturbing it.

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <beehive/beehive.hpp>

#include "controller_fixture.hpp"
#include "tools/ctl_location.hpp"
#include "tools/process.hpp"
#include "tools/text.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

struct ClusterSpec {
  std::string region;
  int nodes = 0;
  double weight = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClusterSpec, region, nodes, weight)
struct ClusterStatus {
  int ready_nodes = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClusterStatus, ready_nodes)

struct Probe {
  std::string endpoint;
  int latency_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Probe, endpoint, latency_ms)

const GroupKind cluster_kind{"kstack.sh", "Cluster"};
const GroupKind other_widget_kind{"example.org", "Widget"};
using Clusters = Client<ClusterSpec, ClusterStatus>;

/// The table row whose first field is `first`; empty when there is none.
std::vector<std::string> row(const std::string& table, const std::string& first) {
  for (auto& l : lines(table)) {
    auto f = fields(l);
    if (!f.empty() && f[0] == first) return f;
  }
  return {};
}

/// The first `n` fields of a line (a watch row's EVENT ID SLUG GENERATION).
std::vector<std::string> first_fields(const std::string& line, std::size_t n) {
  auto f = fields(line);
  if (f.size() > n) f.resize(n);
  return f;
}

/// Where each whitespace-separated field of `line` starts.
std::vector<std::size_t> field_starts(const std::string& line) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < line.size(); ++i)
    if (line[i] != ' ' && (i == 0 || line[i - 1] == ' ')) out.push_back(i);
  return out;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A database with two kinds in different groups (and a third kind sharing a name with
/// one of them), an owner, a dependency, finalizers, conditions, events and a
/// deletion-pending object. Times come from a manual clock set an hour back, so ages
/// and the event timeline are known.
class CtlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    open();
    populate();
  }
  void TearDown() override { close(); }

  void open() {
    close();
    store_ = open_test_store(db_path());
    bh_ = std::make_unique<Beehive>(store_, with_clock(clock_));
    auto noop = [](auto&, auto&, auto&) { return Result{}; };
    clusters_cc_.emplace(register_controller<ClusterSpec, ClusterStatus>(*bh_, cluster_kind, noop));
    widgets_cc_.emplace(register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind, noop));
  }
  void start() { stop_ = bh_->start(ctx_); }
  void close() {
    if (stop_) stop_(Context{}.with_timeout(10s));
    stop_ = nullptr;
    clusters_cc_.reset();
    widgets_cc_.reset();
    bh_.reset();
    store_.reset();
  }

  void populate() {
    Clusters clusters(*bh_, cluster_kind);
    Widgets widgets(*bh_, widget_kind);
    Widgets other(*bh_, other_widget_kind);
    auto& ccc = *clusters_cc_;

    prod_ = clusters.create(ctx_, {"eu-west", 3, 0.25}, with_slug("prod")).id;
    ccc.update_status(ctx_, prod_, 1, {3});
    ccc.set_condition(ctx_, prod_, {"Ready", ConditionStatus::True, "Ok", "all nodes ready"});
    auto emit = [&](const std::string& cat, EventType t, const std::string& reason,
                    const std::string& msg = "", Json detail = nullptr) {
      ccc.record_event(ctx_, prod_, EventSpec{cat, t, reason, msg, std::move(detail)});
    };
    for (int i = 0; i < 7; ++i, clock_->advance(10s))
      emit("connection", EventType::Normal, "Connected");
    for (int i = 0; i < 18; ++i, clock_->advance(10s))
      emit("connection", EventType::Warning, "ProbeFailed", "i/o timeout " + std::to_string(i),
           Probe{"10.0.0.1:443", 5000 + i});
    for (int i = 0; i < 4; ++i, clock_->advance(10s))
      emit("connection", EventType::Normal, "Connected");
    emit("sync", EventType::Normal, "Synced", "config applied");

    staging_ = clusters
                   .create(ctx_, {"us-east", 1, 1.5}, with_slug("staging"),
                           with_finalizers({"kstack.sh/cleanup"}))
                   .id;
    clusters.remove(ctx_, staging_);  // pending: the finalizer holds it

    db_ = widgets.create(ctx_, {"blue", 1}, with_slug("db")).id;
    web_ = widgets.create(ctx_, {"red", 2}, with_slug("web"), with_owner(prod_)).id;
    widgets_cc_->add_dependency(ctx_, web_, db_);
    widgets_cc_->set_condition(ctx_, web_,
                               {"Ready", ConditionStatus::False, "Waiting", "waiting for db"});
    other_web_ = other.create(ctx_, {"green", 9}, with_slug("web")).id;
  }

  std::filesystem::path db_path() const { return dir_.file("app.db"); }
  std::vector<std::string> args(std::vector<std::string> rest) const {
    return ctl_command(BEEHIVE_CTL, db_path(), std::move(rest));
  }
  RunResult ctl(std::vector<std::string> rest) { return run(args(std::move(rest))); }

  TempDir dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(
      Time(std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now() - 1h)));
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  std::optional<ControllerClient<ClusterStatus>> clusters_cc_;
  std::optional<ControllerClient<WidgetStatus>> widgets_cc_;
  Stop stop_;
  Context ctx_;
  ObjectID prod_ = 0, staging_ = 0, db_ = 0, web_ = 0, other_web_ = 0;
};

#define EXPECT_OK(r) EXPECT_EQ((r).status, 0) << (r).err

TEST_F(CtlTest, KindsCountsObjectsUnsettledAndDeleting) {
  auto r = ctl({"kinds"});
  EXPECT_OK(r);
  EXPECT_EQ(fields(lines(r.out).at(0)),
            (std::vector<std::string>{"KIND", "GROUP", "OBJECTS", "UNSETTLED", "DELETING"}));
  // prod is settled; staging is being deleted; no widget has reported a status.
  auto has = [&](std::vector<std::string> want) {
    for (auto& l : lines(r.out))
      if (fields(l) == want) return true;
    return false;
  };
  EXPECT_TRUE(has({"Cluster", "kstack.sh", "2", "1", "1"})) << r.out;
  EXPECT_TRUE(has({"Widget", "acme.com", "2", "2", "0"})) << r.out;
  EXPECT_TRUE(has({"Widget", "example.org", "1", "1", "0"})) << r.out;

  auto j = ctl({"kinds", "-o", "json"});
  EXPECT_OK(j);
  auto kinds = Json::parse(j.out);
  ASSERT_EQ(kinds.size(), 3u);
  EXPECT_EQ(kinds[0], (Json{{"group", "acme.com"},
                            {"kind", "Widget"},
                            {"objects", 2},
                            {"deleting", 0},
                            {"unsettled", 2}}));
}

TEST_F(CtlTest, GetPrintsATableOfTheKind) {
  auto r = ctl({"get", "cluster"});  // case-insensitive, the group found for us
  EXPECT_OK(r);
  EXPECT_EQ(fields(lines(r.out).at(0)),
            (std::vector<std::string>{"ID", "SLUG", "GENERATION", "OBSERVED", "READY", "CONDITIONS",
                                      "AGE", "DELETING", "LABELS"}));
  ASSERT_EQ(lines(r.out).size(), 3u) << r.out;
  auto prod = row(r.out, std::to_string(prod_));
  ASSERT_EQ(prod.size(), 9u) << r.out;
  EXPECT_EQ(prod[1], "prod");
  EXPECT_EQ(prod[2], "1");
  EXPECT_EQ(prod[3], "1");
  EXPECT_EQ(prod[4], "True");
  EXPECT_EQ(prod[5], "1/1");
  EXPECT_TRUE(prod[6] == "60m" || prod[6] == "59m" || prod[6] == "61m") << prod[6];
  EXPECT_EQ(prod[7], "-");
  auto staging = row(r.out, std::to_string(staging_));
  ASSERT_EQ(staging.size(), 9u) << r.out;
  EXPECT_EQ(staging[3], "-");  // never observed
  EXPECT_EQ(staging[4], "-");  // no Ready condition
  EXPECT_NE(staging[7], "-");  // deletion requested, some minutes ago
  EXPECT_TRUE(std::regex_match(staging[7], std::regex("[0-9]+[sm]"))) << staging[7];
  EXPECT_EQ(staging[8], "<none>");  // no labels
}

TEST_F(CtlTest, GetBySlugAndByIdPrintTheSameRow) {
  auto by_slug = ctl({"get", "Widget.acme.com", "web"});
  auto by_id = ctl({"get", "widget.ACME.com", std::to_string(web_)});
  EXPECT_OK(by_slug);
  EXPECT_OK(by_id);
  EXPECT_EQ(by_slug.out, by_id.out);
  ASSERT_EQ(lines(by_slug.out).size(), 2u) << by_slug.out;
  EXPECT_EQ(row(by_slug.out, std::to_string(web_)).at(4), "False");
  // The other group's "web" is a different object.
  auto other = ctl({"get", "Widget.example.org", "web"});
  EXPECT_OK(other);
  EXPECT_FALSE(row(other.out, std::to_string(other_web_)).empty()) << other.out;
}

// Output that cannot be written (a full disk) fails the command: a script must not take
// a cut-off listing for the whole.
TEST_F(CtlTest, OutputThatCannotBeWrittenFailsTheCommand) {
  std::vector<std::string> to_full{"/bin/sh", "-c", "exec \"$0\" \"$@\" > /dev/full"};
  for (auto& a : args({"get", "cluster", "-o", "json"})) to_full.push_back(a);
  auto r = run(to_full);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot write the output"), std::string::npos) << r.err;
  // A watch, too, ends at once rather than polling on for its --for.
  std::vector<std::string> watch_to_full{"/bin/sh", "-c", "exec \"$0\" \"$@\" > /dev/full"};
  for (auto& a : args({"watch", "cluster", "--for", "10m"})) watch_to_full.push_back(a);
  auto w = run(watch_to_full, 20s);
  EXPECT_EQ(w.status, 1);
  EXPECT_NE(w.err.find("cannot write the output"), std::string::npos) << w.err;
}

TEST_F(CtlTest, GetJsonCarriesTheObjectVerbatim) {
  auto r = ctl({"get", "Cluster.kstack.sh", "prod", "-o", "json"});
  EXPECT_OK(r);
  auto j = Json::parse(r.out);
  EXPECT_EQ(j["id"], prod_);
  EXPECT_EQ(j["group"], "kstack.sh");
  EXPECT_EQ(j["kind"], "Cluster");
  EXPECT_EQ(j["slug"], "prod");
  EXPECT_EQ(j["spec"], Json(ClusterSpec{"eu-west", 3, 0.25}));
  EXPECT_EQ(j["status"], Json(ClusterStatus{3}));
  EXPECT_EQ(j["generation"], 1);
  EXPECT_EQ(j["observed_generation"], 1);
  EXPECT_TRUE(j["deletion_requested_at"].is_null());
  EXPECT_EQ(j["finalizers"], Json::array());
  ASSERT_EQ(j["conditions"].size(), 1u);
  EXPECT_EQ(j["conditions"][0]["type"], "Ready");
  EXPECT_EQ(j["conditions"][0]["status"], "True");
  EXPECT_EQ(j["conditions"][0]["reason"], "Ok");
  EXPECT_EQ(j["conditions"][0]["message"], "all nodes ready");
  EXPECT_TRUE(j["owner"].is_null());
  ASSERT_EQ(j["dependents"].size(), 0u);
  ASSERT_EQ(j["owned"].size(), 1u);  // as describe lists it
  EXPECT_EQ(j["owned"][0]["id"], web_);
  // Stored times, to the millisecond, in UTC.
  EXPECT_TRUE(std::regex_match(j["created_at"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << j["created_at"];

  auto web = Json::parse(ctl({"get", "Widget.acme.com", "web", "-o", "json"}).out);
  EXPECT_EQ(web["spec"], Json(WidgetSpec{"red", 2}));
  EXPECT_TRUE(web["status"].is_null());
  EXPECT_EQ(web["owner"]["id"], prod_);
  EXPECT_EQ(web["owner"]["kind"], "Cluster");
  ASSERT_EQ(web["dependencies"].size(), 1u);
  EXPECT_EQ(web["dependencies"][0]["id"], db_);

  auto all = ctl({"get", "cluster", "-o", "json"});
  EXPECT_OK(all);
  auto list = Json::parse(all.out);
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1]["id"], staging_);
  EXPECT_FALSE(list[1]["deletion_requested_at"].is_null());
  EXPECT_EQ(list[1]["finalizers"], Json::array({"kstack.sh/cleanup"}));
  EXPECT_EQ(list[1]["spec"]["weight"], 1.5);
  // The largest --limit there is: every object, no continue token.
  auto most = ctl({"get", "cluster", "-o", "json", "--limit", "9223372036854775807"});
  EXPECT_OK(most);
  EXPECT_EQ(Json::parse(most.out).size(), 2u);
  EXPECT_TRUE(most.err.empty()) << most.err;
}

TEST_F(CtlTest, KindAndObjectErrors) {
  auto ambiguous = ctl({"get", "widget"});
  EXPECT_EQ(ambiguous.status, 1);
  EXPECT_NE(ambiguous.err.find("ambiguous"), std::string::npos) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find("Widget.acme.com"), std::string::npos) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find("Widget.example.org"), std::string::npos) << ambiguous.err;
  EXPECT_TRUE(ambiguous.out.empty());

  auto unknown = ctl({"get", "Gizmo"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("no objects of kind \"Gizmo\""), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("Cluster.kstack.sh"), std::string::npos) << unknown.err;

  auto missing = ctl({"describe", "Cluster", "nope"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("\"nope\" not found"), std::string::npos) << missing.err;
  // An id of another kind is not this kind's object.
  EXPECT_EQ(ctl({"get", "Cluster", std::to_string(web_)}).status, 1);
  EXPECT_EQ(ctl({"events", "999999"}).status, 1);

  auto no_store = run(ctl_command(BEEHIVE_CTL, dir_.file("absent.db"), {"kinds"}));
  EXPECT_EQ(no_store.status, 1);
  EXPECT_NE(no_store.err.find(no_store_message()), std::string::npos) << no_store.err;
  EXPECT_FALSE(store_exists(dir_.file("absent.db")));  // not created
}

TEST_F(CtlTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run({BEEHIVE_CTL}).status, 2);
  EXPECT_EQ(run({BEEHIVE_CTL, "kinds"}).status, 2);  // no --db (nor --pg)
  auto both = run({BEEHIVE_CTL, "--db", db_path().string(), "--pg", "dbname=app", "kinds"});
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.err.find("give one"), std::string::npos) << both.err;
  // A connection string libpq cannot parse is the command line's fault, whatever server
  // it meant: nothing is connected to.
  for (const char* typo : {"host=/nonexistent port", "postgresql://[::1", "hots=/tmp"}) {
    auto r = run({BEEHIVE_CTL, "--pg", typo, "kinds"});
    EXPECT_EQ(r.status, 2) << typo;
    EXPECT_NE(r.err.find("--pg: malformed connection string"), std::string::npos) << r.err;
  }
  // libpq's multi-line explanations keep their layout: a tab, not an escape of one.
  auto unreachable = run({BEEHIVE_CTL, "--pg", "host=/nonexistent port=1", "kinds"});
  EXPECT_NE(unreachable.status, 0);
  EXPECT_NE(unreachable.err.find("\n\tIs the server running"), std::string::npos)
      << unreachable.err;
  EXPECT_EQ(ctl({"frobnicate"}).status, 2);
  EXPECT_EQ(ctl({"get"}).status, 2);
  EXPECT_EQ(ctl({"get", "Cluster", "-o", "yaml"}).status, 2);
  EXPECT_EQ(ctl({"describe", "Cluster"}).status, 2);
  EXPECT_EQ(ctl({"events", "abc"}).status, 2);
  auto bad = ctl({"watch", "Cluster", "--interval", "5"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("duration"), std::string::npos) << bad.err;
  // Durations whose milliseconds would not fit in 64 bits, just past the edge of each
  // unit (they wrapped to a negative wait before).
  for (auto* d : {"2562047788016h", "153722867280913m", "9223372036854776s",
                  "9223372036854775808ms", "99999999999999999999s"}) {
    auto huge = ctl({"watch", "Cluster", "--for", d});
    EXPECT_EQ(huge.status, 2) << d;
    EXPECT_NE(huge.err.find("duration too long"), std::string::npos) << d << ": " << huge.err;
  }
  auto help = ctl({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("describe"), std::string::npos);
  // --db (--pg, --schema) may also come after the command.
  std::vector<std::string> after{BEEHIVE_CTL, "kinds"};
  for (auto& a : ctl_location(db_path())) after.push_back(a);
  EXPECT_OK(run(after));
}

TEST_F(CtlTest, DescribeShowsEverySection) {
  auto r = ctl({"describe", "Widget.acme.com", "web"});
  EXPECT_OK(r);
  auto& o = r.out;
  auto has = [&](const std::string& s) { return o.find(s) != std::string::npos; };
  EXPECT_TRUE(has("Name:                Widget.acme.com/" + std::to_string(web_) + " (web)")) << o;
  EXPECT_TRUE(has("Owner:               Cluster.kstack.sh/" + std::to_string(prod_) + " (prod)"))
      << o;
  EXPECT_TRUE(has("Finalizers:          -")) << o;
  EXPECT_TRUE(has("Labels:              -")) << o;
  EXPECT_TRUE(has("Deletion requested:  -")) << o;
  EXPECT_TRUE(has("Spec (schema version 0):\n  {\n    \"color\": \"red\",\n    \"size\": 2\n  }"))
      << o;
  EXPECT_TRUE(has("Status: -")) << o;
  EXPECT_TRUE(std::regex_search(
      o, std::regex(R"(\n  Ready=False +Waiting +\d+m ago +- +waiting for db\n)")))
      << o;
  EXPECT_TRUE(has("Dependencies:\n  Widget.acme.com/" + std::to_string(db_) + " (db)\n")) << o;
  EXPECT_TRUE(has("Dependents: -")) << o;
  EXPECT_TRUE(has("Events (newest first, up to 20): -")) << o;

  auto dbr = ctl({"describe", "Widget.acme.com", std::to_string(db_)});
  EXPECT_OK(dbr);
  EXPECT_NE(dbr.out.find("Dependents:\n  Widget.acme.com/" + std::to_string(web_) + " (web)\n"),
            std::string::npos)
      << dbr.out;

  auto staging = ctl({"describe", "cluster", "staging"});
  EXPECT_OK(staging);
  EXPECT_NE(staging.out.find("Finalizers:          kstack.sh/cleanup"), std::string::npos);
  EXPECT_TRUE(
      std::regex_search(staging.out, std::regex(R"(Deletion requested:  \d{4}-.*Z \(\d+m ago\))")))
      << staging.out;
}

TEST_F(CtlTest, DescribeShowsTheEventTimeline) {
  auto r = ctl({"describe", "Cluster", "prod"});
  EXPECT_OK(r);
  auto& o = r.out;
  EXPECT_NE(o.find("Status (schema version 0):\n  {\n    \"ready_nodes\": 3\n  }"),
            std::string::npos)
      << o;
  EXPECT_NE(o.find("Owned:\n  Widget.acme.com/" + std::to_string(web_) + " (web)\n"),
            std::string::npos)
      << o;
  auto events = o.substr(o.find("Events (newest first"));
  auto rows = lines(events);
  ASSERT_EQ(rows.size(), 6u) << events;  // heading, table header, four runs
  EXPECT_EQ(fields(rows[1]), (std::vector<std::string>{"LAST", "CATEGORY", "TYPE", "REASON",
                                                       "COUNT", "FIRST..LAST", "MESSAGE"}));
  // Newest first, one run per row, the latest message sampled.
  EXPECT_TRUE(
      std::regex_search(rows[2], std::regex(R"(sync +✓ Normal +Synced +x1 .*"config applied")")))
      << rows[2];
  EXPECT_TRUE(std::regex_search(rows[3], std::regex(R"(connection +✓ Normal +Connected +x4 )")))
      << rows[3];
  EXPECT_TRUE(std::regex_search(
      rows[4],
      std::regex(
          // Times of another day than today carry their date.
          R"(^  (?:\d{4}-\d\d-\d\d )?(\d\d:\d\d:\d\d) +connection +✗ Warning +ProbeFailed +x18 +)"
          R"((?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\.\1 +"i/o timeout 17"$)")))
      << rows[4];
  EXPECT_TRUE(std::regex_search(rows[5], std::regex(R"(Connected +x7 )"))) << rows[5];
}

TEST_F(CtlTest, EventsNewestFirstByCategory) {
  auto r = ctl({"events", std::to_string(prod_), "--category", "connection"});
  EXPECT_OK(r);
  auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_NE(rows[1].find("Connected"), std::string::npos);
  EXPECT_NE(rows[1].find("x4"), std::string::npos);
  EXPECT_NE(rows[2].find("ProbeFailed"), std::string::npos);
  EXPECT_NE(rows[2].find("x18"), std::string::npos);
  EXPECT_NE(rows[3].find("x7"), std::string::npos);
  EXPECT_EQ(r.out.find("Synced"), std::string::npos);

  auto all = ctl({"events", std::to_string(prod_)});
  EXPECT_OK(all);
  ASSERT_EQ(lines(all.out).size(), 5u) << all.out;
  EXPECT_NE(lines(all.out)[1].find("Synced"), std::string::npos);
  EXPECT_EQ(lines(ctl({"events", std::to_string(prod_), "--limit", "2"}).out).size(), 3u);

  auto j = ctl({"events", std::to_string(prod_), "--category", "connection", "-o", "json"});
  EXPECT_OK(j);
  auto runs = Json::parse(j.out);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1]["reason"], "ProbeFailed");
  EXPECT_EQ(runs[1]["type"], "Warning");
  EXPECT_EQ(runs[1]["count"], 18);
  EXPECT_EQ(runs[1]["message"], "i/o timeout 17");
  EXPECT_EQ(runs[1]["detail"], Json(Probe{"10.0.0.1:443", 5017}));
  EXPECT_TRUE(runs[0]["detail"].is_null());
  // 18 occurrences 10 s apart: the run spans 170 s.
  EXPECT_EQ(runs[1]["object_id"], prod_);
  EXPECT_TRUE(ctl({"events", std::to_string(web_)}).out.find("REASON") != std::string::npos);
}

TEST_F(CtlTest, EventsNamesTheObjectByKindAndSlugOrId) {
  auto by_id = ctl({"events", std::to_string(prod_)});  // the original form
  EXPECT_OK(by_id);
  ASSERT_EQ(lines(by_id.out).size(), 5u) << by_id.out;
  for (std::vector<std::string> cmd : {std::vector<std::string>{"events", "cluster", "prod"},
                                       {"events", "Cluster.kstack.sh", std::to_string(prod_)},
                                       {"events", "clusters", "prod"}}) {
    auto r = ctl(cmd);
    EXPECT_OK(r);
    EXPECT_EQ(r.out, by_id.out) << cmd[1] << ' ' << cmd[2];
  }
  auto j = ctl({"events", "cluster", "prod", "--category", "sync", "-o", "json"});
  EXPECT_OK(j);
  auto runs = Json::parse(j.out);
  ASSERT_EQ(runs.size(), 1u) << j.out;
  EXPECT_EQ(runs[0]["reason"], "Synced");
  // A slug is looked up in the named kind and group only.
  EXPECT_OK(ctl({"events", "Widget.example.org", "web"}));
  auto ambiguous = ctl({"events", "widget", "web"});
  EXPECT_EQ(ambiguous.status, 1);
  EXPECT_NE(ambiguous.err.find("ambiguous"), std::string::npos) << ambiguous.err;

  auto missing = ctl({"events", "cluster", "nope"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("\"nope\" not found"), std::string::npos) << missing.err;
  EXPECT_EQ(ctl({"events", "cluster", std::to_string(web_)}).status, 1);  // another kind's id
  // A lone id is an id: --by slug cannot read it as a slug without its kind.
  auto lone_id = ctl({"events", std::to_string(prod_), "--by", "slug"});
  EXPECT_EQ(lone_id.status, 2);
  EXPECT_NE(lone_id.err.find("with --by slug, give KIND SLUG"), std::string::npos) << lone_id.err;
  EXPECT_OK(ctl({"events", std::to_string(prod_), "--by", "id"}));
  // A lone slug names no object: a usage error, with what to write instead.
  auto lone = ctl({"events", "prod"});
  EXPECT_EQ(lone.status, 2);
  EXPECT_NE(lone.err.find("KIND SLUG|ID"), std::string::npos) << lone.err;
  EXPECT_TRUE(lone.out.empty());
}

TEST_F(CtlTest, DescribeNamesTheObjectBySlugOrIdAndTheKindByPlural) {
  auto by_slug = ctl({"describe", "clusters", "prod"});
  EXPECT_OK(by_slug);
  auto by_id = ctl({"describe", "CLUSTERS.kstack.sh", std::to_string(prod_)});
  EXPECT_OK(by_id);
  auto name = "Name:                Cluster.kstack.sh/" + std::to_string(prod_) + " (prod)";
  EXPECT_NE(by_slug.out.find(name), std::string::npos) << by_slug.out;
  EXPECT_NE(by_id.out.find(name), std::string::npos) << by_id.out;
  auto missing = ctl({"describe", "clusters", std::to_string(web_)});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;
}

TEST_F(CtlTest, KindsMatchByPluralCaseAndGroup) {
  for (auto kind : {"Policy", "Box", "Gateway", "Match"})
    Widgets(*bh_, GroupKind{"acme.com", kind}).create(ctx_, {"x", 1}, with_slug("one"));
  auto core_box = Widgets(*bh_, GroupKind{"", "Box"}).create(ctx_, {"y", 1}, with_slug("one")).id;

  // Each spelling names exactly its kind: the JSON says which.
  auto kind_of = [&](const std::string& text) -> std::string {
    auto r = ctl({"get", text, "one", "-o", "json"});
    if (r.status != 0) return "status " + std::to_string(r.status) + ": " + r.err;
    auto j = Json::parse(r.out);
    return j["kind"].get<std::string>() + "." + j["group"].get<std::string>();
  };
  EXPECT_EQ(kind_of("policies"), "Policy.acme.com");         // consonant + y
  EXPECT_EQ(kind_of("POLICY"), "Policy.acme.com");           // the kind, any case
  EXPECT_EQ(kind_of("gateways"), "Gateway.acme.com");        // vowel + y
  EXPECT_EQ(kind_of("matches.acme.com"), "Match.acme.com");  // +es after ch
  EXPECT_EQ(kind_of("boxes.ACME.com"), "Box.acme.com");      // +es after x, plural.group
  EXPECT_EQ(kind_of("Boxes."), "Box.");                      // the core group
  EXPECT_EQ(kind_of("box."), "Box.");
  EXPECT_OK(ctl({"get", "widgets.acme.com"}));
  EXPECT_OK(ctl({"get", "Clusters"}));
  auto core = ctl({"get", "boxes.", std::to_string(core_box)});
  EXPECT_OK(core);
  EXPECT_FALSE(row(core.out, std::to_string(core_box)).empty()) << core.out;

  // A plural in two groups is as ambiguous as the kind.
  for (auto text : {"boxes", "widgets"}) {
    auto r = ctl({"get", text});
    EXPECT_EQ(r.status, 1) << text;
    EXPECT_NE(r.err.find("ambiguous"), std::string::npos) << r.err;
  }
  EXPECT_NE(ctl({"get", "boxes"}).err.find("Box.acme.com"), std::string::npos);
  // Each name the refusal offers selects its kind: the core group's with its dot.
  auto box = ctl({"get", "box"}).err;
  EXPECT_NE(box.find("name the group: Box., Box.acme.com"), std::string::npos) << box;
  EXPECT_EQ(kind_of("Box."), "Box.");
  // Plurals the rules do not make are not guessed at.
  for (auto text : {"policys", "boxs", "matchs", "widgetss", "cluster.kstack"}) {
    auto r = ctl({"get", text});
    EXPECT_EQ(r.status, 1) << text;
    EXPECT_NE(r.err.find("kinds present: "), std::string::npos) << r.err;
  }
}

TEST_F(CtlTest, WatchPrintsAlignedRows) {
  Widgets widgets(*bh_, widget_kind);
  Process watch(args({"watch", "widgets.acme.com", "--interval", "20ms", "--max-changes", "3"}));
  auto header = watch.read_line();
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(fields(*header),
            (std::vector<std::string>{"EVENT", "ID", "SLUG", "GENERATION", "OBSERVED", "READY",
                                      "DELETING", "RESOURCE-VERSION"}));
  widgets.update(ctx_, web_, {"green", 3});
  std::string long_slug(40, 'x');
  auto long_id = widgets.create(ctx_, {"white", 1}, with_slug(long_slug)).id;
  widgets.remove(ctx_, db_);  // no finalizers, not running: pending until collected
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  auto out = lines(r.out);
  ASSERT_EQ(out.size(), 6u) << r.out;  // header, two existing objects, three changes
  auto columns = field_starts(out[0]);

  std::map<std::string, std::vector<std::string>> by_slug;
  for (std::size_t i = 1; i < out.size(); ++i) {
    auto f = fields(out[i]);
    ASSERT_EQ(f.size(), 8u) << out[i];
    if (f[2] != long_slug) {
      // Values that fit their columns start where the header's names do.
      EXPECT_EQ(field_starts(out[i]), columns) << r.out;
    }
    by_slug[f[0] + " " + f[2]] = f;
  }
  auto web0 = by_slug["EXISTING web"], web1 = by_slug["MODIFIED web"];
  ASSERT_FALSE(web1.empty()) << r.out;
  EXPECT_EQ(web1[1], std::to_string(web_));
  EXPECT_EQ(web1[3], "2");
  EXPECT_EQ(web1[5], "False");                             // READY
  EXPECT_GT(std::stoll(web1[7]), std::stoll(web0.at(7)));  // the resource version moved
  auto gone = by_slug["MODIFIED db"];
  ASSERT_FALSE(gone.empty()) << r.out;
  EXPECT_NE(gone[6], "-");  // deletion requested
  // A longer value is printed whole; the row moves right rather than truncating it.
  auto added = by_slug["ADDED " + long_slug];
  ASSERT_FALSE(added.empty()) << r.out;
  EXPECT_EQ(added[1], std::to_string(long_id));
  EXPECT_EQ(added[3], "1");
}

TEST_F(CtlTest, ExitStatusOnEveryPath) {
  // 1: the kind is absent, named with the kinds present, whatever the command.
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "Gizmo"},
                                       {"describe", "Gizmo", "x"},
                                       {"events", "Gizmo", "x"},
                                       {"watch", "Gizmo", "--for", "1s"},
                                       {"watch", "widget", "--for", "1s"}}) {
    auto r = ctl(cmd);
    EXPECT_EQ(r.status, 1) << cmd[0] << ' ' << cmd[1] << ": " << r.err;
    EXPECT_NE(r.err.find(cmd[1] == "widget" ? "ambiguous" : "kinds present: "), std::string::npos)
        << r.err;
    // The kinds present, or the candidates.
    EXPECT_NE(r.err.find(cmd[1] == "widget" ? "Widget.example.org" : "Cluster.kstack.sh"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // 1: the object is absent.
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "cluster", "nope"},
                                       {"describe", "cluster", "nope"},
                                       {"events", "cluster", "nope"},
                                       {"events", "999999"}}) {
    auto r = ctl(cmd);
    EXPECT_EQ(r.status, 1) << cmd[0] << ": " << r.err;
    EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  }
  // 1: the file (the schema) is not a beehive database.
  if (test_backend_is_postgres()) {
    auto in_schema = [](const std::string& schema) {
      return run(
          {BEEHIVE_CTL, "--pg", std::getenv("BEEHIVE_TEST_PG"), "--schema", schema, "kinds"});
    };
    auto r = in_schema("public");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("no beehive store in schema \"public\""), std::string::npos) << r.err;
    // 2: a schema name the server would misread (cut to 63 bytes, it would name another),
    // told before connecting.
    for (std::string bad : {std::string(64, 's'), std::string(), std::string("pg_catalog")}) {
      r = in_schema(bad);
      EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
      EXPECT_NE(r.err.find("--schema: "), std::string::npos) << r.err;
    }
  } else {
    std::ofstream(dir_.file("notes.txt")) << "not a database\n";
    EXPECT_EQ(run({BEEHIVE_CTL, "--db", dir_.file("notes.txt").string(), "kinds"}).status, 1);
  }
  // 2: the command line is wrong, told before the file is looked at.
  auto absent = dir_.file("absent.db");
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "cluster", "--bogus"},
                                       {"describe", "cluster", "prod", "extra"},
                                       {"describe", "cluster", "prod", "--events", "-1"},
                                       {"events"},
                                       {"events", "prod"},
                                       {"events", "cluster", "prod", "--limit", "many"},
                                       {"get", ".acme.com"},
                                       {"events", ".acme.com", "prod"},
                                       {"watch", ".acme.com"},
                                       {"watch", "cluster", "--max-changes", "0"},
                                       {"watch", "cluster", "--interval", "0ms"},
                                       {"watch", "cluster", "--interval", "5"},
                                       {"watch", "cluster", "--for", "soon"},
                                       {"watch", "cluster", "--for", ""},  // not "forever"
                                       {"--busy-timeout", "5", "kinds"},
                                       {"--busy-timeout", "2147483648ms", "kinds"},
                                       {"get", "cluster", "--limit", "0"},
                                       {"get", "cluster", "--limit", "99999999999999999999"},
                                       {"events", "cluster", "prod", "--limit", "3000000000"},
                                       {"events", "cluster", "prod", "--limit", "0"},
                                       {"get", "cluster", "-o", "1"},
                                       {"--by", "0", "get", "cluster"},
                                       {"watch", "cluster", "--resume-from", "1e3"},
                                       {"kinds", "-o", "yaml"},
                                       {"get", "cluster", "-l", "a in ("},
                                       {"get", "cluster", "--continue", "bogus"},
                                       {"get", "cluster", "--owner", "noslash"},
                                       {"get", "cluster", "prod", "--limit", "1"},
                                       {"label", "cluster", "prod", "nochange"},
                                       {"label", "cluster", "prod", "Bad Key=v"},
                                       {"delete", "cluster"},
                                       {"requeue", ".acme.com", "prod"},
                                       {"apply"}}) {
    auto r = ctl(cmd);
    EXPECT_EQ(r.status, 2) << cmd[0] << ' ' << cmd.back() << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(run(ctl_command(BEEHIVE_CTL, absent, cmd)).status, 2)
        << cmd[0] << ' ' << cmd.back() << " on a missing store";
  }
  EXPECT_FALSE(store_exists(absent));
  // A schema beside a SQLite file is a mistake, not a no-op.
  if (!test_backend_is_postgres()) {
    auto schema = ctl({"--schema", "orders", "kinds"});
    EXPECT_EQ(schema.status, 2);
    EXPECT_NE(schema.err.find("--schema names a PostgreSQL schema"), std::string::npos)
        << schema.err;
  }
  // A misspelled command is named as such.
  auto misspelled = ctl({"gett", "cluster"});
  EXPECT_EQ(misspelled.status, 2);
  EXPECT_NE(misspelled.err.find("unknown command \"gett\""), std::string::npos) << misspelled.err;
  auto version = run({BEEHIVE_CTL, "--version"});
  EXPECT_EQ(version.status, 0);
  EXPECT_NE(version.out.find("schema versions: SQLite "), std::string::npos) << version.out;
  // A number out of an option's range says so, with the range; it is never stored
  // saturated (another number than the one typed).
  for (auto [arg, says] : {std::pair{"0", "--limit: 0 is out of range (1 to "},
                           std::pair{"99999999999999999999", "is out of range (1 to "},
                           std::pair{"2.5", "--limit: \"2.5\" is not a whole number"}}) {
    auto err = ctl({"get", "cluster", "--limit", arg}).err;
    EXPECT_NE(err.find(says), std::string::npos) << err;
  }
}

TEST_F(CtlTest, WatchSeesChangesMadeWhileItRuns) {
  Widgets widgets(*bh_, widget_kind);
  Process watch(args({"watch", "Widget.acme.com", "--interval", "20ms", "--max-changes", "2"}));
  // The table is printed from the snapshot the watch compares against: every write
  // after its header is a change.
  auto header = watch.read_line();
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(fields(*header).at(0), "EVENT");
  widgets.update(ctx_, web_, {"green", 2});
  auto cache = widgets.create(ctx_, {"white", 1}, with_slug("cache"));
  // Another kind's change moves the store's version but prints nothing.
  Clusters(*bh_, cluster_kind).update(ctx_, prod_, {"eu-west", 4, 0.25});
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  auto out = lines(r.out);
  ASSERT_EQ(out.size(), 5u) << r.out;  // header, two rows, two changes
  EXPECT_EQ(fields(out[1]).at(0), "EXISTING") << r.out;
  std::vector<std::vector<std::string>> changes{first_fields(out[3], 4), first_fields(out[4], 4)};
  EXPECT_NE(std::find(changes.begin(), changes.end(),
                      std::vector<std::string>{"MODIFIED", std::to_string(web_), "web", "2"}),
            changes.end())
      << r.out;
  EXPECT_NE(std::find(changes.begin(), changes.end(),
                      std::vector<std::string>{"ADDED", std::to_string(cache.id), "cache", "1"}),
            changes.end())
      << r.out;
}

// A watch follows which application runs: one that starts after the watch began has its
// liveness conditions read as written, as a `get` run then would, not as Unknown.
TEST_F(CtlTest, WatchReadsLivenessAsTheApplicationRunningNow) {
  Process watch(args({"watch", "Widget.acme.com", "--interval", "20ms", "--max-changes", "1"}));
  ASSERT_TRUE(watch.read_line().has_value());  // begun with no application running
  start();
  widgets_cc_->set_condition(ctx_, db_, {"Ready", ConditionStatus::True, "Probed", "", true});
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  auto out = lines(r.out);
  ASSERT_FALSE(out.empty()) << r.out;
  auto change = fields(out.back());
  ASSERT_GE(change.size(), 6u) << r.out;
  EXPECT_EQ(change.at(1), std::to_string(db_)) << r.out;
  EXPECT_EQ(change.at(5), "True") << r.out;  // READY
}

TEST_F(CtlTest, WatchAKindBeforeItsFirstObject) {
  // With its group named, a kind without objects yet can be watched for its first one.
  Process watch(args({"watch", "Gadget.acme.com", "--interval", "20ms", "--max-changes", "1"}));
  ASSERT_TRUE(watch.read_line().has_value());
  auto g = Widgets(*bh_, gadget_kind).create(ctx_, {"tiny", 1});
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(first_fields(lines(r.out).back(), 4),
            (std::vector<std::string>{"ADDED", std::to_string(g.id), "<none>", "1"}))
      << r.out;
  // Without the group it cannot be told from a typo.
  EXPECT_EQ(ctl({"watch", "Gizmo", "--for", "1s"}).status, 1);
}

// Stored text is any text a program wrote: printed raw, an escape sequence in a slug, a
// condition or an event message would control the operator's terminal, and a newline
// would forge a row. The human output escapes control characters (C0, DEL, C1) and
// bidirectional overrides; JSON output escapes them with JSON's own escapes.
TEST_F(CtlTest, StoredTextCannotControlTheTerminal) {
  const std::string esc = "\x1b[31mred\x1b]0;title\x07",
                    c1 = "\xc2\x9b"
                         "2J",
                    rlo =
                        "\xe2\x80\xae"
                        "txt.exe";
  auto evil = Widgets(*bh_, widget_kind)
                  .create(ctx_, {"x\x7f", 1}, with_slug("s" + esc + "\nforged row\t" + c1 + rlo));
  widgets_cc_->set_condition(ctx_, evil.id,
                             {"Ready" + esc, ConditionStatus::False, "Why" + c1, "msg" + rlo});
  widgets_cc_->record_event(ctx_, evil.id,
                            EventSpec{"cat" + esc, EventType::Warning, "R" + c1, "m\n" + rlo});
  const auto id = std::to_string(evil.id);
  widgets_cc_->add_finalizer(ctx_, evil.id, "acme.com/hold");  // the delete below leaves it
  start();  // an application for the requeue to reach
  ASSERT_TRUE(eventually([&] { return bh_->is_leader(); }));
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "Widget.acme.com"},
                                       {"describe", "Widget.acme.com", id},
                                       {"events", "Widget.acme.com", id},
                                       {"watch", "Widget.acme.com", "--for", "1ms"},
                                       {"label", "Widget.acme.com", id, "a=b"},
                                       {"requeue", "Widget.acme.com", id},
                                       {"delete", "Widget.acme.com", id}}) {
    auto r = ctl(cmd);
    EXPECT_EQ(r.status, 0) << cmd[0] << ": " << r.err;
    auto out = r.out;
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << cmd[0] << ": " << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << cmd[0];
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << cmd[0];
    EXPECT_EQ(out.find("\xe2\x80\xae"), std::string::npos) << cmd[0];
    EXPECT_EQ(out.find("\nforged row"), std::string::npos) << cmd[0];
    if (cmd[0] != "events") {  // names the object
      EXPECT_NE(out.find("s\\x1b[31mred\\x1b]0;title\\x07\\nforged row\\t\\u009b2J\\u202etxt.exe"),
                std::string::npos)
          << cmd[0] << ": " << out;
    }
  }
  // JSON output: C0 controls as the encoder escapes them, and the C1 and bidirectional
  // controls that JSON allows raw escaped too; the value read back is the stored one.
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "Widget.acme.com", id},
                                       {"events", "Widget.acme.com", id},
                                       {"kinds"}}) {
    cmd.insert(cmd.end(), {"-o", "json"});
    auto r = ctl(cmd);
    EXPECT_EQ(r.status, 0) << cmd[0] << ": " << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << cmd[0] << ": " << r.out;
    EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << cmd[0] << ": " << r.out;
    EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << cmd[0] << ": " << r.out;
    auto j = Json::parse(r.out);
    EXPECT_EQ(r.out.find('\x7f'), std::string::npos) << cmd[0] << ": " << r.out;
    if (cmd[0] == "get") {
      EXPECT_EQ(j["slug"], "s" + esc + "\nforged row\t" + c1 + rlo);
      EXPECT_EQ(j["spec"]["color"], "x\x7f");  // DEL too, as JSON escapes it
    } else if (cmd[0] == "events") {
      EXPECT_EQ(j[0]["message"], "m\n" + rlo);
    }
  }
  // An error message naming stored text is escaped too (the kind names listed here).
  Widgets(*bh_, GroupKind{"acme.com", "Kind" + esc}).create(ctx_, {"x", 1});
  auto missing = ctl({"get", "nosuchkind"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.err.find('\x1b'), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("Kind\\x1b[31m"), std::string::npos) << missing.err;
}

// A --for of centuries waits like any other (it once overflowed the deadline, and the
// watch ended at once).
TEST_F(CtlTest, WatchForCenturiesWaitsForItsChange) {
  Process watch(args({"watch", "Gadget.acme.com", "--interval", "20ms", "--for", "99999999h",
                      "--max-changes", "1"}));
  ASSERT_TRUE(watch.read_line().has_value());
  auto g = Widgets(*bh_, gadget_kind).create(ctx_, {"tiny", 1});
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(first_fields(lines(r.out).back(), 2),
            (std::vector<std::string>{"ADDED", std::to_string(g.id)}))
      << r.out;
}

class CtlSignalTest : public CtlTest, public ::testing::WithParamInterface<int> {};

TEST_P(CtlSignalTest, WatchExitsCleanlyOnSignal) {
  Process watch(args({"watch", "cluster", "--interval", "10s"}));
  ASSERT_TRUE(watch.read_line().has_value());  // handlers are installed before output
  watch.signal(GetParam());
  auto started = std::chrono::steady_clock::now();
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  // The signal cuts the polling sleep short.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

INSTANTIATE_TEST_SUITE_P(Signals, CtlSignalTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) {
                           return info.param == SIGINT ? "SIGINT" : "SIGTERM";
                         });

// A stop signal while the watch's output is blocked (a paused pager, a pipe nobody reads
// yet) lets the blocked write finish: the watch ends after that row, with status 0.
TEST_F(CtlTest, AWatchStoppedWhileItsOutputIsBlockedEndsCleanly) {
  Widgets gadgets(*bh_, gadget_kind);
  const std::string pad(200, 'x');
  const int n = 400;  // rows of over 200 bytes: more than a pipe holds (64 KiB)
  for (int i = 0; i < n; ++i) gadgets.create(ctx_, {"tiny", 1}, with_slug(pad + std::to_string(i)));
  Process watch(args({"watch", "Gadget.acme.com", "--interval", "10s"}));
  ASSERT_TRUE(eventually([&] { return watch.blocked_on_full_stdout(); }));
  watch.signal(SIGINT);
  // Handled before the pipe is read: the write is interrupted, not just completed.
  ASSERT_TRUE(eventually([&] { return !watch.signal_pending(SIGINT); }));
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  auto out = lines(r.out);
  auto rows = std::count_if(out.begin(), out.end(), [&](const std::string& l) {
    return l.rfind("EXISTING", 0) == 0 && l.find(pad) != std::string::npos;
  });
  EXPECT_GT(rows, 100);  // what the pipe held
  EXPECT_LT(rows, n);    // and not the rest: it stopped after the row in progress
  // A reader that never reads again cannot hold the tool: a second signal ends it.
  Process stuck(args({"watch", "Gadget.acme.com", "--interval", "10s"}));
  ASSERT_TRUE(eventually([&] { return stuck.blocked_on_full_stdout(); }));
  stuck.signal(SIGINT);
  ASSERT_TRUE(eventually([&] { return !stuck.signal_pending(SIGINT); }));
  stuck.signal(SIGINT);  // fatal as it is sent: the reading below does not unblock it
  EXPECT_EQ(stuck.wait().status, 128 + SIGINT);
}

// A read blocked on its output (a pager that stopped reading) holds no snapshot of the
// database: the application's log can be checkpointed meanwhile.
TEST_F(CtlTest, AReadBlockedOnItsOutputHoldsNoSnapshot) {
  Widgets gadgets(*bh_, gadget_kind);
  const std::string pad(200, 'x');
  const int n = 400;  // over 64 KiB of output, more than a pipe holds
  for (int i = 0; i < n; ++i) gadgets.create(ctx_, {"tiny", 1}, with_slug(pad + std::to_string(i)));
  Process get(args({"get", "Gadget.acme.com", "-o", "json"}));
  ASSERT_TRUE(eventually([&] { return get.blocked_on_full_stdout(); }));
  gadgets.create(ctx_, {"tiny", 1}, with_slug("later"));  // written after the tool's read
  if (!test_backend_is_postgres()) {
    SQLite::Database db(db_path().string(), SQLite::OPEN_READWRITE);
    SQLite::Statement checkpoint(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    ASSERT_TRUE(checkpoint.executeStep());
    EXPECT_EQ(checkpoint.getColumn(0).getInt(), 0) << "a reader held the checkpoint back";
  }
  auto r = get.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).size(), static_cast<std::size_t>(n));
}

TEST_F(CtlTest, WatchForADuration) {
  auto started = std::chrono::steady_clock::now();
  auto r = ctl({"watch", "cluster", "--interval", "50ms", "--for", "300ms"});
  EXPECT_OK(r);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  EXPECT_EQ(lines(r.out).size(), 3u) << r.out;  // the table, no change
}

TEST_F(CtlTest, WorksBesideARunningBeehive) {
  start();
  Widgets widgets(*bh_, widget_kind);
  auto tmp = widgets.create(ctx_, {"grey", 1}, with_slug("tmp"));

  auto get = ctl({"get", "Widget.acme.com"});
  EXPECT_OK(get);
  EXPECT_FALSE(row(get.out, std::to_string(tmp.id)).empty()) << get.out;
  EXPECT_OK(ctl({"describe", "Cluster", "prod"}));

  Process watch(args({"watch", "Widget.acme.com", "--interval", "20ms"}));
  ASSERT_TRUE(watch.read_line().has_value());
  // The application keeps writing while the tool reads: the tool holds no lock.
  auto deadline = ctx_.with_timeout(5s);
  for (int i = 0; i < 20; ++i) widgets.update(deadline, db_, {"blue", 10 + i});
  widgets.remove(ctx_, tmp.id);  // collected by the running GC: the row vanishes
  bool deleted = false;
  while (auto line = watch.read_line())
    if (first_fields(*line, 4) ==
        std::vector<std::string>{"DELETED", std::to_string(tmp.id), "tmp", "1"}) {
      deleted = true;
      break;
    }
  EXPECT_TRUE(deleted);
  watch.signal(SIGINT);
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex("\\nMODIFIED +" + std::to_string(db_) + " +db +[0-9]+ ")))
      << r.out;
  EXPECT_EQ(widgets.get(ctx_, db_).spec.size, 29);
}

// An object created and removed above the version a watch reads from was never shown:
// no DELETED row for it, as the library's watches print none.
TEST_F(CtlTest, WatchLeavesOutAnObjectCreatedAndRemovedSinceItsVersion) {
  start();
  Widgets widgets(*bh_, widget_kind);
  auto from = widgets.create(ctx_, {"grey", 1}, with_slug("from")).resource_version;
  auto tmp = widgets.create(ctx_, {"grey", 1}, with_slug("tmp"));
  widgets.remove(ctx_, tmp.id);
  ASSERT_TRUE(eventually([&] { return gone(widgets, ctx_, tmp.id); }));
  auto after = widgets.create(ctx_, {"grey", 1}, with_slug("after"));
  auto r = ctl({"watch", "Widget.acme.com", "--resume-from", std::to_string(from), "--for", "200ms",
                "--interval", "20ms"});
  EXPECT_OK(r);
  EXPECT_EQ(r.out.find("DELETED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" tmp "), std::string::npos) << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex("\\nADDED +" + std::to_string(after.id) + " +after ")))
      << r.out;
}

TEST_F(CtlTest, NeverWritesTheDatabase) {
  // (On PostgreSQL the tool's read session is read-only: the server refuses its writes.)
  REQUIRE_SQLITE("the file's bytes");
  close();  // the file is checkpointed and complete
  auto before = slurp(db_path());
  for (auto cmd : std::vector<std::vector<std::string>>{
           {"kinds"},
           {"get", "cluster", "-o", "json"},
           {"describe", "Widget.acme.com", "web"},
           {"events", std::to_string(prod_)},
           {"watch", "cluster", "--for", "100ms", "--interval", "20ms"}})
    EXPECT_OK(ctl(cmd));
  EXPECT_EQ(slurp(db_path()), before);
  if (std::filesystem::exists(dir_.file("app.db-wal"))) {
    EXPECT_EQ(std::filesystem::file_size(dir_.file("app.db-wal")), 0u);
  }
  // The application opens and runs on it afterwards as before.
  open();
  start();
  EXPECT_EQ(Clusters(*bh_, cluster_kind).get(ctx_, prod_).status->ready_nodes, 3);
}

/// Sets an environment variable (unset: nullopt) for the tool's runs, and puts it back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* was = std::getenv(name)) was_ = was;
    set(value);
  }
  ~ScopedEnv() { set(was_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& v) {
    if (v)
      ::setenv(name_, v->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  const char* name_;
  std::optional<std::string> was_;
};

// $BEEHIVE_DB and $BEEHIVE_PG stand in for a missing --db or --pg; an explicit flag of
// either backend wins over the other's variable. Two flags, or two variables and no flag,
// still name two databases.
TEST_F(CtlTest, AnExplicitDatabaseWinsOverTheOtherBackendsVariable) {
  bool pg = test_backend_is_postgres();
  ScopedEnv db_env("BEEHIVE_DB", std::nullopt), pg_env("BEEHIVE_PG", std::nullopt);
  {
    ScopedEnv other(pg ? "BEEHIVE_DB" : "BEEHIVE_PG",
                    pg ? dir_.file("other.db").string() : "host=/nonexistent dbname=other");
    auto r = ctl({"get", "cluster", "prod"});
    EXPECT_OK(r);
    EXPECT_FALSE(row(r.out, std::to_string(prod_)).empty()) << r.out;
  }
  {
    ScopedEnv db("BEEHIVE_DB", db_path().string());
    ScopedEnv conninfo("BEEHIVE_PG", "host=/nonexistent dbname=other");
    auto r = run({BEEHIVE_CTL, "kinds"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("$BEEHIVE_DB and $BEEHIVE_PG name two databases"), std::string::npos)
        << r.err;
  }
  auto r = run({BEEHIVE_CTL, "--db", db_path().string(), "--pg", "host=/nonexistent", "kinds"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--db and --pg name two databases"), std::string::npos) << r.err;
  if (!pg) {  // the variable alone names the file
    ScopedEnv db("BEEHIVE_DB", db_path().string());
    EXPECT_OK(run({BEEHIVE_CTL, "get", "cluster", "prod"}));
  }
}

// A flag given empty (a script's unset variable) is refused, not filled in from the
// environment, which could name another database, even of the other backend. And a
// schema typed beside a SQLite file is refused with $BEEHIVE_PG_SCHEMA exported too (the
// variable alone is the environment's, for PostgreSQL only).
TEST_F(CtlTest, AnEmptyDatabaseFlagIsRefusedAndATypedSchemaBesideAFileToo) {
  ScopedEnv db_env("BEEHIVE_DB", dir_.file("other.db").string());
  ScopedEnv pg_env("BEEHIVE_PG", "host=/nonexistent dbname=other");
  for (const char* flag : {"--db", "--pg"}) {
    auto r = run({BEEHIVE_CTL, flag, "", "kinds"});
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_NE(r.err.find(std::string(flag) + ": the"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("is empty"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.file("other.db")));
  if (test_backend_is_postgres()) return;
  ScopedEnv schema("BEEHIVE_PG_SCHEMA", "orders");
  for (std::vector<std::string> typed :
       {std::vector<std::string>{"--schema", "prod"}, std::vector<std::string>{"--schema=prod"}}) {
    std::vector<std::string> cmd{BEEHIVE_CTL, "--db", db_path().string()};
    cmd.insert(cmd.end(), typed.begin(), typed.end());
    cmd.push_back("kinds");
    auto r = run(cmd);
    EXPECT_EQ(r.status, 2) << typed[0];
    EXPECT_NE(r.err.find("--schema names a PostgreSQL schema"), std::string::npos) << r.err;
  }
  EXPECT_OK(run({BEEHIVE_CTL, "--db", db_path().string(), "kinds"}));
}

// A stopped application's WAL database in a directory the reader may not write (an
// operator reading the application's files): no -shm file can be made beside it, which a
// read-only SQLite connection needs, so the tool reads the file as immutable, which is
// safe only because no -wal file holds commits the file lacks. With one, it says why it
// cannot read rather than SQLite's "attempt to write a readonly database".
// As root, whom permissions do not bind, the tool runs as nobody (setpriv).
TEST_F(CtlTest, ReadsAStoppedDatabaseInADirectoryItCannotWrite) {
  REQUIRE_SQLITE("a file's directory");
  std::vector<std::string> as;
  if (::geteuid() == 0) {
    // util-linux's, which scripts/install-deps.sh installs.
    ASSERT_TRUE(std::filesystem::exists("/usr/bin/setpriv"))
        << "run as root, the test needs setpriv to run the tool as another user";
    as = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  close();  // stopped: checkpointed, the -wal and -shm files gone
  auto wal = dir_.file("app.db-wal"), shm = dir_.file("app.db-shm");
  ASSERT_FALSE(std::filesystem::exists(wal));
  ASSERT_FALSE(std::filesystem::exists(shm));
  namespace fs = std::filesystem;
  // Readable by others (beehive makes it private), in a directory they may not write.
  fs::permissions(db_path(), fs::perms::owner_read | fs::perms::owner_write |
                                 fs::perms::group_read | fs::perms::others_read);
  struct Writable {
    fs::path dir;
    ~Writable() { fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add); }
  } restore{dir_.path()};
  auto read_only = [&](fs::perms extra) {
    fs::permissions(dir_.path(), fs::perms::owner_read | fs::perms::owner_exec |
                                     fs::perms::group_read | fs::perms::group_exec |
                                     fs::perms::others_read | fs::perms::others_exec | extra);
  };
  auto as_reader = [&](std::vector<std::string> rest) {
    auto cmd = args(std::move(rest));
    cmd.insert(cmd.begin(), as.begin(), as.end());
    return run(cmd);
  };
  read_only(fs::perms::none);
  auto r = as_reader({"get", "cluster", "prod"});
  EXPECT_OK(r);
  EXPECT_FALSE(row(r.out, std::to_string(prod_)).empty()) << r.out;
  EXPECT_OK(as_reader({"kinds"}));
  // A watch would follow the file as it was: an application that starts later writes
  // commits that an immutable read never sees. Refused, saying why.
  r = as_reader({"watch", "cluster", "--for", "1s"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot watch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not writable by this user"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(wal));
  EXPECT_FALSE(fs::exists(shm));

  read_only(fs::perms::owner_write);
  std::ofstream(wal).flush();  // as an application that runs leaves it
  read_only(fs::perms::none);
  r = as_reader({"get", "cluster", "prod"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("its directory is not writable by this user"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("app.db-wal"), std::string::npos) << r.err;
}

// A watch outlives its database connection: ended by the server (a restart, an
// operator's pg_terminate_backend), the connection is made again at the next interval and
// the watch goes on. (CtlTest.Pg*: the pg.* run only.)
// The tool's connection ended and, for a while, no new one allowed (its role may not log
// in): it says so, and carries on once it can connect again.
TEST_F(CtlTest, PgWatchOutlivesItsConnectionBeingEndedAndRefused) {
  REQUIRE_POSTGRES();
  auto role = "bh_ctl_" + std::to_string(::getpid());
  query_test_store(db_path(), "CREATE ROLE " + role + " LOGIN SUPERUSER; SELECT 1");
  struct DropRole {
    std::filesystem::path at;
    std::string role;
    ~DropRole() {
      try {
        query_test_store(at, "DROP ROLE IF EXISTS " + role + "; SELECT 1");
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    }
  } drop_role{db_path(), role};
  auto cmd = args({"watch", "Widget.acme.com", "--interval", "20ms", "--max-changes", "1"});
  cmd.at(2) += " user=" + role;  // --pg CONNINFO: a later keyword wins
  Process watch(cmd);
  ASSERT_TRUE(watch.read_line().has_value());  // the header: its connection is open
  // Two calls: one query string is one transaction, and the role must be refused
  // before its session ends.
  query_test_store(db_path(), "ALTER ROLE " + role + " NOLOGIN; SELECT 1");
  query_test_store(db_path(),
                   "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE "
                   "usename = '" +
                       role + "'");
  ASSERT_TRUE(watch.wait_for_err("(retrying)"));
  query_test_store(db_path(), "ALTER ROLE " + role + " LOGIN; SELECT 1");
  Widgets(*bh_, widget_kind).update(ctx_, web_, {"green", 2});
  auto r = watch.wait();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("(retrying)"), std::string::npos) << r.err;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex("\\nMODIFIED +" + std::to_string(web_) + " +web ")))
      << r.out;
}

TEST_F(CtlTest, AStoreOfAnotherSchemaVersionIsRefusedByTheReadCommands) {
  close();
  auto shift_version = [&](int by) {
    auto sql = "UPDATE beehive_schema SET version = version + " + std::to_string(by);
    if (test_backend_is_postgres())
      query_test_store(db_path(), sql + " RETURNING version");
    else
      SQLite::Database(db_path().string(), SQLite::OPEN_READWRITE).exec(sql);
  };
  shift_version(+1);
  auto newer = ctl({"kinds"});
  EXPECT_EQ(newer.status, 1);
  EXPECT_NE(newer.err.find("written by a newer beehive"), std::string::npos) << newer.err;
  shift_version(-2);
  auto older = ctl({"get", "cluster"});
  EXPECT_EQ(older.status, 1);
  EXPECT_NE(older.err.find("has the older schema"), std::string::npos) << older.err;
  // The way to read it is the application's own tool; migrating is not advised.
  EXPECT_NE(older.err.find("beehive-ctl of the application's own build"), std::string::npos)
      << older.err;
  EXPECT_TRUE(older.out.empty()) << older.out;
  shift_version(+1);
  EXPECT_OK(ctl({"kinds"}));
}

// A condition observed at an older generation than the object's describes a spec since
// changed: the tool says so, and keeps the generation it was observed at.
TEST_F(CtlTest, AConditionObservedAtAnOlderGenerationIsShownAsStale) {
  Clusters clusters(*bh_, cluster_kind);
  auto ready = [&] {
    auto r = row(ctl({"get", "cluster"}).out, std::to_string(prod_));
    return r.size() > 4 ? r[4] : std::string();
  };
  auto described = [&](const std::string& generation) {
    auto d = ctl({"describe", "cluster", "prod"}).out;
    return std::regex_search(
               d, std::regex("Ready=True +Ok +[^\\n]* ago +" + generation + " +all nodes ready"))
               ? std::string()
               : d;
  };
  clusters.update(ctx_, prod_, {"eu-west", 4, 0.25});  // generation 2
  // Its Ready condition gives no generation: taken as current.
  EXPECT_EQ(ready(), "True");
  EXPECT_EQ(described("-"), "");
  clusters_cc_->set_condition(ctx_, prod_,
                              {"Ready", ConditionStatus::True, "Ok", "all nodes ready", false, 1});
  EXPECT_EQ(ready(), "True(stale)");
  auto j = Json::parse(ctl({"get", "cluster", "prod", "-o", "json"}).out);
  EXPECT_EQ(j["conditions"][0]["observed_generation"], 1);
  EXPECT_EQ(described("1\\(stale\\)"), "");
  // Observed again at the current generation: current.
  clusters_cc_->set_condition(ctx_, prod_,
                              {"Ready", ConditionStatus::True, "Ok", "all nodes ready", false, 2});
  EXPECT_EQ(ready(), "True");
  EXPECT_EQ(described("2"), "");
  j = Json::parse(ctl({"get", "cluster", "prod", "-o", "json"}).out);
  EXPECT_EQ(j["conditions"][0]["observed_generation"], 2);
}

TEST_F(CtlTest, StaleLivenessConditionsReadAsUnknown) {
  start();  // on PostgreSQL: the leader, whose liveness conditions every process trusts
  widgets_cc_->set_condition(ctx_, db_, {"Reachable", ConditionStatus::True, "Probed", "", true});
  auto current = ctl({"describe", "Widget.acme.com", "db"});
  EXPECT_NE(current.out.find("Reachable=True (liveness)"), std::string::npos) << current.out;
  // A new session of the store (SQLite); the process that wrote it no longer leads
  // (PostgreSQL): the condition is no longer confirmed.
  open();
  auto stale = ctl({"describe", "Widget.acme.com", "db"});
  auto why = test_backend_is_postgres() ? "a process that does not lead now"
                                        : "a beehive that is not running";
  EXPECT_NE(
      stale.out.find(std::string("Reachable=Unknown (liveness, written True by ") + why + ")"),
      std::string::npos)
      << stale.out;
  auto j = Json::parse(ctl({"get", "Widget.acme.com", "db", "-o", "json"}).out);
  EXPECT_EQ(j["conditions"][0]["status"], "Unknown");
  EXPECT_EQ(j["conditions"][0]["stored_status"], "True");
  // Started again, in a new session: what the earlier one wrote stays unconfirmed, in
  // every command (the table counts it among the conditions that are not True).
  start();
  EXPECT_NE(ctl({"describe", "Widget.acme.com", "db"})
                .out.find(std::string("Reachable=Unknown (liveness, written True by ") +
                          (test_backend_is_postgres() ? "a process that does not lead now"
                                                      : "an earlier session")),
            std::string::npos);
  auto table = ctl({"get", "Widget.acme.com", "db"});
  EXPECT_NE(table.out.find(" 0/1 "), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find(" 1/1 "), std::string::npos) << table.out;
}

// The running application's liveness conditions hold for the tool whatever else opened
// the file since it started: the tool's own writes, a Client in another process.
TEST_F(CtlTest, TheRunningApplicationsLivenessConditionsHoldWhateverElseOpensTheStore) {
  start();
  widgets_cc_->set_condition(ctx_, db_, {"Reachable", ConditionStatus::True, "Probed", "", true});
  EXPECT_OK(ctl({"label", "Widget.acme.com", "db", "tier=gold"}));
  auto client_only = open_test_store(db_path());  // a store session of its own
  auto d = ctl({"describe", "Widget.acme.com", "db"});
  EXPECT_NE(d.out.find("Reachable=True (liveness)"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("tier=gold"), std::string::npos) << d.out;
  auto j = Json::parse(ctl({"get", "Widget.acme.com", "db", "-o", "json"}).out);
  EXPECT_EQ(j["conditions"][0]["status"], "True");
}

}  // namespace
}  // namespace beehive::test
