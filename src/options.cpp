#include <beehive/options.hpp>

#include <beehive/errors.hpp>

#include <cmath>

#include "contained.hpp"
#include "options_internal.hpp"

namespace beehive {

using detail::OptionSet;

Option with_slug(std::string slug) {
  return Option([slug = std::move(slug)](OptionSet& s) { s.slug = slug; });
}
Option with_finalizers(std::vector<std::string> finalizers) {
  return Option([f = std::move(finalizers)](OptionSet& s) {
    s.finalizers.insert(s.finalizers.end(), f.begin(), f.end());
  });
}
Option with_owner(ObjectID owner) {
  return Option([owner](OptionSet& s) { s.owner = owner; });
}
Option with_labels(Labels labels) {
  return Option([labels = std::move(labels)](OptionSet& s) { s.labels = labels; });
}
Option with_resource_version(std::int64_t rv) {
  return Option([rv](OptionSet& s) { s.resource_version = rv; });
}
Option with_change_log_retention(std::int64_t entries, std::chrono::milliseconds max_age) {
  return Option([=](OptionSet& s) { s.change_log_retention = {entries, max_age}; });
}
Option with_on_create(std::function<void(const Context&)> fn) {
  if (!fn) throw Error(errc::invalid_argument, "with_on_create needs a callback, not an empty one");
  return Option([fn = std::move(fn)](OptionSet& s) { s.on_create.push_back(fn); });
}
Option with_resync_interval(std::chrono::milliseconds d) {
  return Option([d](OptionSet& s) { s.resync_interval = d; });
}
Option with_max_retry_interval(std::chrono::milliseconds d) {
  return Option([d](OptionSet& s) { s.max_retry_interval = d; });
}
Option with_backoff(std::chrono::milliseconds base, std::chrono::milliseconds max, double jitter) {
  if (base.count() <= 0 || max < base)
    throw Error(errc::invalid_argument, "with_backoff needs 0 < base <= max");
  if (!(jitter >= 0 && jitter < 1))  // NaN included
    throw Error(errc::invalid_argument, "with_backoff needs 0 <= jitter < 1");
  return Option([=](OptionSet& s) {
    s.backoff = OptionSet::Backoff{base, max, jitter};
    s.max_retry_interval.reset();  // the later option wins
  });
}
Option with_rate_limit(double per_second, int burst) {
  if (!(per_second > 0) || !std::isfinite(per_second) || burst < 1)
    throw Error(errc::invalid_argument,
                "with_rate_limit needs a finite per_second > 0 and burst >= 1");
  return Option([=](OptionSet& s) { s.rate_limit.emplace(per_second, burst); });
}
Option with_owns(GroupKind child) {
  return Option([gk = std::move(child)](OptionSet& s) { s.owns.push_back(gk); });
}
Option with_watches(GroupKind other, std::function<std::vector<ObjectID>(const ObjectMeta&)> map) {
  if (!map) throw Error(errc::invalid_argument, "with_watches needs a map function");
  return Option([gk = std::move(other), map = std::move(map)](OptionSet& s) {
    s.watches.emplace_back(gk, map);
  });
}
Option with_migrator(std::shared_ptr<Migrator> m) {
  return Option([m = std::move(m)](OptionSet& s) { s.migrator = m; });
}
Option with_event_retention(int per_object, std::chrono::milliseconds max_age) {
  return Option([=](OptionSet& s) { s.event_retention.emplace(per_object, max_age); });
}
Option with_concurrency(int workers) {
  // Each worker is a thread: tens of thousands would exhaust the process's threads.
  if (workers > max_concurrency)
    throw Error(errc::invalid_argument, "with_concurrency: at most " +
                                            std::to_string(max_concurrency) + " workers (got " +
                                            std::to_string(workers) + ")");
  return Option([workers](OptionSet& s) { s.concurrency = workers < 1 ? 1 : workers; });
}
Option with_clock(std::shared_ptr<Clock> clock) {
  return Option([c = std::move(clock)](OptionSet& s) { s.clock = c; });
}

Option with_logger(Logger logger) {
  return Option([l = detail::contained(std::move(logger))](OptionSet& s) { s.logger = l; });
}

Option with_metrics(std::shared_ptr<MetricsSink> sink) {
  return Option([m = detail::contained(std::move(sink))](OptionSet& s) { s.metrics = m; });
}

Option with_max_object_bytes(std::size_t bytes) {
  return Option([bytes](OptionSet& s) { s.max_object_bytes = bytes; });
}

LoadOption load_owner() { return LoadOption(LoadOption::owner); }
LoadOption load_dependencies() { return LoadOption(LoadOption::dependencies); }
LoadOption load_dependents() { return LoadOption(LoadOption::dependents); }
LoadOption load_owned() { return LoadOption(LoadOption::owned); }
LoadOption load_events() { return LoadOption(LoadOption::events); }

using detail::EventQuery;

EventOption with_event_category(std::string category) {
  return EventOption([c = std::move(category)](EventQuery& q) { q.category = c; });
}
EventOption with_event_type(EventType type) {
  return EventOption([type](EventQuery& q) { q.type = type; });
}
EventOption with_event_reason(std::string reason) {
  return EventOption([r = std::move(reason)](EventQuery& q) { q.reason = r; });
}
EventOption with_event_limit(int n) {
  return EventOption([n](EventQuery& q) { q.limit = n; });
}
EventOption with_events_since(Time t) {
  return EventOption([t](EventQuery& q) { q.since = t; });
}

ReadOption with_selector(std::string_view selector) {
  return ReadOption([text = std::string(selector)](detail::ReadSettings& s) { s.selector = text; });
}
ReadOption with_resume_from(std::int64_t rv) {
  return ReadOption([rv](detail::ReadSettings& s) { s.resume_from = rv; });
}

RequeueOption with_reset_backoff() {
  return RequeueOption([](detail::RequeueSettings& s) { s.reset_backoff = true; });
}

}  // namespace beehive
