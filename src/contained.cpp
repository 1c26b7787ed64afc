#include "contained.hpp"

namespace beehive::detail {

namespace {

class ContainedSink final : public MetricsSink {
 public:
  explicit ContainedSink(std::shared_ptr<MetricsSink> sink) : sink_(std::move(sink)) {}
  void counter_add(std::string_view name, const MetricLabels& labels, double delta) override {
    try {
      sink_->counter_add(name, labels, delta);
    } catch (...) {
    }
  }
  void gauge_set(std::string_view name, const MetricLabels& labels, double value) override {
    try {
      sink_->gauge_set(name, labels, value);
    } catch (...) {
    }
  }
  void histogram_observe(std::string_view name, const MetricLabels& labels, double value) override {
    try {
      sink_->histogram_observe(name, labels, value);
    } catch (...) {
    }
  }
  void declare(std::string_view name, MetricType type, const MetricLabels& labels) override {
    try {
      sink_->declare(name, type, labels);
    } catch (...) {
    }
  }
  void work_started(const MetricLabels& queue, std::int64_t id,
                    std::chrono::steady_clock::time_point at) override {
    try {
      sink_->work_started(queue, id, at);
    } catch (...) {
    }
  }
  void work_finished(const MetricLabels& queue, std::int64_t id) override {
    try {
      sink_->work_finished(queue, id);
    } catch (...) {
    }
  }

 private:
  std::shared_ptr<MetricsSink> sink_;
};

}  // namespace

Logger contained(Logger logger) {
  if (!logger) return logger;
  return [l = std::move(logger)](LogLevel level, std::string_view message,
                                 const LogFields& fields) noexcept {
    try {
      l(level, message, fields);
    } catch (...) {
    }
  };
}

std::shared_ptr<MetricsSink> contained(std::shared_ptr<MetricsSink> sink) {
  if (!sink) return sink;
  return std::make_shared<ContainedSink>(std::move(sink));
}

}  // namespace beehive::detail
