// with_metrics: what the controllers, the store writer and the watch hub report (the
// series named after controller-runtime's, plus beehive's own), the Prometheus text
// PrometheusMetrics renders from it (prometheus-cpp), and its HTTP endpoint. Time moves
// only through the manual clock; durations measured on the steady clock are checked by
// count, never by value.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>
#include <sstream>

#include <caf/all.hpp>

#include <beehive/actors.hpp>

#include "actors/atoms.hpp"  // private: a step-down sent by hand
#include "beehive_core.hpp"
#include "controller_fixture.hpp"
#include "crash_controller.hpp"
#include "metrics/object_tally.hpp"

namespace beehive::test {
namespace {

/// Every call, in order.
class RecordingSink : public MetricsSink {
 public:
  struct Call {
    char type;  // 'c'ounter, 'g'auge, 'h'istogram, 'd'eclared, work 's'tarted, 'f'inished
    std::string name;
    MetricLabels labels;
    double value;
  };
  void counter_add(std::string_view n, const MetricLabels& l, double d) override {
    add('c', n, l, d);
  }
  void gauge_set(std::string_view n, const MetricLabels& l, double v) override {
    add('g', n, l, v);
  }
  void histogram_observe(std::string_view n, const MetricLabels& l, double v) override {
    add('h', n, l, v);
  }
  void declare(std::string_view n, MetricType t, const MetricLabels& l) override {
    add('d', n, l, static_cast<double>(t));
  }
  void work_started(const MetricLabels& q, std::int64_t id,
                    std::chrono::steady_clock::time_point) override {
    add('s', "", q, static_cast<double>(id));
  }
  void work_finished(const MetricLabels& q, std::int64_t id) override {
    add('f', "", q, static_cast<double>(id));
  }
  std::vector<Call> calls() const {
    std::lock_guard lk(mu_);
    return calls_;
  }
  /// Calls of `type` to `name`.
  std::vector<Call> of(char type, std::string_view name) const {
    std::vector<Call> out;
    for (auto& c : calls())
      if (c.type == type && c.name == name) out.push_back(c);
    return out;
  }
  double counter(std::string_view name, const MetricLabels& l) const {
    double sum = 0;
    for (auto& c : of('c', name))
      if (c.labels == l) sum += c.value;
    return sum;
  }
  /// The gauge's last value; -1 if never set.
  double gauge(std::string_view name, const MetricLabels& l) const {
    double v = -1;
    for (auto& c : of('g', name))
      if (c.labels == l) v = c.value;
    return v;
  }

 private:
  void add(char t, std::string_view n, const MetricLabels& l, double v) {
    std::lock_guard lk(mu_);
    calls_.push_back({t, std::string(n), l, v});
  }
  mutable std::mutex mu_;
  std::vector<Call> calls_;
};

/// The label sets of the widget kind: controller-runtime labels a controller's series
/// `controller` and its work queue's `name`; beehive's own per-kind series carry `kind`.
const MetricLabels widget_controller{{"controller", "Widget.acme.com"}};
const MetricLabels widget_queue{{"name", "Widget.acme.com"}};
const MetricLabels widget_kind_labels{{"kind", "Widget.acme.com"}};
MetricLabels result(const char* r) { return {{"controller", "Widget.acme.com"}, {"result", r}}; }

/// The known workload: 3 widgets that succeed (the first also writes its status, so it
/// settles), one ("flaky") that throws once and then succeeds after its 1 s backoff, one
/// ("later") that asks for requeue_after 5 s once. That is 7 passes: success 5, error 1,
/// requeue_after 1; one retry; 7 adds to the queue; 5 objects, 4 of them unsettled.
class MetricsTest : public ControllerTest {
 protected:
  /// The flaky widget's expected failure is not worth a line on stderr.
  static Option quiet() { return with_logger(stderr_logger(LogLevel::error)); }

  /// Opens the beehive with `prom` and `log`, and starts it with one widget, "stuck",
  /// whose pass holds at stuck_gate_; returns once that pass began (its id).
  ObjectID start_with_a_stuck_pass(std::shared_ptr<PrometheusMetrics> prom, LogCapture& log) {
    open(with_metrics(std::move(prom)), with_logger(log.logger()));
    recorder_->hold(stuck_gate_, "stuck");
    register_widgets(with_resync_interval(0ms));
    auto stuck = widgets().create(ctx_, {"stuck", 0});
    start();
    stuck_gate_.wait_entered();
    return stuck.id;
  }
  /// Opened before the beehive stops, however a test ends.
  Gate stuck_gate_;
  void TearDown() override {
    stuck_gate_.open();
    ControllerTest::TearDown();
  }

  /// Registers the widgets with one worker; a "blocker" widget's pass holds it until
  /// `gate` is set. `entered` is set once that pass began.
  struct Blocker {
    std::shared_ptr<std::promise<void>> gate = std::make_shared<std::promise<void>>();
    std::shared_ptr<std::atomic<bool>> entered = std::make_shared<std::atomic<bool>>(false);
  };
  Blocker register_with_a_blocker() {
    Blocker b;
    recorder_->set_body(
        [opened = b.gate->get_future().share(), entered = b.entered](auto&, auto&, auto& o) {
          if (o.spec.color == "blocker") {
            entered->store(true);
            opened.wait();
          }
          return Result{};
        });
    register_widgets(with_resync_interval(0ms));  // one worker
    return b;
  }
  /// Starts with `sink`: the blocker's pass holds the one worker, and another widget
  /// waits behind it (the depth gauge reads 1). Returns the blocker's gate; null if that
  /// state was not reached.
  std::shared_ptr<std::promise<void>> one_waiting_behind_a_blocker(
      const std::shared_ptr<RecordingSink>& sink) {
    open(with_metrics(sink), quiet());
    auto b = register_with_a_blocker();
    auto w = widgets();
    w.create(ctx_, {"blocker", 0});
    start();
    if (!eventually([&] { return b.entered->load(); })) return nullptr;
    w.create(ctx_, {"waiting", 0});
    if (!eventually([&] { return sink->gauge(metric::workqueue_depth, widget_queue) == 1; }))
      return nullptr;
    return b.gate;
  }

