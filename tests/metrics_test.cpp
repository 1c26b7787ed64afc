// with_metrics: what the controllers and the store writer report, and the Prometheus
// text PrometheusMetrics renders from it. Time moves only through the manual clock;
// durations measured on the steady clock are checked by count, never by value.

#include <future>
#include <map>
#include <set>
#include <sstream>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

/// Every call, in order.
class RecordingSink : public MetricsSink {
 public:
  struct Call {
    char type;  // 'c'ounter, 'g'auge, 'h'istogram
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

const MetricLabels widget_labels{{"kind", "Widget.acme.com"}};
MetricLabels result(const char* r) { return {{"kind", "Widget.acme.com"}, {"result", r}}; }

/// The known workload: 3 widgets that succeed, one ("flaky") that throws once and then
/// succeeds after its 1 s backoff, one ("later") that asks for requeue_after 5 s once.
/// That is 7 passes: success 5, error 1, requeue 1; one retry.
class MetricsTest : public ControllerTest {
 protected:
  /// The flaky widget's expected failure is not worth a line on stderr.
  static Option quiet() { return with_logger(stderr_logger(LogLevel::error)); }

  void run_workload(const std::function<double(const MetricLabels&)>& reconciles) {
    auto flaky_failed = std::make_shared<std::atomic<bool>>(false);
    auto later_requeued = std::make_shared<std::atomic<bool>>(false);
    recorder_->set_body([=](auto&, auto&, auto& o) -> Result {
      if (o.spec.color == "flaky" && !flaky_failed->exchange(true))
        throw std::runtime_error("first try fails");
      if (o.spec.color == "later" && !later_requeued->exchange(true)) return Result{5s};
      return {};
    });
    register_widgets(with_resync_interval(0ms));
    auto w = widgets();
    for (int i = 0; i < 3; ++i) w.create(ctx_, {"ok", i});
    auto flaky = w.create(ctx_, {"flaky", 0});
    auto later = w.create(ctx_, {"later", 0});
    writes_ = 5;
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
                    reconciles(result("requeue"));
      return passes == 7;
    }));
    settle();
    EXPECT_EQ(recorder_->total(), 7);
  }
  int writes_ = 0;
};

TEST_F(MetricsTest, RecordingSinkSeesEveryReconcileRetryAndTransaction) {
  auto sink = std::make_shared<RecordingSink>();
  open(with_metrics(sink), quiet());
  run_workload([&](const MetricLabels& l) { return sink->counter(metric::reconcile_total, l); });

  EXPECT_EQ(sink->counter(metric::reconcile_total, result("success")), 5);
  EXPECT_EQ(sink->counter(metric::reconcile_total, result("error")), 1);
  EXPECT_EQ(sink->counter(metric::reconcile_total, result("requeue")), 1);
  EXPECT_EQ(sink->counter(metric::workqueue_retries_total, widget_labels), 1);
  EXPECT_EQ(sink->of('h', metric::reconcile_duration).size(), 7u);
  EXPECT_EQ(sink->of('h', metric::workqueue_queue_duration).size(), 7u);
  for (auto& c : sink->of('h', metric::reconcile_duration)) {
    EXPECT_EQ(c.labels, widget_labels);
    EXPECT_GE(c.value, 0);
  }
  // Nothing moved the clock while an id waited: every queue wait is zero.
  for (auto& c : sink->of('h', metric::workqueue_queue_duration)) EXPECT_EQ(c.value, 0);
  EXPECT_TRUE(eventually([&] {
    return sink->gauge(metric::workqueue_depth, widget_labels) == 0 &&
           sink->gauge(metric::active_workers, widget_labels) == 0;
  }));
  // At start all 5 were listed before the first dispatch took one: depth 4 was reported.
  double max_depth = 0;
  for (auto& c : sink->of('g', metric::workqueue_depth)) max_depth = std::max(max_depth, c.value);
  EXPECT_GE(max_depth, 4);
  auto txns = sink->counter(metric::store_transactions_total, {});
  EXPECT_GE(txns, writes_);
  EXPECT_EQ(static_cast<double>(sink->of('h', metric::store_write_duration).size()), txns);
}

