#pragma once

// What options set, gathered by the call that receives them.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <beehive/context.hpp>
#include <beehive/options.hpp>

namespace beehive::detail {

struct OptionSet {
  std::optional<std::string> slug;
  std::vector<std::string> finalizers;
  std::optional<ObjectID> owner;
  Labels labels;
  std::optional<std::int64_t> resource_version;
  std::optional<std::pair<std::int64_t, std::chrono::milliseconds>> change_log_retention;
  std::vector<std::function<void(const Context&)>> on_create;
  std::optional<std::chrono::milliseconds> resync_interval;
  std::optional<std::chrono::milliseconds> max_retry_interval;
  std::shared_ptr<Migrator> migrator;
  std::optional<std::pair<int, std::chrono::milliseconds>> event_retention;
  std::optional<int> concurrency;
  std::shared_ptr<Clock> clock;
  Logger logger;
  std::shared_ptr<MetricsSink> metrics;
  std::optional<std::size_t> max_object_bytes;
  struct Backoff {
    std::chrono::milliseconds base, max;
    double jitter;
  };
  std::optional<Backoff> backoff;
  std::optional<std::pair<double, int>> rate_limit;  // per second, burst
  std::vector<GroupKind> owns;
  std::vector<std::pair<GroupKind, std::function<std::vector<ObjectID>(const ObjectMeta&)>>>
      watches;

  static OptionSet from(const std::vector<Option>& opts) {
    OptionSet s;
    for (auto& o : opts) o.apply(s);
    return s;
  }
};

}  // namespace beehive::detail
