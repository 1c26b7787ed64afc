#pragma once

/// The PostgreSQL store: beehive's objects, change log and events in one schema of a
/// PostgreSQL database, so that several processes (on several machines) can run one
/// control plane. Every process that opens the store and starts a Beehive on it serves
/// reads, writes and watches; exactly one of them, the leader, runs the controllers, the
/// garbage collector and the event-log sweeps (see `Beehive::is_leader`).
///
/// `open` connects, creates the schema when missing and migrates an older one forward; a
/// schema written by a newer build is refused (`errc::store`). Failures, a lost
/// connection included, throw `Error(errc::store)` with PostgreSQL's message; lost
/// connections are re-established on the next use (one the server ended while idle,
/// before it is used). A write whose COMMIT was interrupted by a lost connection is
/// resolved by reading back its write token before the caller is answered: it is
/// reported committed exactly when it did commit. Only when the database stays out of
/// reach for six connect timeouts does it fail with an `errc::store` whose message says
/// that its outcome is unknown; should it have committed, the process's watches and
/// controllers see it once the database answers again.
///
/// Writes from every process are serialised by a row lock on the store's version
/// counter, so resource versions commit in order everywhere and a watch never sees a
/// later version before an earlier one.
///
/// `open` may be called from any thread; the returned store is thread-safe.

#include <chrono>
#include <memory>
#include <string>

#include <beehive/store.hpp>

namespace beehive::postgres {

struct Options {
  /// The PostgreSQL schema holding beehive's tables; created when missing. Stores with
  /// different schemas on one database are independent control planes. At most 63
  /// bytes (PostgreSQL's limit); a longer or empty name, one starting with "pg_"
  /// (PostgreSQL's own) and "$user" (which a search path reads as the role's schema) are
  /// `errc::invalid_argument`. Default: "beehive".
  std::string schema = "beehive";
  /// Connections kept for readers (the writer and the change listener have their own);
  /// a reader waits when all are busy. Default: 4; values below 1 mean 1.
  int connections = 4;
  /// How long leadership lasts without renewal. The leader renews it every third of
  /// this; a standby takes over once it has expired. Default: 10 s.
  ///
  /// It also bounds how long one process can stall the others' writes: a write
  /// transaction left idle longer than this (its process paused, or cut off from the
  /// database) is ended by the server, and a write waits no longer than this for
  /// another process's transaction (`errc::store`). A `within` block must therefore not
  /// pause longer than the lease between its statements.
  ///
  /// At least 300 ms and at most 2 147 483 647 ms (about 24.8 days, PostgreSQL's limit
  /// on a timeout); outside that, `open` throws `errc::invalid_argument`.
  std::chrono::milliseconds lease{10000};
  /// How long a connection attempt to one host may take before it fails (`errc::store`),
  /// the session's set-up included; to the millisecond (a `connect_timeout` in `conninfo`
  /// has no effect). With several hosts in `conninfo`, each is tried in turn with a
  /// timeout of its own, as libpq does. Zero or less, or more than 2 147 483 647 ms, is
  /// `errc::invalid_argument`. Default: 5 s.
  std::chrono::milliseconds connect_timeout{5000};
};

/// Opens the store on the database `conninfo` names: a libpq connection string
/// ("host=/run/postgresql dbname=app") or URI ("postgresql://user@host/app").
std::shared_ptr<Store> open(std::string conninfo, Options options = {});

}  // namespace beehive::postgres