  void run_workload(const std::function<double(const MetricLabels&)>& reconciles) {
    auto flaky_failed = std::make_shared<std::atomic<bool>>(false);
    auto later_requeued = std::make_shared<std::atomic<bool>>(false);
    recorder_->set_body([=](auto& ctx, auto& cc, auto& o) -> Result {
      if (o.spec.color == "flaky" && !flaky_failed->exchange(true))
        throw std::runtime_error("first try fails");
      if (o.spec.color == "later" && !later_requeued->exchange(true)) return Result{5s};
      if (o.spec.color == "ok" && o.spec.size == 0)
        cc.update_status(ctx, o.id, o.generation, WidgetStatus{true});
      return {};
    });
    register_widgets(with_resync_interval(0ms));
    auto w = widgets();
    for (int i = 0; i < 3; ++i) w.create(ctx_, {"ok", i});
    auto flaky = w.create(ctx_, {"flaky", 0});
    auto later = w.create(ctx_, {"later", 0});
    writes_ = 6;
    auto t0 = clock_->now();
    start();
    ASSERT_TRUE(eventually([&] { return recorder_->total() == 5; }));
    ASSERT_TRUE(scheduled_at(flaky.id, t0 + 1s));
    ASSERT_TRUE(scheduled_at(later.id, t0 + 5s));
    clock_->advance(1s);
    ASSERT_TRUE(eventually([&] { return recorder_->count(flaky.id) == 2; }));
    clock_->advance(4s);
    ASSERT_TRUE(eventually([&] { return recorder_->count(later.id) == 2; }));
    // Reported by the worker after the pass returns: wait for the counts, not the calls.
    ASSERT_TRUE(eventually([&] {
      auto passes = reconciles(result("success")) + reconciles(result("error")) +
                    reconciles(result("requeue_after"));
      return passes == 7;
    }));
    settle();
    EXPECT_EQ(recorder_->total(), 7);
  }
  int writes_ = 0;
};

/// The exposition, line by line: every sample belongs to a family with HELP and TYPE;
/// histogram buckets are cumulative and end with le="+Inf" equal to _count.
void check_exposition(const std::string& text) {
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  struct Hist {
    std::vector<std::pair<std::string, double>> buckets;  // le, value
    double count = -1;
  };
  std::map<std::string, Hist> hists;  // by name + labels without le
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      helps.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      auto rest = line.substr(7);
      auto sp = rest.find(' ');
      auto name = rest.substr(0, sp);
      EXPECT_TRUE(helps.count(name)) << "TYPE before HELP: " << line;
      EXPECT_FALSE(types.count(name)) << "TYPE twice: " << line;
      types[name] = rest.substr(sp + 1);
      continue;
    }
    auto brace = line.find('{');
    auto space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    auto name = line.substr(0, std::min(brace, space));
    std::string labels = brace < space ? line.substr(brace, line.rfind('}') - brace + 1) : "";
    double value = std::stod(line.substr(space + 1));
    std::string base = name;
    for (std::string suffix : {"_bucket", "_sum", "_count"})
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          types.count(name.substr(0, name.size() - suffix.size())) &&
          types[name.substr(0, name.size() - suffix.size())] == "histogram")
        base = name.substr(0, name.size() - suffix.size());
    ASSERT_TRUE(types.count(base)) << "sample without TYPE: " << line;
    auto& type = types[base];
    if (type == "counter") {
      EXPECT_TRUE(base.ends_with("_total")) << line;
      EXPECT_GE(value, 0) << line;
    }
    if (type != "histogram") continue;
    if (name == base + "_bucket") {
      auto le_at = labels.find("le=\"");
      ASSERT_NE(le_at, std::string::npos) << line;
      auto le = labels.substr(le_at + 4, labels.find('"', le_at + 4) - le_at - 4);
      auto key_labels = labels.substr(0, le_at);
      if (key_labels.ends_with(",")) key_labels.pop_back();
      hists[base + key_labels].buckets.emplace_back(le, value);
    } else if (name == base + "_count") {
      auto key = labels.empty() ? "{" : labels.substr(0, labels.size() - 1);
      hists[base + key].count = value;
    }
  }
  EXPECT_FALSE(hists.empty());
  for (auto& [key, h] : hists) {
    ASSERT_FALSE(h.buckets.empty()) << key;
    for (std::size_t i = 1; i < h.buckets.size(); ++i) {
      EXPECT_GE(h.buckets[i].second, h.buckets[i - 1].second) << key << " not cumulative";
      if (h.buckets[i].first != "+Inf") {
        EXPECT_GT(std::stod(h.buckets[i].first), std::stod(h.buckets[i - 1].first)) << key;
      }
    }
    EXPECT_EQ(h.buckets.back().first, "+Inf") << key;
    EXPECT_EQ(h.buckets.back().second, h.count) << key << ": +Inf bucket != _count";
  }
}

