#pragma once

// The series that belong to the Beehive rather than to a kind: the writer's commits
// (beehive_commit_seconds, beehive_group_commit_size), the watch hub's subscribers
// (beehive_watch_subscribers) and leadership (beehive_leader). Free functions on the
// sink, called where the events happen (the WriteEngine on the writer's thread, the
// watch hub actor, the leadership callback); the sink is thread-safe.

#include <chrono>
#include <cstddef>

#include <beehive/metrics.hpp>

namespace beehive::detail {

/// Declares the Beehive's own series (at 0); called once, when the Beehive is constructed.
void declare_store_metrics(MetricsSink& sink);
/// One committed write transaction: BEGIN to COMMIT, and how many requests it answered.
void report_commit(MetricsSink& sink, std::chrono::steady_clock::duration took,
                   std::size_t requests);
void report_watch_subscribers(MetricsSink& sink, std::size_t watches);
/// Whether this process runs and leads (beehive_leader).
void report_leader(MetricsSink& sink, bool leads);

}  // namespace beehive::detail
