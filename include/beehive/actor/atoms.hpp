#pragma once

/// Every atom of beehive's public actor interfaces, in one place (the private ones of
/// beehive's own actors live beside each actor, in src/actors/).
///
/// Compile-time constants: usable from any thread.

#include <caf/atom.hpp>

namespace beehive {

/// Subscribes an actor to the store_writer's commit records, and ends that.
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using unsubscribe_atom = caf::atom_constant<caf::atom("unsubscr")>;
/// Takes the pending changes of a pulled watch (see watch_request).
using pull_atom = caf::atom_constant<caf::atom("pull")>;
/// Asks a controller for an object's schedule.
using schedule_atom = caf::atom_constant<caf::atom("schedule")>;
/// Asks any of beehive's actors for a snapshot of its state.
using inspect_atom = caf::atom_constant<caf::atom("inspect")>;
/// Runs a garbage-collection pass now (gc).
using collect_atom = caf::atom_constant<caf::atom("collect")>;
/// Runs an event-retention sweep now (event_log).
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
/// Wakes an actor at a time of the beehive's clock (scheduler).
using wake_at_atom = caf::atom_constant<caf::atom("wake_at")>;
/// What the scheduler sends the actor a `wake_at_atom` named, when its time comes.
using wake_atom = caf::atom_constant<caf::atom("wake")>;

}  // namespace beehive
