#pragma once

// Event retention's incremental sweep: what one sweep leaves the next, so that a sweep
// with nothing new to trim reads the runs written since instead of every run.
//
// Plain data and pure functions: safe on any thread.

#include <cstdint>
#include <optional>

#include <beehive/actor/requests.hpp>
#include <beehive/time.hpp>

namespace beehive::store {

/// What an event-retention sweep leaves the next one: the policy it applied and the
/// highest run version it saw. Only a run written above that can put an (object,
/// category) over its count bound again, so the next sweep under the same policy looks
/// at those pairs only; a sweep without a mark (the first of a process, or of a new
/// policy) looks at every pair.
struct EventSweepMark {
  trim_events_request policy;
  std::int64_t high_water = -1;
};

/// Whether a sweep under `policy` can continue from `mark`.
bool continues(const EventSweepMark& mark, const trim_events_request& policy);
/// The latest time before which some kind's runs are too old under `policy`; nothing
/// when it has no age bound.
std::optional<Time> latest_age_cutoff(const trim_events_request& policy, Time now);
/// The retention of `gk`'s events under `policy` (its own, else the fallback).
std::optional<event_retention> retention_for(const trim_events_request& policy,
                                             const GroupKind& gk);

}  // namespace beehive::store