/// Every series beehive reports, with its type and its label set for the widget kind.
struct Expected {
  std::string_view name;
  MetricType type;
  MetricLabels labels;
};
std::vector<Expected> every_series() {
  std::vector<Expected> out;
  for (auto r : {"success", "error", "requeue", "requeue_after"})
    out.push_back({metric::reconcile_total, MetricType::counter, result(r)});
  out.push_back({metric::reconcile_errors_total, MetricType::counter, widget_controller});
  out.push_back({metric::terminal_reconcile_errors_total, MetricType::counter, widget_controller});
  out.push_back({metric::reconcile_time, MetricType::histogram, widget_controller});
  out.push_back({metric::max_concurrent_reconciles, MetricType::gauge, widget_controller});
  out.push_back({metric::active_workers, MetricType::gauge, widget_controller});
  out.push_back({metric::workqueue_depth, MetricType::gauge, widget_queue});
  out.push_back({metric::workqueue_adds_total, MetricType::counter, widget_queue});
  out.push_back({metric::workqueue_retries_total, MetricType::counter, widget_queue});
  out.push_back({metric::workqueue_queue_duration, MetricType::histogram, widget_queue});
  out.push_back({metric::workqueue_work_duration, MetricType::histogram, widget_queue});
  out.push_back({metric::workqueue_unfinished_work, MetricType::gauge, widget_queue});
  out.push_back({metric::workqueue_longest_running_processor, MetricType::gauge, widget_queue});
  out.push_back({metric::objects, MetricType::gauge, widget_kind_labels});
  out.push_back({metric::unsettled_objects, MetricType::gauge, widget_kind_labels});
  out.push_back({metric::commit_seconds, MetricType::histogram, {}});
  out.push_back({metric::group_commit_size, MetricType::histogram, {}});
  out.push_back({metric::watch_subscribers, MetricType::gauge, {}});
  out.push_back({metric::leader, MetricType::gauge, {}});
  return out;
}

/// `name{labels}` as the exposition writes it (labels sorted by name, as prometheus-cpp
/// writes them), with `suffix` after the name.
std::string sample(std::string_view name, MetricLabels labels, std::string_view suffix = "") {
  std::sort(labels.begin(), labels.end());
  std::string out(name);
  out += suffix;
  if (labels.empty()) return out;
  out += '{';
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + labels[i].second + "\"";
  }
  return out + '}';
}

/// Every series exists, at 0, as soon as the Beehive is constructed and the kind is
/// registered: before start, before any object.
TEST_F(MetricsTest, EverySeriesExistsAtZeroFromRegistration) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  register_widgets(with_concurrency(3));
  auto text = prom->text();
  for (auto& e : every_series()) {
    EXPECT_NE(text.find("# TYPE " + std::string(e.name) + " "), std::string::npos) << e.name;
    if (e.type == MetricType::histogram) {
      EXPECT_NE(text.find(sample(e.name, e.labels, "_count") + " 0\n"), std::string::npos)
          << e.name << "\n"
          << text;
      continue;
    }
    double expected = e.name == metric::max_concurrent_reconciles ? 3 : 0;
    std::ostringstream line;
    line << sample(e.name, e.labels) << " " << expected << "\n";
    EXPECT_NE(text.find(line.str()), std::string::npos) << line.str() << text;
  }
  // The names of an earlier release are gone, with no alias.
  for (auto old : {"beehive_reconcile_total", "beehive_reconcile_duration_seconds",
                   "beehive_workqueue_depth", "beehive_workqueue_queue_duration_seconds",
                   "beehive_workqueue_retries_total", "beehive_active_workers",
                   "beehive_store_transactions_total", "beehive_store_write_duration_seconds"})
    EXPECT_EQ(text.find(old), std::string::npos) << old;
  check_exposition(text);
}

/// A sink of its own hears every series declared, each once, before any report.
TEST_F(MetricsTest, RecordingSinkHearsEverySeriesDeclared) {
  auto sink = std::make_shared<RecordingSink>();
  open(with_metrics(sink), quiet());
  register_widgets();
  std::map<std::pair<std::string, MetricLabels>, int> seen;
  for (auto& c : sink->calls())
    if (c.type == 'd') ++seen[{c.name, c.labels}];
  for (auto& e : every_series()) {
    auto it = seen.find({std::string(e.name), e.labels});
    ASSERT_NE(it, seen.end()) << e.name;
    EXPECT_EQ(it->second, 1) << e.name;
  }
  EXPECT_EQ(seen.size(), every_series().size());
}

TEST_F(MetricsTest, RecordingSinkSeesEveryReconcileRetryAndTransaction) {
  auto sink = std::make_shared<RecordingSink>();
  open(with_metrics(sink), quiet());
  run_workload([&](const MetricLabels& l) { return sink->counter(metric::reconcile_total, l); });

  EXPECT_EQ(sink->counter(metric::reconcile_total, result("success")), 5);
  EXPECT_EQ(sink->counter(metric::reconcile_total, result("error")), 1);
  EXPECT_EQ(sink->counter(metric::reconcile_total, result("requeue_after")), 1);
  EXPECT_EQ(sink->counter(metric::reconcile_total, result("requeue")), 0);
  EXPECT_EQ(sink->counter(metric::reconcile_errors_total, widget_controller), 1);
  EXPECT_EQ(sink->counter(metric::terminal_reconcile_errors_total, widget_controller), 0);
  EXPECT_EQ(sink->counter(metric::workqueue_retries_total, widget_queue), 1);
  EXPECT_EQ(sink->counter(metric::workqueue_adds_total, widget_queue), 7);
  EXPECT_EQ(sink->of('h', metric::reconcile_time).size(), 7u);
  EXPECT_EQ(sink->of('h', metric::workqueue_queue_duration).size(), 7u);
  for (auto& c : sink->of('h', metric::reconcile_time)) {
    EXPECT_EQ(c.labels, widget_controller);
    EXPECT_GE(c.value, 0);
  }
  // Nothing moved the clock while an id waited: every queue wait is zero.
  for (auto& c : sink->of('h', metric::workqueue_queue_duration)) EXPECT_EQ(c.value, 0);
  EXPECT_TRUE(eventually([&] {
    return sink->gauge(metric::workqueue_depth, widget_queue) == 0 &&
           sink->gauge(metric::active_workers, widget_controller) == 0 &&
           sink->of('h', metric::workqueue_work_duration).size() == 7u &&
           sink->gauge(metric::workqueue_unfinished_work, widget_queue) == 0 &&
           sink->gauge(metric::workqueue_longest_running_processor, widget_queue) == 0;
  }));
  // Each pass started and finished once, on the queue's labels.
  EXPECT_EQ(sink->of('s', "").size(), 7u);
  EXPECT_EQ(sink->of('f', "").size(), 7u);
  for (auto& c : sink->of('s', "")) EXPECT_EQ(c.labels, widget_queue);
  EXPECT_EQ(sink->gauge(metric::max_concurrent_reconciles, widget_controller), 1);
  // At start all 5 were listed before the first dispatch took one: depth 4 was reported.
  double max_depth = 0;
  for (auto& c : sink->of('g', metric::workqueue_depth)) max_depth = std::max(max_depth, c.value);
  EXPECT_GE(max_depth, 4);
  EXPECT_TRUE(eventually([&] {
    return sink->gauge(metric::objects, widget_kind_labels) == 5 &&
           sink->gauge(metric::unsettled_objects, widget_kind_labels) == 4;
  }));
  auto commits = sink->of('h', metric::commit_seconds);
  EXPECT_GE(static_cast<int>(commits.size()), writes_);
  auto sizes = sink->of('h', metric::group_commit_size);
  EXPECT_EQ(sizes.size(), commits.size());
  for (auto& c : sizes) EXPECT_GE(c.value, 1);
}

