#include "store/event_sweep_mark.hpp"

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

bool continues(const EventSweepMark& mark, const trim_events_request& policy) {
  auto& was = mark.policy;
  if (mark.high_water < 0 || was.fallback.has_value() != policy.fallback.has_value() ||
      (policy.fallback && !same(*was.fallback, *policy.fallback)) ||
      was.retention.size() != policy.retention.size())
    return false;
  for (std::size_t i = 0; i < policy.retention.size(); ++i)
    if (was.retention[i].first != policy.retention[i].first ||
        !same(was.retention[i].second, policy.retention[i].second))
      return false;
  return true;
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
