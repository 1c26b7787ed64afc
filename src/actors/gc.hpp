#pragma once

// The gc actor: decides when garbage collection runs; the store_writer runs it (one
// transaction: cascade deletion requests to the children of deletion-pending owners,
// then remove every deletion-pending object whose finalizers are gone and that nothing
// points at, repeating while that unblocks more).
//
// It runs at start, on the resync cadence, and promptly after commits that may unblock
// a collection: a deletion request, a finalizer removal, a physical removal, a removed
// edge. Triggers that arrive while a pass runs fold into one more pass; a pass that
// fails (the store busy or out of reach) is tried again after a second, backing off
// to the cadence, so that what it was to collect goes once the cause clears. A pass looks
// for children to cascade to only when a deletion was requested since the last one that
// did (or at start, on the cadence, on taking the lead): releasing a finalizer costs a
// pass that reads the collectible rows alone, however many owners wait. At start and on
// its cadence it also trims the change log to its retention. Event retention is the
// event_log's.

#include <memory>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <beehive/actors.hpp>

#include "actors/controller.hpp"
#include "actors/periodic.hpp"
#include "actors/scheduler.hpp"
#include "actors/settle.hpp"
#include "actors/store_writer.hpp"

namespace beehive::detail {

using gc_impl =
    gc_actor::extend<caf::reacts_to<start_atom>, caf::reacts_to<wake_atom>,
                     caf::reacts_to<leadership_atom, bool>, caf::reacts_to<commit_record>,
                     caf::reacts_to<shutdown_atom>, caf::replies_to<settle_atom>::with<bool>>;

struct GcState {
  // Not an aggregate: CAF would otherwise try to build the state from the self pointer.
  GcState() = default;

  Periodic periodic;
  Time next_wake = Time::max();  // when the periodic wake is due
  SettleWaiters settling;
  bool running = false;  // a pass is in flight
  bool again = false;    // triggered while in flight
  /// The next pass cascades: a deletion was requested since the last cascading pass
  /// began (or that pass failed, or the gc just started, woke or took the lead).
  bool cascade = true;
  trim_change_log_request log_retention;
  bool trimming = false;  // a change-log trim is in flight
  /// After a failed pass, the wait before the next try (doubling up to the cadence);
  /// zero once a pass succeeds.
  std::chrono::milliseconds retry{0};
  std::uint64_t passes = 0;
  static inline const char* name = "beehive.gc";
};

/// Whether a commit may have unblocked a collection: a deletion request, a finalizer
/// removed, an object or an edge removed (its writer subscription filter too).
bool gc_wants(const commit_record& rec);
/// Whether a commit may have left children to cascade to: a deletion request, or
/// other processes' changes that were lost.
bool gc_cascades(const commit_record& rec);

gc_impl::behavior_type gc(gc_impl::stateful_pointer<GcState> self, Periodic periodic,
                          trim_change_log_request log_retention);

}  // namespace beehive::detail