TEST_F(MetricsTest, PrometheusMetricsAggregatesTheWorkload) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  run_workload([&](const MetricLabels& l) { return prom->value(metric::reconcile_total, l); });

  EXPECT_EQ(prom->value(metric::reconcile_total, result("success")), 5);
  EXPECT_EQ(prom->value(metric::reconcile_total, result("error")), 1);
  EXPECT_EQ(prom->value(metric::reconcile_total, result("requeue_after")), 1);
  EXPECT_EQ(prom->value(metric::reconcile_total, result("requeue")), 0);
  EXPECT_EQ(prom->value(metric::reconcile_errors_total, widget_controller), 1);
  EXPECT_EQ(prom->value(metric::workqueue_retries_total, widget_queue), 1);
  EXPECT_EQ(prom->value(metric::workqueue_adds_total, widget_queue), 7);
  EXPECT_EQ(prom->histogram(metric::reconcile_time, widget_controller).count, 7u);
  auto waits = prom->histogram(metric::workqueue_queue_duration, widget_queue);
  EXPECT_EQ(waits.count, 7u);
  EXPECT_EQ(waits.sum, 0);
  EXPECT_TRUE(eventually([&] {
    return prom->value(metric::workqueue_depth, widget_queue) == 0 &&
           prom->value(metric::active_workers, widget_controller) == 0 &&
           prom->histogram(metric::workqueue_work_duration, widget_queue).count == 7u &&
           prom->value(metric::objects, widget_kind_labels) == 5 &&
           prom->value(metric::unsettled_objects, widget_kind_labels) == 4;
  }));
  auto commits = prom->histogram(metric::commit_seconds, {});
  EXPECT_GE(static_cast<int>(commits.count), writes_);
  auto sizes = prom->histogram(metric::group_commit_size, {});
  EXPECT_EQ(sizes.count, commits.count);
  EXPECT_GE(sizes.sum, static_cast<double>(sizes.count));  // every commit answers >= 1
  ASSERT_EQ(sizes.buckets.size(), PrometheusMetrics::size_buckets().size());

  auto text = prom->text();
  EXPECT_NE(text.find("# TYPE controller_runtime_reconcile_total counter\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("controller_runtime_reconcile_total{controller=\"Widget.acme.com\","
                      "result=\"success\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE controller_runtime_reconcile_time_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(text.find("controller_runtime_reconcile_time_seconds_count{controller=\"Widget.acme."
                      "com\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("workqueue_depth{name=\"Widget.acme.com\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("beehive_objects{kind=\"Widget.acme.com\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE beehive_commit_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("beehive_group_commit_size_bucket{le=\"1\"} "), std::string::npos);
}

/// Whether the widgets' object counts come to read `all` and `unsettled`.
bool object_counts(PrometheusMetrics& prom, double all, double unsettled) {
  return eventually([&] {
    return prom.value(metric::objects, widget_kind_labels) == all &&
           prom.value(metric::unsettled_objects, widget_kind_labels) == unsettled;
  });
}

/// Object counts follow commits after start: a create, a status write that settles the
/// object, a deletion request, and the removal by the garbage collector.
TEST_F(MetricsTest, ObjectCountsFollowCommits) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  auto cc = register_widgets(with_resync_interval(0ms));
  auto w = widgets();
  w.create(ctx_, {"before", 0});  // counted by the start listing
  start();
  auto counts = [&](double all, double unsettled) { return object_counts(*prom, all, unsettled); };
  ASSERT_TRUE(counts(1, 1));
  auto o = w.create(ctx_, {"after", 0});
  ASSERT_TRUE(counts(2, 2));
  cc.update_status(ctx_, o.id, o.generation, WidgetStatus{true});
  ASSERT_TRUE(counts(2, 1));
  w.update(ctx_, o.id, {"after", 1});  // a new generation: unsettled again
  ASSERT_TRUE(counts(2, 2));
  w.remove(ctx_, o.id);  // no finalizers: collected
  ASSERT_TRUE(counts(1, 1));
}

/// A controller that lists its kind again (it took over as the leader, or missed other
/// processes' changes) counts what the listing holds: a row counted earlier whose removal
/// it never heard of is dropped. The row is a fabricated change of a widget the store
/// never held, and the loss a fabricated commit record, sent to the controller as the
/// writer would send them.
TEST_F(MetricsTest, ObjectCountsFollowARelisting) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  register_widgets(with_resync_interval(0ms));
  auto w = widgets();
  auto real = w.create(ctx_, {"real", 0});
  start();
  auto counts = [&](double all, double unsettled) { return object_counts(*prom, all, unsettled); };
  ASSERT_TRUE(counts(1, 1));
  auto controller = caf::actor_cast<caf::actor>(*bh_->controller(widget_kind));
  object_change ghost;
  ghost.type = ChangeType::Modified;
  ghost.parts = object_change::status;  // counted, and wakes nothing
  ghost.row.meta.id = real.id + 1000;
  ghost.row.meta.group = widget_kind.group;
  ghost.row.meta.kind = widget_kind.kind;
  ghost.row.meta.generation = 1;
  ghost.row.meta.observed_generation = 1;
  ghost.row.meta.resource_version = real.resource_version + 1000;
  commit_record with_ghost;
  with_ghost.changes.push_back(ghost);
  caf::anon_send(controller, with_ghost);
  ASSERT_TRUE(counts(2, 1));
  commit_record lost;  // its removal was among the changes lost
  lost.lost_through = real.resource_version + 1000;
  caf::anon_send(controller, lost);
  EXPECT_TRUE(counts(1, 1));
}

/// A controller that ends while a pass runs (here killed; a restart group retires it
/// too) never hears that pass end, but the pass runs on: it counts in flight, stuck and
/// growing, until it ends, whatever its successor does with its object.
TEST_F(MetricsTest, APassOfAControllerThatEndedCountsInFlightUntilItEnds) {
  auto prom = std::make_shared<PrometheusMetrics>();
  LogCapture log;  // the supervisor logs the restart
  auto stuck = start_with_a_stuck_pass(prom, log);
  auto w = widgets();
  auto longest = [&] {
    prom->text();
    return prom->value(metric::workqueue_longest_running_processor, widget_queue);
  };
  EXPECT_TRUE(eventually([&] { return longest() > 0; }));
  ASSERT_TRUE(crash_controller(*bh_, widget_kind));
  EXPECT_TRUE(log.contains("the controller of Widget.acme.com failed"));
  // The successor is refused the object (busy): the stuck pass still shows, and grows.
  auto before = longest();
  EXPECT_GT(before, 0);
  EXPECT_TRUE(eventually([&] { return longest() > before; }));
  EXPECT_EQ(prom->value(metric::active_workers, widget_controller), 1);
  stuck_gate_.open();
  EXPECT_TRUE(eventually([&] {
    return longest() == 0 && prom->value(metric::workqueue_unfinished_work, widget_queue) == 0 &&
           prom->value(metric::active_workers, widget_controller) == 0;
  }));
  settle();  // the successor reconciles the object once the pass let it go
  EXPECT_EQ(recorder_->count(stuck), 2);
}

/// A controller that replaced one whose pass is stuck is refused its object (busy) until
/// that pass ends, then reconciles it: one add and one queue wait, as for any object
/// queued once (the refused pass ran nothing).
TEST_F(MetricsTest, AnObjectRefusedAsBusyIsCountedAsOneAdd) {
  auto prom = std::make_shared<PrometheusMetrics>();
  LogCapture log;  // the supervisor logs the restart
  auto stuck = start_with_a_stuck_pass(prom, log);
  prom->text();
  auto adds = prom->value(metric::workqueue_adds_total, widget_queue);
  auto waits = prom->histogram(metric::workqueue_queue_duration, widget_queue).count;
  ASSERT_TRUE(crash_controller(*bh_, widget_kind));
  // The successor listed the object and was refused it: nothing queued or in flight.
  auto successor = *bh_->controller(widget_kind);
  ASSERT_TRUE(eventually([&] {
    caf::scoped_actor self{successor->home_system()};
    bool refused = false;
    self->request(successor, std::chrono::seconds(10), inspect_atom::value)
        .receive(
            [&](const controller_state& s) {
              refused = s.dispatching && s.in_flight.empty() && s.queue_length == 0;
            },
            [](caf::error&) {});
    return refused;
  }));
  stuck_gate_.open();
  ASSERT_TRUE(eventually([&] { return recorder_->count(stuck) == 2; }));
  settle();
  prom->text();
  EXPECT_EQ(prom->value(metric::workqueue_adds_total, widget_queue) - adds, 1);
  EXPECT_EQ(prom->histogram(metric::workqueue_queue_duration, widget_queue).count - waits, 1u);
}

/// Queue wait is on the Beehive's clock: an id that waits while the test moves time
/// 3 s waited exactly 3 s. While a pass runs, the in-flight gauges grow at every scrape.
TEST_F(MetricsTest, QueueWaitIsMeasuredOnTheBeehiveClock) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  auto [gate, entered] = register_with_a_blocker();
  auto w = widgets();
  w.create(ctx_, {"blocker", 0});
  start();
  ASSERT_TRUE(eventually([&] { return entered->load(); }));
  EXPECT_EQ(prom->value(metric::active_workers, widget_controller), 1);
  // Computed from the pass's start at each scrape: the stuck pass shows, and grows.
  auto longest = [&] {
    prom->text();
    return prom->value(metric::workqueue_longest_running_processor, widget_queue);
  };
  auto first = longest();
  EXPECT_GT(first, 0);
  EXPECT_TRUE(eventually([&] { return longest() > first; }));
  EXPECT_GE(prom->value(metric::workqueue_unfinished_work, widget_queue),
            prom->value(metric::workqueue_longest_running_processor, widget_queue));
  w.create(ctx_, {"waiting", 0});
  ASSERT_TRUE(eventually([&] { return prom->value(metric::workqueue_depth, widget_queue) == 1; }));
  clock_->advance(3s);
  gate->set_value();
  ASSERT_TRUE(
      eventually([&] { return prom->value(metric::reconcile_total, result("success")) == 2; }));
  auto waits = prom->histogram(metric::workqueue_queue_duration, widget_queue);
  EXPECT_EQ(waits.count, 2u);
  EXPECT_EQ(waits.sum, 3.0);
  // 0 s lands in the first bucket, 3 s in le="10" (the tenth bound), nothing above.
  ASSERT_EQ(waits.buckets.size(),
            PrometheusMetrics::buckets_for(metric::workqueue_queue_duration).size());
  EXPECT_EQ(waits.buckets[0], 1u);
  EXPECT_EQ(waits.buckets[9], 1u);
  EXPECT_TRUE(eventually([&] {
    return prom->value(metric::active_workers, widget_controller) == 0 && longest() == 0 &&
           prom->value(metric::workqueue_unfinished_work, widget_queue) == 0;
  }));
}

// An object changed while its pass runs is added once, as client-go's queue counts an item
// re-added while it is processed: one add per wake, and each add waits once (its wait
// timed from the change, on the beehive's clock).
TEST_F(MetricsTest, AnObjectChangedDuringItsPassIsAddedOnce) {
  auto sink = std::make_shared<RecordingSink>();
  open(with_metrics(sink), quiet());
  auto gate = std::make_shared<std::promise<void>>();
  auto opened = gate->get_future().share();
  auto entered = std::make_shared<std::atomic<int>>(0);
  recorder_->set_body([=](auto&, auto&, auto&) -> Result {
    if (entered->fetch_add(1) == 0) opened.wait();
    return {};
  });
  register_widgets(with_resync_interval(0ms));
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  start();
  ASSERT_TRUE(eventually([&] { return entered->load() == 1; }));
  w.update(ctx_, o.id, {"a", 2});  // wakes it while its pass runs
  ASSERT_TRUE(
      eventually([&] { return sink->counter(metric::workqueue_adds_total, widget_queue) == 2; }));
  clock_->advance(2s);
  gate->set_value();
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }));
  settle();
  EXPECT_EQ(sink->counter(metric::workqueue_adds_total, widget_queue), 2);
  auto waits = sink->of('h', metric::workqueue_queue_duration);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0].value, 0);
  EXPECT_EQ(waits[1].value, 2);
}

