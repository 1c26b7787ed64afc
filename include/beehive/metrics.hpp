#pragma once

/// Metrics: the series an operator of a controller already has dashboards and alerts for
/// (controller-runtime's names), plus beehive's own, reported to a `MetricsSink` given to
/// the Beehive with `with_metrics`. Without a sink beehive reports nothing and pays
/// nothing beyond a null check (it does not even read a clock for them).
///
/// What beehive reports, by name. `controller` (controller-runtime's label), `name` (the
/// label controller-runtime gives a work queue) and `kind` all carry the kind as
/// `to_string(GroupKind)`, "Kind.group":
///
///   controller_runtime_reconcile_total{controller,result}   counter: finished passes;
///       result is "success", "error" (reconcile threw, or failed terminally), "requeue"
///       (it asked for another pass now) or "requeue_after" (a positive `requeue_after`).
///       A pass that finds its object gone counts as "success"; a pass cancelled by stop,
///       or one whose writes failed the fence because this process stopped leading, is
///       not counted.
///   controller_runtime_reconcile_errors_total{controller}   counter: passes that ended in
///       "error", terminal ones included.
///   controller_runtime_terminal_reconcile_errors_total{controller} counter: of those, the
///       failures that are not retried (a terminal error; a row that does not decode,
///       quarantined).
///   controller_runtime_reconcile_time_seconds{controller}   histogram: one pass on the
///       worker, read included; real elapsed time (steady clock).
///   controller_runtime_max_concurrent_reconciles{controller} gauge: the kind's workers.
///   controller_runtime_active_workers{controller}           gauge: passes in flight.
///   workqueue_depth{name}                   gauge: ids waiting for a worker.
///   workqueue_adds_total{name}              counter: ids added to the queue (an id already
///       waiting is not added again; one re-added while in flight is, once).
///   workqueue_retries_total{name}           counter: backoff retries armed after failed
///       passes.
///   workqueue_queue_duration_seconds{name}  histogram: from an id's enqueue (for one
///       changed while its pass ran, from that change) to a worker taking it, on the
///       timers' clock: a ManualClock given to `with_clock` (it moves only when the
///       test moves time), else the steady clock.
///   workqueue_work_duration_seconds{name}   histogram: from a worker taking an id to the
///       pass's end (steady clock).
///   workqueue_unfinished_work_seconds{name} gauge: seconds of work in flight, summed
///       over the passes in flight (steady clock).
///   workqueue_longest_running_processor_seconds{name} gauge: how long the oldest pass in
///       flight has been running (steady clock). These two are reported whenever a pass
///       starts or ends; a sink that wants them current at any moment (a stuck pass
///       growing) computes them from `work_started` / `work_finished`, as
///       PrometheusMetrics does at every scrape. A pass counts until it ends, also when
///       its controller was replaced meanwhile or a stop's deadline left it running.
///   beehive_objects{kind}                   gauge: the kind's stored objects (deletion-
///       pending ones included).
///   beehive_unsettled_objects{kind}         gauge: those whose observed generation lags
///       the generation, or whose deletion was requested.
///   beehive_commit_seconds                  histogram: one committed write transaction
///       on the writer, BEGIN to COMMIT (steady clock); its _count counts transactions. A
///       `within` block holds its transaction open while the application's block runs,
///       and is timed so.
///   beehive_group_commit_size               histogram: requests answered by one commit
///       (a group commit's writes; a single write or a `within` block is 1).
///   beehive_watch_subscribers               gauge: object and event watches the watch hub
///       serves (blocking streams and actor subscribers).
///   beehive_leader                          gauge: 1 while this process runs and leads the
///       processes on its store (SQLite: while it runs), else 0 (from the moment a stop
///       begins). Of several processes on
///       one PostgreSQL store, the kind gauges of the one at 1 are the ones to read.
///
/// Every series exists from the moment it is known: the store's and the hub's when the
/// Beehive is constructed, a kind's when it is registered (`declare`, then 0).
///
/// Contract for a sink: calls come from beehive's actor and worker threads, several at
/// once, for as long as the Beehive runs. A sink must be thread-safe, cheap and must not
/// block (no I/O: aggregate and let something else export); it must not call back into
/// the Beehive. An exception it throws is swallowed (that observation is lost, nothing
/// else). Names and label sets are stable for the life of the Beehive, so a sink may key
/// its series on them; label references are valid only during the call. A sink serves one
/// Beehive: the store's and the hub's series carry no label that would tell two apart.
///
/// `PrometheusMetrics` is a ready sink built on prometheus-cpp: a registry, the text
/// exposition (`text()`) and an HTTP `/metrics` endpoint (`serve("127.0.0.1:9464")`).
/// Users of another metrics system implement `MetricsSink` instead.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace beehive {

/// Label pairs of one series, in a fixed order: ("controller", "Widget.acme.com"), ...
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { counter, gauge, histogram };

