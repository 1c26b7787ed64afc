#pragma once

// User callbacks that beehive calls from its own threads (the logger, the metrics sink)
// may throw. Wrapped here, once, where the options take them: a throw is swallowed, so
// that a faulty logger or sink can never take down an actor, a reconcile or a write
// that has already committed.

#include <memory>

#include <beehive/logger.hpp>
#include <beehive/metrics.hpp>

namespace beehive::detail {

/// `logger`, never throwing (null stays null).
Logger contained(Logger logger);
/// `sink`, never throwing (null stays null).
std::shared_ptr<MetricsSink> contained(std::shared_ptr<MetricsSink> sink);

}  // namespace beehive::detail