// A terminal failure is an error to controller-runtime's dashboards (result="error",
// reconcile_errors_total), and counted apart as terminal: a TerminalError, and a row
// that does not decode (quarantined).
TEST_F(MetricsTest, TerminalFailuresAreErrorsCountedApartAsTerminal) {
  auto sink = std::make_shared<RecordingSink>();
  open(with_metrics(sink), quiet());
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw TerminalError("no such region"); });
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  Client<nlohmann::json, nlohmann::json>(*bh_, widget_kind)
      .create(ctx_, nlohmann::json{{"not", "a widget"}});
  start();
  settle();
  EXPECT_EQ(recorder_->count(o.id), 1);
  EXPECT_EQ(sink->counter(metric::reconcile_total, result("error")), 2);
  EXPECT_EQ(sink->counter(metric::reconcile_errors_total, widget_controller), 2);
  EXPECT_EQ(sink->counter(metric::terminal_reconcile_errors_total, widget_controller), 2);
  EXPECT_EQ(sink->counter(metric::workqueue_retries_total, widget_queue), 0);
}

// beehive_leader: 1 while the process runs and leads (SQLite: while it runs), 0 after.
TEST_F(MetricsTest, TheLeaderGaugeFollowsTheRun) {
  auto sink = std::make_shared<RecordingSink>();
  open(with_metrics(sink), quiet());
  register_widgets();
  start();  // declared at 0 when the Beehive was made (EverySeriesExistsAtZero...)
  EXPECT_TRUE(eventually([&] { return sink->gauge(metric::leader, {}) == 1; }));
  close();
  EXPECT_EQ(sink->gauge(metric::leader, {}), 0);
}

