// PrometheusMetrics: beehive's MetricsSink on a prometheus-cpp registry. prometheus-cpp
// keeps the series (atomic counters and gauges, locked histograms), serializes them
// (TextSerializer) and serves them (Exposer, on civetweb); this file maps the sink's
// name-and-labels calls onto its families and series, and computes the work queues'
// in-flight gauges when they are read.

#include <beehive/errors.hpp>
#include <beehive/metrics.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace beehive {

namespace {

/// HELP text for beehive's own names; other names get a generic line. prometheus-cpp
/// 1.0 writes HELP unescaped: these hold no backslash and no newline.
std::string help_of(std::string_view name) {
  static const std::map<std::string_view, std::string_view> help = {
      {metric::reconcile_total,
       "Reconcile passes per controller and result (success, error, requeue, requeue_after)."},
      {metric::reconcile_errors_total, "Reconcile passes that failed, per controller."},
      {metric::terminal_reconcile_errors_total,
       "Reconcile passes that failed and are not retried, per controller."},
      {metric::reconcile_time, "Duration of one reconcile pass in seconds (steady clock)."},
      {metric::max_concurrent_reconciles, "Workers of the controller."},
      {metric::active_workers, "Reconcile passes in flight per controller."},
      {metric::workqueue_depth, "Object ids waiting in the work queue."},
      {metric::workqueue_adds_total, "Object ids added to the work queue."},
      {metric::workqueue_retries_total, "Backoff retries armed after failed passes."},
      {metric::workqueue_queue_duration,
       "Seconds from an id's enqueue to a worker taking it (the Beehive's clock)."},
      {metric::workqueue_work_duration,
       "Seconds from a worker taking an id to the pass's end (steady clock)."},
      {metric::workqueue_unfinished_work,
       "Seconds of work in flight, summed over the passes in flight."},
      {metric::workqueue_longest_running_processor,
       "Seconds the longest-running pass in flight has been running."},
      {metric::objects, "Stored objects of the kind, deletion-pending ones included."},
      {metric::unsettled_objects,
       "Objects of the kind whose observed generation lags, or whose deletion was requested."},
      {metric::commit_seconds,
       "Duration of one committed write transaction, BEGIN to COMMIT, in seconds."},
      {metric::group_commit_size, "Requests answered by one committed write transaction."},
      {metric::watch_subscribers, "Object and event watches the watch hub serves."},
      {metric::leader, "1 while this process runs and leads the processes on its store."},
  };
  auto it = help.find(name);
  return std::string(it == help.end() ? std::string_view("Reported by beehive.") : it->second);
}

prometheus::Labels to_labels(const MetricLabels& labels) {
  return prometheus::Labels(labels.begin(), labels.end());
}

/// Bounds as the constructor promises them: ascending, unique, finite.
std::vector<double> clean(std::vector<double> b) {
  std::erase_if(b, [](double x) { return !std::isfinite(x); });
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

/// "host:port" with a port of 0..65535 and a non-empty host (a name or an IPv4 address);
/// "[v6]:port" too. Nothing else: the server underneath reads a comma as a list of
/// addresses, and a bare port in it as every interface.
bool valid_address(std::string_view a) {
  auto colon = a.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == a.size()) return false;
  auto host = a.substr(0, colon), port = a.substr(colon + 1);
  const bool v6 = host.front() == '[';
  if (v6) {
    if (host.back() != ']' || host.size() < 3) return false;
    host = host.substr(1, host.size() - 2);
  }
  auto allowed = [v6](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || (v6 ? c == ':' || c == '%' : c == '_');
  };
  if (!std::all_of(host.begin(), host.end(), allowed)) return false;
  unsigned value = 0;
  auto r = std::from_chars(port.data(), port.data() + port.size(), value);
  return r.ec == std::errc() && r.ptr == port.data() + port.size() && value <= 65535;
}

using Steady = std::chrono::steady_clock;

}  // namespace

struct PrometheusMetrics::Impl {
  /// One name's family; the series are prometheus-cpp's, never removed, so that their
  /// pointers stay valid outside the lock. A name Prometheus refused has no family.
  struct Family {
    MetricType type = MetricType::counter;
    prometheus::Family<prometheus::Counter>* counters = nullptr;
    prometheus::Family<prometheus::Gauge>* gauges = nullptr;
    prometheus::Family<prometheus::Histogram>* histograms = nullptr;
    std::vector<double> bounds;
    /// Null for a label set Prometheus refused.
    std::map<MetricLabels, void*, std::less<>> series;
  };

  /// What the Exposer collects: the in-flight gauges brought up to date, then the registry.
  struct Scrape : prometheus::Collectable {
    Impl* impl;
    explicit Scrape(Impl* i) : impl(i) {}
    std::vector<prometheus::MetricFamily> Collect() const override {
      impl->refresh_in_flight();
      return impl->registry->Collect();
    }
  };

