#include "metrics/kind_metrics.hpp"

#include <algorithm>

namespace beehive::detail {

namespace {
double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

KindMetrics::KindMetrics(std::shared_ptr<MetricsSink> sink, const GroupKind& gk, int concurrency)
    : sink_(std::move(sink)),
      controller_{{"controller", to_string(gk)}},
      queue_{{"name", to_string(gk)}},
      kind_{{"kind", to_string(gk)}} {
  auto with_result = [&](const char* r) {
    auto l = controller_;
    l.emplace_back("result", r);
    return l;
  };
  success_ = with_result("success");
  error_ = with_result("error");
  requeue_ = with_result("requeue");
  requeue_after_ = with_result("requeue_after");

  // Every series exists from registration on, so that a dashboard shows 0 rather than
  // "no data", and an alert on a rate sees the first failure as a change from 0.
  auto& s = *sink_;
  for (auto* l : {&success_, &error_, &requeue_, &requeue_after_})
    s.declare(metric::reconcile_total, MetricType::counter, *l);
  s.declare(metric::reconcile_errors_total, MetricType::counter, controller_);
  s.declare(metric::terminal_reconcile_errors_total, MetricType::counter, controller_);
  s.declare(metric::reconcile_time, MetricType::histogram, controller_);
  s.declare(metric::max_concurrent_reconciles, MetricType::gauge, controller_);
  s.declare(metric::active_workers, MetricType::gauge, controller_);
  s.declare(metric::workqueue_depth, MetricType::gauge, queue_);
  s.declare(metric::workqueue_adds_total, MetricType::counter, queue_);
  s.declare(metric::workqueue_retries_total, MetricType::counter, queue_);
  s.declare(metric::workqueue_queue_duration, MetricType::histogram, queue_);
  s.declare(metric::workqueue_work_duration, MetricType::histogram, queue_);
  s.declare(metric::workqueue_unfinished_work, MetricType::gauge, queue_);
  s.declare(metric::workqueue_longest_running_processor, MetricType::gauge, queue_);
  s.declare(metric::objects, MetricType::gauge, kind_);
  s.declare(metric::unsettled_objects, MetricType::gauge, kind_);
  s.gauge_set(metric::max_concurrent_reconciles, controller_,
              static_cast<double>(std::max(concurrency, 1)));
}

void KindMetrics::reconciled(const Outcome& o, Steady::duration took) const {
  const MetricLabels* result = &success_;
  bool failed = false, terminal = false;
  switch (o.kind) {
    case Outcome::cancelled:
      return;  // stop's doing, not the controller's
    case Outcome::busy:
      return;  // not run
    case Outcome::error:
      result = &error_;
      failed = true;
      break;
    case Outcome::quarantined:  // not retried: a terminal error
    case Outcome::terminal_error:
      // An error to controller-runtime's dashboards too, counted apart as terminal.
      result = &error_;
      failed = terminal = true;
      break;
    case Outcome::success:
      if (o.requeue_after.count() > 0) result = &requeue_after_;
      if (o.requeue_now) result = &requeue_;
      break;
    case Outcome::gone:
      break;
  }
  sink_->counter_add(metric::reconcile_total, *result, 1);
  if (failed) sink_->counter_add(metric::reconcile_errors_total, controller_, 1);
  if (terminal) sink_->counter_add(metric::terminal_reconcile_errors_total, controller_, 1);
  sink_->histogram_observe(metric::reconcile_time, controller_, seconds(took));
}

void KindMetrics::added() const { sink_->counter_add(metric::workqueue_adds_total, queue_, 1); }

void KindMetrics::dequeued(Time::duration waited) const {
  sink_->histogram_observe(metric::workqueue_queue_duration, queue_,
                           seconds(std::max(waited, Time::duration::zero())));
}

void KindMetrics::work_started(ObjectID id, Steady::time_point at) const {
  sink_->work_started(queue_, id, at);
}

void KindMetrics::work_finished(ObjectID id, Steady::duration took) const {
  sink_->work_finished(queue_, id);
  sink_->histogram_observe(metric::workqueue_work_duration, queue_, seconds(took));
}

void KindMetrics::in_flight(double unfinished_seconds, double longest_seconds) const {
  sink_->gauge_set(metric::workqueue_unfinished_work, queue_, unfinished_seconds);
  sink_->gauge_set(metric::workqueue_longest_running_processor, queue_, longest_seconds);
}

void KindMetrics::retried() const {
  sink_->counter_add(metric::workqueue_retries_total, queue_, 1);
}

void KindMetrics::queue_depth(std::size_t ids) const {
  sink_->gauge_set(metric::workqueue_depth, queue_, static_cast<double>(ids));
}

void KindMetrics::active_workers(std::size_t reconciles) const {
  sink_->gauge_set(metric::active_workers, controller_, static_cast<double>(reconciles));
}

void KindMetrics::objects(std::size_t all, std::size_t unsettled) const {
  sink_->gauge_set(metric::objects, kind_, static_cast<double>(all));
  sink_->gauge_set(metric::unsettled_objects, kind_, static_cast<double>(unsettled));
}

}  // namespace beehive::detail