// Each histogram has bounds that fit what it measures: commits (tens of microseconds on
// SQLite) spread over buckets finer than Prometheus' 5 ms defaults; one set given to
// the constructor is every duration histogram's.
TEST_F(MetricsTest, HistogramsHaveBoundsThatFitWhatTheyMeasure) {
  auto prom = std::make_shared<PrometheusMetrics>();
  prom->histogram_observe(metric::commit_seconds, {}, 0.00007);
  prom->histogram_observe(metric::commit_seconds, {}, 0.0007);
  auto commits = prom->histogram(metric::commit_seconds, {});
  auto bounds = PrometheusMetrics::buckets_for(metric::commit_seconds);
  ASSERT_EQ(commits.buckets.size(), bounds.size());
  EXPECT_EQ(bounds.front(), 0.00005);
  EXPECT_EQ(commits.buckets[1], 1u);  // le="0.0001"
  EXPECT_EQ(commits.buckets[4], 1u);  // le="0.001"
  EXPECT_EQ(PrometheusMetrics::buckets_for(metric::workqueue_work_duration).front(), 1e-8);
  EXPECT_EQ(PrometheusMetrics::buckets_for(metric::reconcile_time).back(), 60);
  EXPECT_EQ(PrometheusMetrics::buckets_for("my_seconds"), PrometheusMetrics::default_buckets());
  PrometheusMetrics one_set({0.5, 1});
  one_set.histogram_observe(metric::commit_seconds, {}, 0.7);
  one_set.histogram_observe(metric::group_commit_size, {}, 3);
  EXPECT_EQ(one_set.histogram(metric::commit_seconds, {}).buckets,
            (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(one_set.histogram(metric::group_commit_size, {}).buckets.size(),
            PrometheusMetrics::size_buckets().size());
}

// A leader that steps down drops its queue (the new leader lists the kind again): the
// depth gauge says so at once, not at its next pass.
TEST_F(MetricsTest, AStepDownEmptiesTheQueueDepthGauge) {
  auto sink = std::make_shared<RecordingSink>();
  auto gate = one_waiting_behind_a_blocker(sink);
  ASSERT_TRUE(gate);
  auto controller = caf::actor_cast<caf::actor>(*bh_->controller(widget_kind));
  {
    caf::scoped_actor self{controller->home_system()};
    self->send(controller, detail::leadership_atom::value, false);
  }
  EXPECT_TRUE(eventually([&] { return sink->gauge(metric::workqueue_depth, widget_queue) == 0; }));
  gate->set_value();
  settle();
}

// Stop leaves no id waiting for a worker (none will get one): the depth gauge reads 0
// once it has stopped, not the length of the queue it left behind.
TEST_F(MetricsTest, AStoppedControllerReportsNoQueueDepth) {
  auto sink = std::make_shared<RecordingSink>();
  auto gate = one_waiting_behind_a_blocker(sink);
  ASSERT_TRUE(gate);
  auto stopped = std::async(std::launch::async, [this] { close(); });
  EXPECT_TRUE(eventually([&] { return sink->gauge(metric::workqueue_depth, widget_queue) == 0; }));
  gate->set_value();  // the pass in flight ends, and the stop with it
  stopped.get();
  EXPECT_EQ(sink->gauge(metric::workqueue_depth, widget_queue), 0);
}

/// beehive_watch_subscribers counts the hub's watches as they open and close.
TEST_F(MetricsTest, WatchSubscribersAreCounted) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"x", 0});
  EXPECT_EQ(prom->value(metric::watch_subscribers, {}), 0);
  {
    auto all = w.watch_list(ctx_);
    auto one = w.watch(ctx_, o.id);
    auto events = w.watch_events(ctx_, o.id);
    EXPECT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 3; }));
    all.close();
    EXPECT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 2; }));
  }
  EXPECT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 0; }));
  // A hub that crashes ends its watches: the gauge goes back to 0 with them.
  auto all = w.watch_list(ctx_);
  auto events = w.watch_events(ctx_, o.id);
  ASSERT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 2; }));
  caf::anon_send_exit(bh_->watch_hub(), caf::exit_reason::kill);
  EXPECT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 0; }));
  // A reader restart replaces the hub while the old one still runs: its watches end, and
  // the gauge is the new hub's.
  // (A watch opened while a restarted hub starts is refused, to be opened again.)
  auto opened = [&](auto open) {
    std::optional<decltype(open())> s;
    EXPECT_TRUE(eventually([&] {
      try {
        s.emplace(open());
        return true;
      } catch (const Error& e) {
        if (e.code() != errc::store) throw;
        return false;
      }
    }));
    return s;
  };
  auto list = opened([&] { return w.watch_list(ctx_); });
  auto one = opened([&] { return w.watch(ctx_, o.id); });
  ASSERT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 2; }));
  caf::anon_send_exit(bh_->core()->reader(), caf::exit_reason::kill);
  EXPECT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 0; }));
  auto again = opened([&] { return w.watch(ctx_, o.id); });
  EXPECT_TRUE(eventually([&] { return prom->value(metric::watch_subscribers, {}) == 1; }));
}