  /// The bounds of every histogram in seconds, when the constructor was given them;
  /// otherwise each has its own (buckets_for).
  std::optional<std::vector<double>> seconds;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<Scrape> scrape = std::make_shared<Scrape>(this);

  mutable std::mutex mu;  // families
  std::map<std::string, Family, std::less<>> families;

  mutable std::mutex flight_mu;  // in_flight
  std::map<MetricLabels, std::unordered_map<std::int64_t, Steady::time_point>, std::less<>>
      in_flight;

  std::mutex serve_mu;
  std::unique_ptr<prometheus::Exposer> exposer;  // last: stops serving first
  int port = 0;

  ~Impl() {
    std::lock_guard lk(serve_mu);
    exposer.reset();  // no scrape runs past this point
  }

  Family* family(std::string_view name, MetricType type) {
    auto f = families.find(name);
    if (f == families.end()) {
      Family fam;
      fam.type = type;
      try {
        auto help = help_of(name);
        switch (type) {
          case MetricType::counter:
            fam.counters =
                &prometheus::BuildCounter().Name(std::string(name)).Help(help).Register(*registry);
            break;
          case MetricType::gauge:
            fam.gauges =
                &prometheus::BuildGauge().Name(std::string(name)).Help(help).Register(*registry);
            break;
          case MetricType::histogram:
            fam.histograms = &prometheus::BuildHistogram()
                                  .Name(std::string(name))
                                  .Help(help)
                                  .Register(*registry);
            fam.bounds =
                seconds && name != metric::group_commit_size ? *seconds : buckets_for(name);
            break;
        }
      } catch (const std::exception&) {  // a name Prometheus does not accept: ignored
      }
      f = families.emplace(std::string(name), std::move(fam)).first;
    }
    return f->second.type == type ? &f->second : nullptr;
  }

  /// The series, created at 0 on first use; null when the name is another type's or
  /// Prometheus refused the name or the labels.
  void* series(std::string_view name, const MetricLabels& labels, MetricType type) {
    std::lock_guard lk(mu);
    auto* f = family(name, type);
    if (!f) return nullptr;
    auto s = f->series.find(labels);
    if (s != f->series.end()) return s->second;
    void* made = nullptr;
    try {
      if (f->counters) made = &f->counters->Add(to_labels(labels));
      if (f->gauges) made = &f->gauges->Add(to_labels(labels));
      if (f->histograms)
        made = &f->histograms->Add(to_labels(labels),
                                   prometheus::Histogram::BucketBoundaries(f->bounds));
    } catch (const std::exception&) {  // a label name Prometheus does not accept
    }
    f->series.emplace(labels, made);
    return made;
  }

  /// Looks up without creating.
  const void* find(std::string_view name, const MetricLabels& labels, MetricType type) const {
    std::lock_guard lk(mu);
    auto f = families.find(name);
    if (f == families.end() || f->second.type != type) return nullptr;
    auto s = f->second.series.find(labels);
    return s == f->second.series.end() ? nullptr : s->second;
  }

  std::optional<MetricType> type_of(std::string_view name) const {
    std::lock_guard lk(mu);
    auto f = families.find(name);
    if (f == families.end()) return std::nullopt;
    return f->second.type;
  }

  void set_gauge(std::string_view name, const MetricLabels& labels, double v) {
    if (auto* g = static_cast<prometheus::Gauge*>(series(name, labels, MetricType::gauge)))
      g->Set(v);
  }

  /// workqueue_unfinished_work_seconds and workqueue_longest_running_processor_seconds of
  /// every queue that ever had work, as of now.
  void refresh_in_flight() {
    std::vector<std::tuple<MetricLabels, double, double>> values;
    {
      std::lock_guard lk(flight_mu);
      auto now = Steady::now();
      for (auto& [queue, passes] : in_flight) {
        double sum = 0, longest = 0;
        for (auto& [id, began] : passes) {
          double s = std::chrono::duration<double>(now - began).count();
          sum += s;
          longest = std::max(longest, s);
        }
        values.emplace_back(queue, sum, longest);
      }
    }
    for (auto& [queue, sum, longest] : values) {
      set_gauge(metric::workqueue_unfinished_work, queue, sum);
      set_gauge(metric::workqueue_longest_running_processor, queue, longest);
    }
  }
};

std::vector<double> PrometheusMetrics::default_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> PrometheusMetrics::size_buckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

std::vector<double> PrometheusMetrics::buckets_for(std::string_view name) {
  if (name == metric::group_commit_size) return size_buckets();
  // A commit takes tens of microseconds on SQLite, a millisecond or so on PostgreSQL:
  // Prometheus' defaults would put nearly every one in their first bucket.
  if (name == metric::commit_seconds)
    return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
            0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
  // client-go's work queue layout: 10 ns to 1000 s, ten times apart.
  if (name == metric::workqueue_queue_duration || name == metric::workqueue_work_duration) {
    std::vector<double> b;
    for (double x = 1e-8; b.size() < 12; x *= 10) b.push_back(x);
    return b;
  }
  // controller-runtime's reconcile_time layout: fine up to a second, then up to a minute.
  if (name == metric::reconcile_time)
    return {0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
            0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5,
            6,     7,    8,     9,    10,   15,   20,   25,   30,  40,   50,  60};
  return default_buckets();
}