TEST_F(MetricsTest, PrometheusMetricsAggregatesTheWorkload) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  run_workload([&](const MetricLabels& l) { return prom->value(metric::reconcile_total, l); });

  EXPECT_EQ(prom->value(metric::reconcile_total, result("success")), 5);
  EXPECT_EQ(prom->value(metric::reconcile_total, result("error")), 1);
  EXPECT_EQ(prom->value(metric::reconcile_total, result("requeue")), 1);
  EXPECT_EQ(prom->value(metric::workqueue_retries_total, widget_labels), 1);
  EXPECT_EQ(prom->histogram(metric::reconcile_duration, widget_labels).count, 7u);
  auto waits = prom->histogram(metric::workqueue_queue_duration, widget_labels);
  EXPECT_EQ(waits.count, 7u);
  EXPECT_EQ(waits.sum, 0);
  EXPECT_TRUE(eventually([&] {
    return prom->value(metric::workqueue_depth, widget_labels) == 0 &&
           prom->value(metric::active_workers, widget_labels) == 0;
  }));
  auto txns = prom->value(metric::store_transactions_total, {});
  EXPECT_GE(txns, writes_);
  EXPECT_EQ(static_cast<double>(prom->histogram(metric::store_write_duration, {}).count), txns);

  auto text = prom->text();
  EXPECT_NE(text.find("# TYPE beehive_reconcile_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("beehive_reconcile_total{kind=\"Widget.acme.com\",result=\"success\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE beehive_reconcile_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("beehive_reconcile_duration_seconds_count{kind=\"Widget.acme.com\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("beehive_workqueue_depth{kind=\"Widget.acme.com\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE beehive_store_write_duration_seconds histogram\n"),
            std::string::npos);
}

/// Queue wait is on the Beehive's clock: an id that waits while the test moves time
/// 3 s waited exactly 3 s.
TEST_F(MetricsTest, QueueWaitIsMeasuredOnTheBeehiveClock) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  auto gate = std::make_shared<std::promise<void>>();
  auto opened = gate->get_future().share();
  auto entered = std::make_shared<std::atomic<bool>>(false);
  recorder_->set_body([=](auto&, auto&, auto& o) -> Result {
    if (o.spec.color == "blocker") {
      entered->store(true);
      opened.wait();
    }
    return {};
  });
  register_widgets(with_resync_interval(0ms));  // one worker
  auto w = widgets();
  w.create(ctx_, {"blocker", 0});
  start();
  ASSERT_TRUE(eventually([&] { return entered->load(); }));
  EXPECT_EQ(prom->value(metric::active_workers, widget_labels), 1);
  w.create(ctx_, {"waiting", 0});
  ASSERT_TRUE(eventually([&] { return prom->value(metric::workqueue_depth, widget_labels) == 1; }));
  clock_->advance(3s);
  gate->set_value();
  ASSERT_TRUE(
      eventually([&] { return prom->value(metric::reconcile_total, result("success")) == 2; }));
  auto waits = prom->histogram(metric::workqueue_queue_duration, widget_labels);
  EXPECT_EQ(waits.count, 2u);
  EXPECT_EQ(waits.sum, 3.0);
  // 0 s lands in the first bucket, 3 s in le="5" (the tenth bound), nothing above.
  ASSERT_EQ(waits.buckets.size(), PrometheusMetrics::default_buckets().size());
  EXPECT_EQ(waits.buckets[0], 1u);
  EXPECT_EQ(waits.buckets[9], 1u);
  EXPECT_TRUE(eventually([&] { return prom->value(metric::active_workers, widget_labels) == 0; }));
}

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

TEST_F(MetricsTest, ExpositionFormatOfARealRun) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  run_workload([&](const MetricLabels& l) { return prom->value(metric::reconcile_total, l); });
  check_exposition(prom->text());
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
  auto text = m.text();
  EXPECT_EQ(text,
            "# HELP g Reported by beehive.\n"
            "# TYPE g gauge\n"
            "g 3\n"
            "# HELP h_seconds Reported by beehive.\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\",le=\"0.5\"} 1\n"
            "h_seconds_bucket{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\",le=\"1\"} 2\n"
            "h_seconds_bucket{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\",le=\"+Inf\"} 3\n"
            "h_seconds_sum{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\"} 10.25\n"
            "h_seconds_count{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\"} 3\n"
            "# HELP x_total Reported by beehive.\n"
            "# TYPE x_total counter\n"
            "x_total{kind=\"We\\\"ird\\\\Kind\\nX.acme.com\"} 3.5\n");
  EXPECT_EQ(m.value("x_total", odd), 3.5);
  EXPECT_EQ(m.value("missing", {}), 0);
  EXPECT_EQ(m.histogram("h_seconds", odd).count, 3u);
  check_exposition(text);
}

/// A kind whose name needs escaping, end to end.
TEST_F(MetricsTest, KindWithQuotesAndBackslashIsEscaped) {
  auto prom = std::make_shared<PrometheusMetrics>();
  open(with_metrics(prom), quiet());
  GroupKind odd{"acme.com", "Qu\"o\\te"};
  std::atomic<int> passes{0};
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, odd,
      [&](auto&, auto&, auto&) -> Result {
        ++passes;
        return {};
      },
      with_resync_interval(0ms));
  Client<WidgetSpec, WidgetStatus>(*bh_, odd).create(ctx_, {"x", 1});
  start();
  MetricLabels l{{"kind", to_string(odd)}, {"result", "success"}};
  ASSERT_TRUE(eventually([&] { return prom->value(metric::reconcile_total, l) == 1; }));
  auto text = prom->text();
  EXPECT_NE(
      text.find("beehive_reconcile_total{kind=\"Qu\\\"o\\\\te.acme.com\",result=\"success\"} 1\n"),
      std::string::npos)
      << text;
  check_exposition(text);
}

}  // namespace
}  // namespace beehive::test