TEST_F(MetricsTest, ExpositionFormatOfARealRun) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  run_workload([&](const MetricLabels& l) { return prom->value(metric::reconcile_total, l); });
  check_exposition(prom->text());
}

using detail::ObjectTally;

ObjectMeta widget_meta(ObjectID id, std::int64_t rv, bool settled) {
  ObjectMeta m;
  m.id = id;
  m.group = widget_kind.group;
  m.kind = widget_kind.kind;
  m.generation = 1;
  if (settled) m.observed_generation = 1;
  m.resource_version = rv;
  return m;
}

TEST(ObjectTally, ARelistingDropsTheRowsItLacks) {
  ObjectTally t;
  t.listed(t.listing_started(), {{1, 10}, {2, 11}, {3, 12}}, {{2, 11}});
  EXPECT_EQ(t.objects(), 3u);
  EXPECT_EQ(t.unsettled(), 1u);
  // 2 was removed while this process missed the changes: only the listing tells.
  t.listed(t.listing_started(), {{1, 10}, {3, 12}}, {});
  EXPECT_EQ(t.objects(), 2u);
  EXPECT_EQ(t.unsettled(), 0u);
}

TEST(ObjectTally, ARowChangedAfterTheListingWasAskedForIsKept) {
  ObjectTally t;
  t.listed(t.listing_started(), {{1, 10}}, {});
  auto ticket = t.listing_started();
  t.changed(widget_meta(2, 20, false), false);  // created after the listing's read
  t.listed(ticket, {{1, 10}}, {});
  EXPECT_EQ(t.objects(), 2u);
  EXPECT_EQ(t.unsettled(), 1u);
  // A row changed before the listing was asked for is not kept that way.
  t.changed(widget_meta(3, 30, true), false);
  t.listed(t.listing_started(), {{1, 10}, {2, 20}}, {{2, 20}});
  EXPECT_EQ(t.objects(), 2u);
}

TEST(ObjectTally, ARemovalWhileAListingIsInFlightIsNotUndoneByIt) {
  ObjectTally t;
  t.listed(t.listing_started(), {{1, 10}, {2, 11}}, {});
  auto ticket = t.listing_started();
  t.changed(widget_meta(2, 30, true), true);  // after the read, before the answer
  EXPECT_EQ(t.objects(), 1u);
  t.listed(ticket, {{1, 10}, {2, 11}}, {});
  EXPECT_EQ(t.objects(), 1u);
  // Two listings in flight: a removal before the second is remembered until both end.
  auto first = t.listing_started();
  auto second = t.listing_started();
  t.changed(widget_meta(1, 40, true), true);
  t.listed(first, {{1, 10}}, {});
  t.listed(second, {{1, 10}}, {});
  EXPECT_EQ(t.objects(), 0u);
  // A failed listing ends too: later removals are not remembered forever.
  t.listing_failed(t.listing_started());
  t.changed(widget_meta(5, 50, true), false);
  t.listed(t.listing_started(), {{5, 50}}, {});
  EXPECT_EQ(t.objects(), 1u);
}