PrometheusMetrics::PrometheusMetrics() : impl_(std::make_shared<Impl>()) {}

PrometheusMetrics::PrometheusMetrics(std::vector<double> buckets)
    : impl_(std::make_shared<Impl>()) {
  impl_->seconds = clean(std::move(buckets));
}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::counter_add(std::string_view name, const MetricLabels& labels,
                                    double delta) {
  if (auto* c = static_cast<prometheus::Counter*>(impl_->series(name, labels, MetricType::counter)))
    c->Increment(delta);  // prometheus-cpp ignores a negative delta
}

void PrometheusMetrics::gauge_set(std::string_view name, const MetricLabels& labels, double value) {
  impl_->set_gauge(name, labels, value);
}

void PrometheusMetrics::histogram_observe(std::string_view name, const MetricLabels& labels,
                                          double value) {
  if (auto* h =
          static_cast<prometheus::Histogram*>(impl_->series(name, labels, MetricType::histogram)))
    h->Observe(value);
}

void PrometheusMetrics::declare(std::string_view name, MetricType type,
                                const MetricLabels& labels) {
  impl_->series(name, labels, type);
}

void PrometheusMetrics::work_started(const MetricLabels& queue, std::int64_t id,
                                     std::chrono::steady_clock::time_point at) {
  std::lock_guard lk(impl_->flight_mu);
  auto it = impl_->in_flight.find(queue);
  if (it == impl_->in_flight.end())
    it = impl_->in_flight.emplace(queue, decltype(it->second){}).first;
  it->second[id] = at;
}

void PrometheusMetrics::work_finished(const MetricLabels& queue, std::int64_t id) {
  std::lock_guard lk(impl_->flight_mu);
  auto it = impl_->in_flight.find(queue);
  if (it != impl_->in_flight.end()) it->second.erase(id);
}

std::string PrometheusMetrics::text() const {
  auto families = impl_->scrape->Collect();
  std::sort(families.begin(), families.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  auto key = [](const prometheus::ClientMetric& m) {
    std::vector<std::pair<std::string, std::string>> k;
    for (auto& l : m.label) k.emplace_back(l.name, l.value);
    return k;
  };
  for (auto& f : families)
    std::sort(f.metric.begin(), f.metric.end(),
              [&](const auto& a, const auto& b) { return key(a) < key(b); });
  return prometheus::TextSerializer().Serialize(families);
}

void PrometheusMetrics::serve(std::string address) {
  if (!valid_address(address))
    throw Error(errc::invalid_argument,
                "metrics address \"" + address + "\" is not host:port (like 127.0.0.1:9464)");
  std::lock_guard lk(impl_->serve_mu);
  if (impl_->exposer) throw Error(errc::already_started, "PrometheusMetrics already serves");
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(impl_->scrape);
    auto ports = exposer->GetListeningPorts();
    impl_->port = ports.empty() ? 0 : ports.front();
    impl_->exposer = std::move(exposer);
  } catch (const std::exception& e) {
    throw Error(errc::invalid_argument, "cannot serve metrics on " + address +
                                            " (taken, or not an address of this " +
                                            "host?): " + e.what());
  }
}

int PrometheusMetrics::port() const {
  std::lock_guard lk(impl_->serve_mu);
  return impl_->port;
}

double PrometheusMetrics::value(std::string_view name, const MetricLabels& labels) const {
  auto type = impl_->type_of(name);
  if (type == MetricType::counter)
    if (auto* c = static_cast<const prometheus::Counter*>(impl_->find(name, labels, *type)))
      return c->Value();
  if (type == MetricType::gauge)
    if (auto* g = static_cast<const prometheus::Gauge*>(impl_->find(name, labels, *type)))
      return g->Value();
  return 0;
}

PrometheusMetrics::Histogram PrometheusMetrics::histogram(std::string_view name,
                                                          const MetricLabels& labels) const {
  auto* h =
      static_cast<const prometheus::Histogram*>(impl_->find(name, labels, MetricType::histogram));
  if (!h) return {};
  auto m = h->Collect().histogram;
  Histogram out;
  out.count = m.sample_count;
  out.sum = m.sample_sum;
  std::uint64_t below = 0;
  for (auto& b : m.bucket) {
    if (std::isinf(b.upper_bound)) break;  // +Inf: the count
    out.buckets.push_back(b.cumulative_count - below);
    below = b.cumulative_count;
  }
  return out;
}

}  // namespace beehive
