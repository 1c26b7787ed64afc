#include "metrics/store_metrics.hpp"

namespace beehive::detail {

namespace {
const MetricLabels none;
}  // namespace

void declare_store_metrics(MetricsSink& sink) {
  sink.declare(metric::commit_seconds, MetricType::histogram, none);
  sink.declare(metric::group_commit_size, MetricType::histogram, none);
  sink.declare(metric::watch_subscribers, MetricType::gauge, none);
  sink.declare(metric::leader, MetricType::gauge, none);
}

void report_commit(MetricsSink& sink, std::chrono::steady_clock::duration took,
                   std::size_t requests) {
  sink.histogram_observe(metric::commit_seconds, none, std::chrono::duration<double>(took).count());
  sink.histogram_observe(metric::group_commit_size, none, static_cast<double>(requests));
}

void report_watch_subscribers(MetricsSink& sink, std::size_t watches) {
  sink.gauge_set(metric::watch_subscribers, none, static_cast<double>(watches));
}

void report_leader(MetricsSink& sink, bool leads) {
  sink.gauge_set(metric::leader, none, leads ? 1 : 0);
}

}  // namespace beehive::detail
