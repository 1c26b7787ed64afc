#pragma once

// KindMetrics: what one kind's controller and workers report to the MetricsSink, with
// the label sets built once at registration so that reporting allocates nothing.
// A kind without a sink has no KindMetrics at all: callers test a null pointer and do no
// other work (no clock reads). Immutable after construction: the controller actor and the
// kind's workers call it at once (the sink is thread-safe).

#include <chrono>
#include <cstddef>
#include <memory>

#include <beehive/detail/controller_core.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/metrics.hpp>
#include <beehive/time.hpp>

namespace beehive::detail {

class KindMetrics {
 public:
  using Steady = std::chrono::steady_clock;

  /// Declares every series of the kind (at 0) and reports its `concurrency`.
  KindMetrics(std::shared_ptr<MetricsSink> sink, const GroupKind& gk, int concurrency);

  /// A finished pass (on the worker): its result and its real elapsed time.
  void reconciled(const Outcome& o, Steady::duration took) const;
  /// An id added to the work queue.
  void added() const;
  /// An id taken by a worker after waiting `waited` (the Beehive's clock) in the queue.
  void dequeued(Time::duration waited) const;
  /// A pass that began on its worker at `at`, and its end `took` later.
  void work_started(ObjectID id, Steady::time_point at) const;
  void work_finished(ObjectID id, Steady::duration took) const;
  /// The in-flight gauges: the summed and the longest running time of the passes in flight.
  void in_flight(double unfinished_seconds, double longest_seconds) const;
  /// A failed pass armed a backoff retry.
  void retried() const;
  void queue_depth(std::size_t ids) const;
  void active_workers(std::size_t reconciles) const;
  /// The kind's stored objects, and how many of them are unsettled.
  void objects(std::size_t all, std::size_t unsettled) const;

 private:
  std::shared_ptr<MetricsSink> sink_;
  MetricLabels controller_;  // {controller}
  MetricLabels queue_;       // {name}
  MetricLabels kind_;        // {kind}
  MetricLabels success_, error_, requeue_, requeue_after_;
};

}  // namespace beehive::detail
