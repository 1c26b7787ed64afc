#pragma once

// Event retention's sweep: what one sweep leaves the next, so that a sweep with nothing
// new to trim reads the runs written since instead of every run; and where a sweep
// spanning several transactions stands, so that writes wait behind one page of it, not
// behind all of it.
//
// Plain data and pure functions: safe on any thread (the page size is an atomic).

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

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

/// About how many runs one transaction of a sweep reads for the count bound, or removes
/// for the age bound. A sweep with more to do commits a page and lets queued writes go
/// before the next. Tests lower it to see a sweep span pages.
inline std::atomic<int> event_sweep_page_runs{10000};

/// A sweep in progress, one page per transaction. The count bound goes through the
/// runs a page at a time: a sweep that looks at every pair in object id order (a page
/// ends after about a page's runs, all of its last object's), one that continues from a
/// mark in version order (the pairs with a run in the page's versions, up to
/// `high_water`). Then the age bound goes through the kinds with runs too old, oldest
/// first, a page's runs at a time. A run written meanwhile may be left to the next sweep,
/// never lost to it: its version is above `high_water`.
struct EventSweep {
  trim_events_request policy;
  /// The (object, category) pairs it looks at for the count bound: those with a run
  /// above this version (-1: all).
  std::int64_t since = -1;
  /// The highest run version before its first page: the mark it leaves.
  std::optional<std::int64_t> high_water;
  /// The count bound is done up to this object id (every pair) or version (since >= 0).
  std::int64_t after = 0;
  bool counted = false;
  /// The kinds whose too-old runs are still to go, the last first (listed once
  /// `counted`); its runs last written up to `aged_after` are gone.
  std::optional<std::vector<GroupKind>> aging;
  Time aged_after = Time::min();
  bool done = false;
};

/// Whether `policy` bounds some kind's runs by count.
bool has_count_bound(const trim_events_request& policy);
/// Whether `a` and `b` keep the same runs.
bool same_policy(const trim_events_request& a, const trim_events_request& b);
/// Whether a sweep under `policy` can continue from `mark`.
bool continues(const EventSweepMark& mark, const trim_events_request& policy);
/// The latest time before which some kind's runs are too old under `policy`; nothing
/// when it has no age bound.
std::optional<Time> latest_age_cutoff(const trim_events_request& policy, Time now);
/// The retention of `gk`'s events under `policy` (its own, else the fallback).
std::optional<event_retention> retention_for(const trim_events_request& policy,
                                             const GroupKind& gk);

}  // namespace beehive::store
