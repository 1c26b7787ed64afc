#pragma once

// The event_log actor: owns the event timelines' upkeep. It sweeps retention at start
// and on the resync cadence (each sweep one store_writer transaction), answers the actor
// surface's event messages (record_event_request and list_events_request, delegated to
// the store_writer so they run in commit order with every other write) and counts the
// runs started and extended, from the commit records of every event write however it
// reached the store.
//
// Run aggregation itself (extend the category's current run or start a new one) runs
// inside the store_writer's transaction: reading the current run and writing it is one
// step, so it composes with `within` and with the writes grouped around it. Blocking
// callers (ControllerClient::record_event) go to the writer directly, one hand-off like
// every blocking write.

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

using event_log_impl =
    event_log_actor::extend<caf::reacts_to<start_atom>, caf::reacts_to<wake_atom>,
                            caf::reacts_to<leadership_atom, bool>, caf::reacts_to<commit_record>,
                            caf::replies_to<settle_atom>::with<bool>>;

struct EventLogState {
  // Not an aggregate: CAF would otherwise try to build the state from the self pointer.
  EventLogState() = default;
  /// Answers the sweep callers it still holds: stopped (CAF 0.17 answers no promise an
  /// actor dies holding).
  ~EventLogState();

  Periodic periodic;
  Time next_wake = Time::max();  // when the periodic wake is due
  SettleWaiters settling;
  trim_events_request policy;
  event_log_state counts;
  std::vector<caf::typed_response_promise<int>> waiting;    // sweep_atom callers, next sweep
  std::vector<caf::typed_response_promise<int>> swept_for;  // those the sweep running answers
  bool again = false;                                       // a sweep was asked for while one ran
  static inline const char* name = "beehive.event_log";
};

/// Whether a commit wrote an event run (the event_log's writer subscription filter).
bool has_event_runs(const commit_record& rec);

event_log_impl::behavior_type event_log(event_log_impl::stateful_pointer<EventLogState> self,
                                        Periodic periodic, trim_events_request policy);

}  // namespace beehive::detail
