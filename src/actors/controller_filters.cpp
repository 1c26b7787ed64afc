// What wakes a kind's controller: which committed changes it reconciles (its own
// creates, spec changes and deletion requests, changes of objects it owns or watches)
// and, from that, its subscription filter on the writer's commit records; and how a
// kind's settings are read from the options. Pure functions: any thread.

#include <algorithm>
#include <tuple>

#include "actors/controller.hpp"
#include "options_internal.hpp"

namespace beehive::detail {

void KindSettings::apply(const OptionSet& s, bool kind_level) {
  if (s.backoff) {
    base_retry = s.backoff->base;
    max_retry = s.backoff->max;
    jitter = s.backoff->jitter;
  }
  if (s.max_retry_interval && s.max_retry_interval->count() > 0) max_retry = *s.max_retry_interval;
  if (s.rate_limit) std::tie(rate, burst) = *s.rate_limit;
  if (!kind_level) return;
  owns.insert(owns.end(), s.owns.begin(), s.owns.end());
  watches.insert(watches.end(), s.watches.begin(), s.watches.end());
}

bool wakes_controller(const GroupKind& gk, const object_change& c) {
  constexpr unsigned wakes = object_change::created | object_change::spec | object_change::deletion;
  return (c.parts & wakes) && c.row.meta.group == gk.group && c.row.meta.kind == gk.kind;
}

namespace {
bool of_kind(const ObjectMeta& m, const GroupKind& gk) {
  return m.group == gk.group && m.kind == gk.kind;
}
}  // namespace

bool wakes_owner(const GroupKind& gk, const KindSettings& s, const object_change& c) {
  return c.owner && c.owner->group == gk.group && c.owner->kind == gk.kind &&
         std::any_of(s.owns.begin(), s.owns.end(),
                     [&](const GroupKind& child) { return of_kind(c.row.meta, child); });
}

bool watched(const KindSettings& s, const object_change& c) {
  return std::any_of(s.watches.begin(), s.watches.end(),
                     [&](const auto& w) { return of_kind(c.row.meta, w.first); });
}

bool controller_wants(const GroupKind& gk, const KindSettings& s, const commit_record& rec,
                      bool counts_objects) {
  constexpr unsigned counted = object_change::created | object_change::spec |
                               object_change::status | object_change::deletion |
                               object_change::removed;
  return rec.lost_through > 0 ||
         std::any_of(rec.changes.begin(), rec.changes.end(),
                     [&](const object_change& c) {
                       return wakes_controller(gk, c) || wakes_owner(gk, s, c) || watched(s, c) ||
                              ((c.parts & object_change::removed) && of_kind(c.row.meta, gk)) ||
                              (counts_objects && (c.parts & counted) && of_kind(c.row.meta, gk));
                     }) ||
         std::any_of(rec.wakes.begin(), rec.wakes.end(),
                     [&](const Ref& r) { return r.group == gk.group && r.kind == gk.kind; }) ||
         std::any_of(rec.requeues.begin(), rec.requeues.end(),
                     [&](const Ref& r) { return r.group == gk.group && r.kind == gk.kind; });
}

}  // namespace beehive::detail
