// PrometheusMetrics: in-memory series and the Prometheus text exposition format.

#include <beehive/metrics.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>

namespace beehive {

namespace {

enum class Type { counter, gauge, histogram };

const char* type_name(Type t) {
  switch (t) {
    case Type::counter:
      return "counter";
    case Type::gauge:
      return "gauge";
    case Type::histogram:
      return "histogram";
  }
  return "untyped";
}

/// HELP text for beehive's own names; other names get a generic line.
std::string_view help_of(std::string_view name) {
  static const std::map<std::string_view, std::string_view> help = {
      {metric::reconcile_total, "Reconcile passes per kind and result (success, error, requeue)."},
      {metric::reconcile_duration, "Duration of one reconcile pass in seconds (steady clock)."},
      {metric::workqueue_depth, "Object ids waiting in the kind's work queue."},
      {metric::workqueue_queue_duration,
       "Seconds from an id's enqueue to a worker taking it (the Beehive's clock)."},
      {metric::workqueue_retries_total, "Backoff retries armed after failed reconciles."},
      {metric::active_workers, "Reconciles in flight per kind."},
      {metric::store_transactions_total, "Committed store write transactions."},
      {metric::store_write_duration,
       "Duration of one committed write transaction, BEGIN to COMMIT, in seconds."},
  };
  auto it = help.find(name);
  return it == help.end() ? std::string_view("Reported by beehive.") : it->second;
}

/// A sample value as Prometheus reads it: shortest round-trip decimal, +Inf, -Inf, NaN.
void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
}

/// `{k="v",...}` with `extra` (le="...") appended; nothing for no labels at all.
void append_labels(std::string& out, const MetricLabels& labels,
                   const std::pair<std::string_view, std::string>* extra = nullptr) {
  if (labels.empty() && !extra) return;
  out += '{';
  bool first = true;
  auto one = [&](std::string_view k, std::string_view v) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    append_escaped(out, v, true);
    out += '"';
  };
  for (auto& [k, v] : labels) one(k, v);
  if (extra) one(extra->first, extra->second);
  out += '}';
}

struct Series {
  double value = 0;  // counter, gauge
  PrometheusMetrics::Histogram hist;
};

struct Family {
  Type type;
  std::map<MetricLabels, Series, std::less<>> series;
};

}  // namespace

struct PrometheusMetrics::Impl {
  std::vector<double> bounds;
  mutable std::mutex mu;
  std::map<std::string, Family, std::less<>> families;

  /// The series, created on first use; a name reported as another type is ignored
  /// (null), since one exposition cannot hold both.
  Series* series(std::string_view name, const MetricLabels& labels, Type type) {
    auto f = families.find(name);
    if (f == families.end()) f = families.emplace(std::string(name), Family{type, {}}).first;
    if (f->second.type != type) return nullptr;
    auto s = f->second.series.find(labels);
    if (s == f->second.series.end()) {
      s = f->second.series.emplace(labels, Series{}).first;
      if (type == Type::histogram) s->second.hist.buckets.assign(bounds.size(), 0);
    }
    return &s->second;
  }

  const Series* find(std::string_view name, const MetricLabels& labels) const {
    auto f = families.find(name);
    if (f == families.end()) return nullptr;
    auto s = f->second.series.find(labels);
    return s == f->second.series.end() ? nullptr : &s->second;
  }
};

std::vector<double> PrometheusMetrics::default_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

PrometheusMetrics::PrometheusMetrics(std::vector<double> buckets)
    : impl_(std::make_unique<Impl>()) {
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  std::erase_if(buckets, [](double b) { return std::isinf(b) || std::isnan(b); });
  impl_->bounds = std::move(buckets);
}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::counter_add(std::string_view name, const MetricLabels& labels,
                                    double delta) {
  std::lock_guard lk(impl_->mu);
  if (auto* s = impl_->series(name, labels, Type::counter)) s->value += delta;
}

void PrometheusMetrics::gauge_set(std::string_view name, const MetricLabels& labels, double value) {
  std::lock_guard lk(impl_->mu);
  if (auto* s = impl_->series(name, labels, Type::gauge)) s->value = value;
}

void PrometheusMetrics::histogram_observe(std::string_view name, const MetricLabels& labels,
                                          double value) {
  // The bucket is found before taking the lock: the bounds never change.
  auto& b = impl_->bounds;
  auto bucket = static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), value) - b.begin());
  std::lock_guard lk(impl_->mu);
  auto* s = impl_->series(name, labels, Type::histogram);
  if (!s) return;
  ++s->hist.count;
  s->hist.sum += value;
  if (bucket < s->hist.buckets.size()) ++s->hist.buckets[bucket];  // else only +Inf
}

double PrometheusMetrics::value(std::string_view name, const MetricLabels& labels) const {
  std::lock_guard lk(impl_->mu);
  auto* s = impl_->find(name, labels);
  return s ? s->value : 0;
}

PrometheusMetrics::Histogram PrometheusMetrics::histogram(std::string_view name,
                                                          const MetricLabels& labels) const {
  std::lock_guard lk(impl_->mu);
  auto* s = impl_->find(name, labels);
  return s ? s->hist : Histogram{};
}

std::string PrometheusMetrics::text() const {
  std::string out;
  std::lock_guard lk(impl_->mu);
  for (auto& [name, family] : impl_->families) {
    out += "# HELP ";
    out += name;
    out += ' ';
    append_escaped(out, help_of(name), false);
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type_name(family.type);
    out += '\n';
    for (auto& [labels, s] : family.series) {
      if (family.type != Type::histogram) {
        out += name;
        append_labels(out, labels);
        out += ' ';
        append_number(out, s.value);
        out += '\n';
        continue;
      }
      std::uint64_t cumulative = 0;
      // Structured bindings are captured through references: clang 14 cannot capture them.
      auto bucket_line = [&out, &name = name, &labels = labels](std::string le, std::uint64_t n) {
        std::pair<std::string_view, std::string> extra{"le", std::move(le)};
        out += name;
        out += "_bucket";
        append_labels(out, labels, &extra);
        out += ' ';
        out += std::to_string(n);
        out += '\n';
      };
      for (std::size_t i = 0; i < impl_->bounds.size(); ++i) {
        cumulative += s.hist.buckets[i];
        std::string le;
        append_number(le, impl_->bounds[i]);
        bucket_line(std::move(le), cumulative);
      }
      bucket_line("+Inf", s.hist.count);
      out += name;
      out += "_sum";
      append_labels(out, labels);
      out += ' ';
      append_number(out, s.hist.sum);
      out += '\n';
      out += name;
      out += "_count";
      append_labels(out, labels);
      out += ' ';
      out += std::to_string(s.hist.count);
      out += '\n';
    }
  }
  return out;
}

}  // namespace beehive
