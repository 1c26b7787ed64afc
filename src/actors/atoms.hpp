#pragma once

// The atoms of beehive's own actors, in one place: the messages the root, the
// controllers, the scheduler, the store_writer and the watch hub exchange among
// themselves. (The public atoms an application uses are in <beehive/actor/atoms.hpp>.)
// Compile-time constants: usable from any thread.

#include <caf/atom.hpp>

namespace beehive::detail {

// -- root ---------------------------------------------------------------------
/// Spawns the writer, the hub and the reader; answered once they serve.
using open_atom = caf::atom_constant<caf::atom("open")>;
/// Answered once no worker is left (reconciles that outlived stop's deadline included).
using await_workers_atom = caf::atom_constant<caf::atom("awaitwork")>;
/// The stop deadline passed: roll back a within block the writer still serves.
using stop_deadline_atom = caf::atom_constant<caf::atom("stopdead")>;

// -- scheduler ----------------------------------------------------------------
// wake_atom: public (<beehive/actor/atoms.hpp>), as beehive's own timers use it too.
using tick_atom = caf::atom_constant<caf::atom("tick")>;
/// Beehive's own timers: wake the actor at a time on the TimerClock. (The public
/// `wake_at_atom` takes a time of the Beehive's clock and is converted.)
using timer_at_atom = caf::atom_constant<caf::atom("timer_at")>;

// -- store_writer -------------------------------------------------------------
/// Quit once everything queued before it has been served.
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;
/// Writes are waiting in the WriteQueue: serve them (sent by the push that finds the
/// writer idle).
using serve_queue_atom = caf::atom_constant<caf::atom("servequeue")>;
/// Stop's deadline passed while a within block was open: the writer rolls it back, ends
/// the session and goes on with what waited for it (its shutdown above all).
using abort_session_atom = caf::atom_constant<caf::atom("abortsess")>;
/// The root retires one of beehive's own subscribers (`unsubscribe_atom` + an actor, the
/// public message, ends only an application's subscription).
using retire_atom = caf::atom_constant<caf::atom("retire")>;
/// Time to look for commits of other processes (see StoreWriterConfig::foreign_poll).
using poll_foreign_atom = caf::atom_constant<caf::atom("pollfor")>;
/// The store heard of other processes' commits (Backend::on_foreign_commit): publish
/// their notes now, without re-arming the poll.
using foreign_commit_atom = caf::atom_constant<caf::atom("foreign")>;
/// Run the next page of the retention sweep in progress (see StoreWriterState::sweeps).
using sweep_page_atom = caf::atom_constant<caf::atom("sweeppage")>;
/// Names the watch hub: it gets commit records only while it has watches (WatchHubFeed).
using hub_atom = caf::atom_constant<caf::atom("hub")>;

// -- controller ---------------------------------------------------------------
using start_atom = caf::atom_constant<caf::atom("start")>;
/// This process became the leader of the processes on its store (true), or stopped
/// being it (false): controllers, the gc and the event log take up or leave their work.
using leadership_atom = caf::atom_constant<caf::atom("leader")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using reconcile_atom = caf::atom_constant<caf::atom("reconcile")>;
/// A pass of a controller replaced meanwhile ended, and the id it held may run now (see
/// PassRegistry).
using released_atom = caf::atom_constant<caf::atom("released")>;

// -- hub_inbox ----------------------------------------------------------------
/// Tells the hub that its inbox holds something. Sent only when the inbox was empty, so
/// the hub's mailbox holds at most one, whatever the write rate.
using hub_wake_atom = caf::atom_constant<caf::atom("hubwake")>;

// -- record_inbox -------------------------------------------------------------
/// Tells a controller that its inbox holds something. Sent only when it was not woken
/// already, so the controller's mailbox holds at most one, whatever the write rate.
using records_atom = caf::atom_constant<caf::atom("records")>;

// -- settle -------------------------------------------------------------------
using settle_atom = caf::atom_constant<caf::atom("settle")>;

}  // namespace beehive::detail
