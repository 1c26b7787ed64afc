#include "store/event_sweep.hpp"

#include <algorithm>

#include "store/age_cutoff.hpp"

namespace beehive::store {

std::optional<event_retention> retention_for(const trim_events_request& policy,
                                             const GroupKind& gk) {
  auto it = std::find_if(policy.retention.begin(), policy.retention.end(),
                         [&](auto& p) { return p.first == gk; });
  return it != policy.retention.end() ? std::optional(it->second) : policy.fallback;
}

namespace {

bool same(const event_retention& a, const event_retention& b) {
  return a.per_object == b.per_object && a.max_age == b.max_age;
}

}  // namespace

bool same_policy(const trim_events_request& a, const trim_events_request& b) {
  if (a.fallback.has_value() != b.fallback.has_value() ||
      (a.fallback && !same(*a.fallback, *b.fallback)) || a.retention.size() != b.retention.size())
    return false;
  for (std::size_t i = 0; i < a.retention.size(); ++i)
    if (a.retention[i].first != b.retention[i].first ||
        !same(a.retention[i].second, b.retention[i].second))
      return false;
  return true;
}

bool has_count_bound(const trim_events_request& policy) {
  if (policy.fallback && policy.fallback->per_object > 0) return true;
  return std::any_of(policy.retention.begin(), policy.retention.end(),
                     [](auto& p) { return p.second.per_object > 0; });
}

bool continues(const EventSweepMark& mark, const trim_events_request& policy) {
  return mark.high_water >= 0 && same_policy(mark.policy, policy);
}

std::optional<Time> latest_age_cutoff(const trim_events_request& policy, Time now) {
  std::optional<Time> latest;
  auto consider = [&](const std::optional<event_retention>& r) {
    if (!r || r->max_age.count() <= 0) return;
    auto cut = age_cutoff(now, r->max_age);
    if (!latest || cut > *latest) latest = cut;
  };
  consider(policy.fallback);
  for (auto& [gk, r] : policy.retention) consider(r);
  return latest;
}

}  // namespace beehive::store
