#pragma once

/// Metrics: the figures an operator of a controller expects (the ones controller-runtime
/// exports), reported to a `MetricsSink` given to the Beehive with `with_metrics`.
/// Without a sink beehive reports nothing and pays nothing beyond a null check (it does
/// not even read a clock for them).
///
/// What beehive reports, by name (`kind` is "Kind.group", as `to_string(GroupKind)`):
///
///   beehive_reconcile_total{kind,result}          counter: finished reconcile passes;
///       result is "success", "error" (reconcile threw, or the row does not decode and is
///       quarantined) or "requeue" (it returned a positive `requeue_after`). A pass that
///       finds its object gone counts as "success".
///   beehive_reconcile_duration_seconds{kind}      histogram: one pass, read included;
///       real elapsed time (steady clock), not the Beehive's clock.
///   beehive_workqueue_depth{kind}                 gauge: ids waiting for a worker.
///   beehive_workqueue_queue_duration_seconds{kind} histogram: from an id's enqueue to a
///       worker taking it, measured on the Beehive's clock (`with_clock`): under a
///       ManualClock it moves only when the test moves time.
///   beehive_workqueue_retries_total{kind}         counter: backoff retries armed after a
///       failed pass.
///   beehive_active_workers{kind}                  gauge: reconciles in flight.
///   beehive_store_transactions_total              counter: committed write transactions
///       (a group commit, a `within` block or a single write each count once).
///   beehive_store_write_duration_seconds          histogram: one committed transaction on
///       the writer, BEGIN to COMMIT, real elapsed time (steady clock). A `within` block
///       holds its transaction open while the application's block runs, and is timed so.
///
/// Contract for a sink: calls come from beehive's actor and worker threads, several at
/// once, for as long as the Beehive runs. A sink must be thread-safe, cheap and must not
/// block (no I/O: aggregate and let something else export); it must not call back into
/// the Beehive, and it must not throw. Names and label sets are stable for the life of
/// the Beehive, so a sink may key its series on them; label references are valid only
/// during the call.
///
/// `PrometheusMetrics` is a ready sink that aggregates in memory and renders the
/// Prometheus text exposition format, for an application's /metrics endpoint (see
/// examples/metrics_http.cpp).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace beehive {

/// Label pairs of one series, in a fixed order: ("kind", "Widget.acme.com"), ...
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// The names beehive reports under.
namespace metric {
inline constexpr std::string_view reconcile_total = "beehive_reconcile_total";
inline constexpr std::string_view reconcile_duration = "beehive_reconcile_duration_seconds";
inline constexpr std::string_view workqueue_depth = "beehive_workqueue_depth";
inline constexpr std::string_view workqueue_queue_duration =
    "beehive_workqueue_queue_duration_seconds";
inline constexpr std::string_view workqueue_retries_total = "beehive_workqueue_retries_total";
inline constexpr std::string_view active_workers = "beehive_active_workers";
inline constexpr std::string_view store_transactions_total = "beehive_store_transactions_total";
inline constexpr std::string_view store_write_duration = "beehive_store_write_duration_seconds";
}  // namespace metric

/// Called from beehive's threads, possibly several at once: thread-safe, quick. An
/// exception a method throws is swallowed (that observation is lost, nothing else).
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  /// Adds `delta` (positive) to a counter.
  virtual void counter_add(std::string_view name, const MetricLabels& labels, double delta) = 0;
  /// Sets a gauge to `value`.
  virtual void gauge_set(std::string_view name, const MetricLabels& labels, double value) = 0;
  /// Records one observation of a histogram; beehive's histograms are in seconds.
  virtual void histogram_observe(std::string_view name, const MetricLabels& labels,
                                 double value) = 0;
};

/// A MetricsSink that keeps every series in memory (one mutex, held for a map lookup and
/// an add) and renders them in the Prometheus text exposition format, version 0.0.4.
class PrometheusMetrics : public MetricsSink {
 public:
  /// Histogram bucket upper bounds, in seconds: Prometheus' defaults, 5 ms to 10 s.
  static std::vector<double> default_buckets();

  /// `buckets`: ascending upper bounds shared by every histogram (+Inf is implicit).
  explicit PrometheusMetrics(std::vector<double> buckets = default_buckets());
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  void counter_add(std::string_view name, const MetricLabels& labels, double delta) override;
  void gauge_set(std::string_view name, const MetricLabels& labels, double value) override;
  void histogram_observe(std::string_view name, const MetricLabels& labels, double value) override;

  /// Every series, families sorted by name: "# HELP" and "# TYPE" lines, counters and
  /// gauges as `name{labels} value`, histograms as cumulative `name_bucket{...,le="..."}`
  /// lines ending with le="+Inf", then `name_sum` and `name_count`. Label values are
  /// escaped (backslash, double quote, newline).
  std::string text() const;

  /// A counter's or gauge's current value; 0 for a series never reported.
  double value(std::string_view name, const MetricLabels& labels) const;

  struct Histogram {
    std::uint64_t count = 0;
    double sum = 0;
    std::vector<std::uint64_t> buckets;  // per upper bound, not cumulative
  };
  /// A histogram's current state; empty for a series never reported.
  Histogram histogram(std::string_view name, const MetricLabels& labels) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace beehive
