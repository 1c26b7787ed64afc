#pragma once

// KindMetrics: what one kind's controller and workers report to the MetricsSink, with
// the label sets built once at registration so that reporting allocates nothing.
// A kind without a sink has no KindMetrics at all: callers test a null pointer and do no
// other work (no clock reads).

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
  KindMetrics(std::shared_ptr<MetricsSink> sink, const GroupKind& gk);

  /// A finished pass: its result and its real elapsed time.
  void reconciled(const Outcome& o, std::chrono::steady_clock::duration took) const;
  /// An id taken by a worker after waiting `waited` (the Beehive's clock) in the queue.
  void dequeued(Time::duration waited) const;
  /// A failed pass armed a backoff retry.
  void retried() const;
  void queue_depth(std::size_t ids) const;
  void active_workers(std::size_t reconciles) const;

 private:
  std::shared_ptr<MetricsSink> sink_;
  MetricLabels kind_;
  MetricLabels success_, error_, requeue_;
};

}  // namespace beehive::detail