/// The names beehive reports under.
namespace metric {
inline constexpr std::string_view reconcile_total = "controller_runtime_reconcile_total";
inline constexpr std::string_view reconcile_errors_total =
    "controller_runtime_reconcile_errors_total";
inline constexpr std::string_view terminal_reconcile_errors_total =
    "controller_runtime_terminal_reconcile_errors_total";
inline constexpr std::string_view reconcile_time = "controller_runtime_reconcile_time_seconds";
inline constexpr std::string_view max_concurrent_reconciles =
    "controller_runtime_max_concurrent_reconciles";
inline constexpr std::string_view active_workers = "controller_runtime_active_workers";
inline constexpr std::string_view workqueue_depth = "workqueue_depth";
inline constexpr std::string_view workqueue_adds_total = "workqueue_adds_total";
inline constexpr std::string_view workqueue_retries_total = "workqueue_retries_total";
inline constexpr std::string_view workqueue_queue_duration = "workqueue_queue_duration_seconds";
inline constexpr std::string_view workqueue_work_duration = "workqueue_work_duration_seconds";
inline constexpr std::string_view workqueue_unfinished_work = "workqueue_unfinished_work_seconds";
inline constexpr std::string_view workqueue_longest_running_processor =
    "workqueue_longest_running_processor_seconds";
inline constexpr std::string_view objects = "beehive_objects";
inline constexpr std::string_view unsettled_objects = "beehive_unsettled_objects";
inline constexpr std::string_view commit_seconds = "beehive_commit_seconds";
inline constexpr std::string_view group_commit_size = "beehive_group_commit_size";
inline constexpr std::string_view watch_subscribers = "beehive_watch_subscribers";
inline constexpr std::string_view leader = "beehive_leader";
}  // namespace metric

/// Where beehive reports. The three reporting methods are all a sink must implement; the
/// others have empty defaults, so a sink written for an older beehive keeps compiling.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  /// Adds `delta` (positive) to a counter.
  virtual void counter_add(std::string_view name, const MetricLabels& labels, double delta) = 0;
  /// Sets a gauge to `value`.
  virtual void gauge_set(std::string_view name, const MetricLabels& labels, double value) = 0;
  /// Records one observation of a histogram; beehive's histograms are in seconds, except
  /// beehive_group_commit_size (requests).
  virtual void histogram_observe(std::string_view name, const MetricLabels& labels,
                                 double value) = 0;

  /// The series exists from now on, at 0 (a counter or gauge at 0, a histogram without
  /// observations), so that dashboards and alerts see it before anything happened.
  /// Called once per series, before any report to it.
  virtual void declare(std::string_view name, MetricType type, const MetricLabels& labels) {
    (void)name, (void)type, (void)labels;
  }
  /// A worker took `id` off the work queue `queue` (labels {name}) at `at`; with
  /// `work_finished`, lets a sink compute workqueue_unfinished_work_seconds and
  /// workqueue_longest_running_processor_seconds at the moment it is read.
  virtual void work_started(const MetricLabels& queue, std::int64_t id,
                            std::chrono::steady_clock::time_point at) {
    (void)queue, (void)id, (void)at;
  }
  /// The pass of `id` that `work_started` announced has ended.
  virtual void work_finished(const MetricLabels& queue, std::int64_t id) { (void)queue, (void)id; }
};

/// A MetricsSink on a prometheus-cpp registry, with the Prometheus text exposition
/// (`text()`) and, on request, an HTTP endpoint serving it (`serve`).
///
/// Thread-safety: every member may be called from any thread at any time (beehive's
/// threads report while the application reads or serves).
class PrometheusMetrics : public MetricsSink {
 public:
  /// Histogram bucket upper bounds, in seconds: Prometheus' defaults, 5 ms to 10 s.
  static std::vector<double> default_buckets();
  /// The bounds of beehive_group_commit_size: 1, 2, 4, ... 1024 requests.
  static std::vector<double> size_buckets();
  /// The bounds a histogram gets by default (+Inf is implicit): for
  /// beehive_commit_seconds 50 us to 10 s; for workqueue_queue_duration_seconds and
  /// workqueue_work_duration_seconds client-go's, 10 ns to 1000 s ten times apart; for
  /// controller_runtime_reconcile_time_seconds controller-runtime's, 5 ms to 60 s; for
  /// beehive_group_commit_size `size_buckets()`; for any other name `default_buckets()`.
  static std::vector<double> buckets_for(std::string_view name);

  /// Each histogram with its own bounds (`buckets_for`).
  PrometheusMetrics();
  /// `buckets`: ascending upper bounds of every histogram in seconds (+Inf is implicit;
  /// duplicates and non-finite bounds are dropped). beehive_group_commit_size, which
  /// counts requests, keeps `size_buckets()`.
  explicit PrometheusMetrics(std::vector<double> buckets);
  /// Stops the endpoint, if serving.
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  /// A name first reported as one type keeps it: reports of another type under that name
  /// are ignored, as are names and label names that Prometheus does not accept.
  void counter_add(std::string_view name, const MetricLabels& labels, double delta) override;
  void gauge_set(std::string_view name, const MetricLabels& labels, double value) override;
  void histogram_observe(std::string_view name, const MetricLabels& labels, double value) override;
  void declare(std::string_view name, MetricType type, const MetricLabels& labels) override;
  void work_started(const MetricLabels& queue, std::int64_t id,
                    std::chrono::steady_clock::time_point at) override;
  void work_finished(const MetricLabels& queue, std::int64_t id) override;

  /// Every series in the Prometheus text exposition format 0.0.4 (prometheus-cpp's
  /// serializer), families sorted by name and series by labels. The work queues'
  /// unfinished-work and longest-running gauges are computed now, from the passes in
  /// flight.
  std::string text() const;

  /// Serves `text()`'s exposition over HTTP at `http://<address>/metrics` (prometheus-cpp's
  /// Exposer, two threads) until this object is destroyed. `address` is "host:port":
  /// "127.0.0.1:9464" (the default port of OpenTelemetry's Prometheus exporter; prefer a
  /// loopback or private address: the endpoint has no authentication), "0.0.0.0:9464",
  /// "[::1]:9464"; port 0 picks a free port (see `port()`). Throws
  /// Error(errc::invalid_argument) for an address that is not host:port or that cannot be
  /// listened on (taken, not local), Error(errc::already_started) when already serving.
  void serve(std::string address);

  /// The port `serve` listens on (the one picked for port 0); 0 before `serve`.
  int port() const;

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
  std::shared_ptr<Impl> impl_;
};

}  // namespace beehive
