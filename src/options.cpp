#include <beehive/options.hpp>

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
Option with_on_create(std::function<void(const Context&)> fn) {
  return Option([fn = std::move(fn)](OptionSet& s) { s.on_create.push_back(fn); });
}
Option with_resync_interval(std::chrono::milliseconds d) {
  return Option([d](OptionSet& s) { s.resync_interval = d; });
}
Option with_max_retry_interval(std::chrono::milliseconds d) {
  return Option([d](OptionSet& s) { s.max_retry_interval = d; });
}
Option with_migrator(std::shared_ptr<Migrator> m) {
  return Option([m = std::move(m)](OptionSet& s) { s.migrator = m; });
}
Option with_event_retention(int per_object, std::chrono::milliseconds max_age) {
  return Option([=](OptionSet& s) { s.event_retention.emplace(per_object, max_age); });
}
Option with_concurrency(int workers) {
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

RequeueOption with_reset_backoff() {
  return RequeueOption([](detail::RequeueSettings& s) { s.reset_backoff = true; });
}

}  // namespace beehive
