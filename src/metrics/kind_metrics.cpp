#include "metrics/kind_metrics.hpp"

#include <algorithm>

namespace beehive::detail {

namespace {
double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

KindMetrics::KindMetrics(std::shared_ptr<MetricsSink> sink, const GroupKind& gk)
    : sink_(std::move(sink)), kind_{{"kind", to_string(gk)}} {
  auto with_result = [&](const char* r) {
    auto l = kind_;
    l.emplace_back("result", r);
    return l;
  };
  success_ = with_result("success");
  error_ = with_result("error");
  requeue_ = with_result("requeue");
}

void KindMetrics::reconciled(const Outcome& o, std::chrono::steady_clock::duration took) const {
  const MetricLabels* result = &success_;
  switch (o.kind) {
    case Outcome::cancelled:
      return;  // stop's doing, not the controller's
    case Outcome::error:
    case Outcome::quarantined:
    case Outcome::terminal_error:  // the metrics series names map it (result="terminal_error")
      result = &error_;
      break;  // quarantined: a terminal error
    case Outcome::success:
      if (o.requeue_after.count() > 0 || o.requeue_now) result = &requeue_;
      break;
    case Outcome::gone:
      break;
  }
  sink_->counter_add(metric::reconcile_total, *result, 1);
  sink_->histogram_observe(metric::reconcile_duration, kind_, seconds(took));
}

void KindMetrics::dequeued(Time::duration waited) const {
  sink_->histogram_observe(metric::workqueue_queue_duration, kind_,
                           seconds(std::max(waited, Time::duration::zero())));
}

void KindMetrics::retried() const { sink_->counter_add(metric::workqueue_retries_total, kind_, 1); }

void KindMetrics::queue_depth(std::size_t ids) const {
  sink_->gauge_set(metric::workqueue_depth, kind_, static_cast<double>(ids));
}

void KindMetrics::active_workers(std::size_t reconciles) const {
  sink_->gauge_set(metric::active_workers, kind_, static_cast<double>(reconciles));
}

}  // namespace beehive::detail