TEST(PrometheusMetrics, EscapesLabelsAndRendersBuckets) {
  PrometheusMetrics m({1, 0.5});  // unsorted bounds are sorted
  MetricLabels odd{{"kind", "We\"ird\\Kind\nX.acme.com"}};
  m.counter_add("x_total", odd, 2);
  m.counter_add("x_total", odd, 1.5);
  m.gauge_set("g", {}, 7);
  m.gauge_set("g", {}, 3);
  m.histogram_observe("h_seconds", odd, 0.5);  // le is inclusive
  m.histogram_observe("h_seconds", odd, 0.75);
  m.histogram_observe("h_seconds", odd, 9);
  m.histogram_observe("x_total", odd, 1);  // another type under a counter's name: ignored
  m.counter_add("bad name", {}, 1);        // names Prometheus refuses: ignored
  m.counter_add("y_total", {{"bad label", "v"}}, 1);  // a family without series: not shown
  m.declare("z_total", MetricType::counter, {{"a", "b"}});
  auto text = m.text();
  EXPECT_EQ(text,
            "# HELP g Reported by beehive.\n"
            "# TYPE g gauge\n"
            "g 3\n"
            "# HELP h_seconds Reported by beehive.\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_count{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\"} 3\n"
            "h_seconds_sum{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\"} 10.25\n"
            "h_seconds_bucket{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\",le=\"0.5\"} 1\n"
            "h_seconds_bucket{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\",le=\"1\"} 2\n"
            "h_seconds_bucket{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\",le=\"+Inf\"} 3\n"
            "# HELP x_total Reported by beehive.\n"
            "# TYPE x_total counter\n"
            "x_total{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\"} 3.5\n"
            "# HELP z_total Reported by beehive.\n"
            "# TYPE z_total counter\n"
            "z_total{a=\"b\"} 0\n");
  EXPECT_EQ(m.value("x_total", odd), 3.5);
  EXPECT_EQ(m.value("missing", {}), 0);
  EXPECT_EQ(m.histogram("h_seconds", odd).count, 3u);
  EXPECT_EQ(m.histogram("h_seconds", odd).buckets, (std::vector<std::uint64_t>{1, 1}));
  EXPECT_EQ(m.port(), 0);
  check_exposition(text);
}

/// beehive_group_commit_size counts requests: an actor's transaction of three writes is
/// one request answered by one commit.
TEST_F(MetricsTest, AnActorsTransactionIsOneRequestInTheGroupCommitSize) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  auto before = prom->histogram(metric::group_commit_size, {});
  auto body = [](const std::string& color) {
    return nlohmann::json{{"color", color}, {"size", 1}}.dump();
  };
  caf::scoped_actor self{actor_system_of(*bh_)};
  bool answered = false;
  self->request(bh_->store_writer(), caf::infinite,
                transaction_request{{create_request{widget_kind, body("a"), "a"},
                                     create_request{widget_kind, body("b"), "b"},
                                     create_request{widget_kind, body("c"), "c"}}})
      .receive([&](const transaction_reply& r) { answered = r.replies.size() == 3; },
               [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  ASSERT_TRUE(answered);
  auto after = prom->histogram(metric::group_commit_size, {});
  EXPECT_EQ(after.count, before.count + 1);
  EXPECT_EQ(after.sum, before.sum + 1);
}

/// A kind whose name needs escaping, end to end.
TEST_F(MetricsTest, KindWithQuotesAndBackslashIsEscaped) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  GroupKind odd{"acme.com", "Qu\"o\\te"};
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, odd, [](auto&, auto&, auto&) -> Result { return {}; }, with_resync_interval(0ms));
  Client<WidgetSpec, WidgetStatus>(*bh_, odd).create(ctx_, {"x", 1});
  start();
  MetricLabels l{{"controller", to_string(odd)}, {"result", "success"}};
  ASSERT_TRUE(eventually([&] { return prom->value(metric::reconcile_total, l) == 1; }));
  auto text = prom->text();
  EXPECT_NE(text.find("controller_runtime_reconcile_total{controller=\"Qu\\\"o\\\\te.acme.com\","
                      "result=\"success\"} 1\n"),
            std::string::npos)
      << text;
  check_exposition(text);
}

/// One GET over a plain socket: the status line and headers, then the body.
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "socket failed";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return response;
}

/// serve() answers GET /metrics with the exposition, on a port picked for port 0.
TEST_F(MetricsTest, ServeAnswersGetMetrics) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  register_widgets();
  prom->serve("127.0.0.1:0");
  ASSERT_GT(prom->port(), 0);
  auto response = http_get(prom->port(), "/metrics");
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
  auto body_at = response.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << response;
  auto body = response.substr(body_at + 4);
  EXPECT_NE(body.find("controller_runtime_reconcile_total{controller=\"Widget.acme.com\","
                      "result=\"success\"} 0\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("beehive_watch_subscribers 0\n"), std::string::npos) << body;
  // Serving twice is refused; so is a port another endpoint holds.
  EXPECT_THROW(
      {
        try {
          prom->serve("127.0.0.1:0");
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), errc::already_started);
          throw;
        }
      },
      Error);
  PrometheusMetrics other;
  try {
    other.serve("127.0.0.1:" + std::to_string(prom->port()));
    ADD_FAILURE() << "a taken port was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(prom->port())),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(other.port(), 0);
}

TEST(PrometheusMetrics, ServeRefusesABadAddress) {
  for (std::string bad :
       {"", "nonsense", "127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:99999", "127.0.0.1:12ab",
        "[::1:9464", "host name:9464",
        // A list: the server underneath would also listen on every
        // interface for the bare port.
        "9464,127.0.0.1:9465", "127.0.0.1:9464,9465", "[::1],9464:9465", "127.0.0.1\n:9464"}) {
    PrometheusMetrics m;
    try {
      m.serve(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find("host:port"), std::string::npos) << e.what();
    }
  }
  PrometheusMetrics m;  // well formed, but not an address of this host
  try {
    m.serve("192.0.2.1:0");
    ADD_FAILURE() << "listened on an address this host does not have";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

}  // namespace
}  // namespace beehive::test
