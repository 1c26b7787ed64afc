#pragma once

// The store_writer actor: owner of the write connection. Outside a transaction
// session each write is its own transaction; it replies after the commit and then
// publishes a commit_record to its subscribers.
//
// A `within` block opens a session: until it commits or rolls back, the writer serves
// only that session's writes (each in a savepoint, so a failing one rolls back alone)
// and defers everything else, in arrival order. Changes made in a session are
// published once, after the outermost commit, and never after a rollback.
//
// Besides the public store_writer_actor interface it serves the blocking facade
// through a WriteQueue of BlockingWrites, which carry a reply slot instead of a response
// promise, and commits the plain writes of each drain together (group commit).
//
// Only this actor's thread runs write transactions: a blocked caller hands its write to
// the queue and waits. The hand-off stays cheap while work flows: after a drain the
// writer polls the queue briefly before it sleeps (a caller writing back to back finds it
// awake), and a caller spins briefly for its reply before it sleeps.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>

#include <beehive/actors.hpp>
#include <beehive/metrics.hpp>
#include <beehive/time.hpp>

#include "actors/hub_inbox.hpp"
#include "actors/write_queue.hpp"
#include "rendezvous.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

/// The steps of a `within` session.
struct SessionCmd {
  enum Kind { begin, savepoint, release, rollback_to, commit, rollback } kind = begin;
};

/// A read inside a within block: served by the writer, so that it sees the block's
/// own uncommitted writes.
struct ReadOp {
  enum What { get, get_by_slug, list, list_owned, related, incoming, events, current } what = get;
  GroupKind gk;
  ObjectID id = 0;  // get, related, incoming, events, current: the object; list_owned: owner
  std::string slug;
  unsigned loads = 0;  // related: the relation
  EventQuery query{};
};

using WriteOp =
    std::variant<create_request, update_request, create_or_update_request, get_or_create_request,
                 remove_request, remove_by_slug_request, update_status_request,
                 set_condition_request, remove_condition_request, remove_finalizer_request,
                 add_dependency_request, remove_dependency_request, record_event_request,
                 collect_request, trim_events_request, SessionCmd, ReadOp>;

/// Refuses, with invalid_argument, an application actor's request that the blocking
/// facade refuses before sending its own: text that is not UTF-8, a spec or status that
/// is not JSON text nested at most max_json_depth deep, an event detail that does not
/// store as itself. Defined with the actor surface (surface.cpp).
void check_request(const WriteOp& op);
void check_request(const get_by_slug_request& r);
void check_request(const list_events_request& r);

/// Decodes a written row back into the caller's types inside the transaction; throwing
/// rolls the write back.
using RowCheck = std::function<void(const ObjectRow&)>;

struct WriteReply {
  ObjectRow row;
  bool flag{};  // get_or_create: created; remove_by_slug: deletion requested; incoming refs
  std::uint64_t session{};        // SessionCmd::begin: the session opened
  std::vector<ObjectRow> rows{};  // ReadOp
  int count{};                    // collect_request: objects removed; trim_events: runs
  Event event{};                  // record_event_request: the run
  std::vector<Ref> refs{};        // ReadOp::related
  std::vector<Event> events{};    // ReadOp::events
};

struct BlockingWrite {
  WriteOp op;
  RowCheck check;
  std::uint64_t session = 0;  // the within session the write belongs to; 0 = none
  int cpu = -1;               // the CPU its caller ran on when it queued the write
  std::shared_ptr<Rendezvous<WriteReply>> reply = std::make_shared<Rendezvous<WriteReply>>();

  /// A write dropped unserved (its actor is gone) releases its caller.
  ~BlockingWrite() { reply->fail(errc::stopped, "beehive stopped"); }
};

using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;

/// The writer's full interface: the public one plus the facade's messages. A
/// `shutdown_atom` makes it quit once everything queued before it has been served.
/// Wakes the writer to drain its WriteQueue.
using drain_queue_atom = caf::atom_constant<caf::atom("drainq")>;
/// Stop's deadline passed while a within block was open: the writer rolls it back, ends
/// the session and goes on with what waited for it (its shutdown above all).
using abort_session_atom = caf::atom_constant<caf::atom("abortsess")>;
/// Time to look for commits of other processes (see StoreWriterConfig::foreign_poll).
using poll_foreign_atom = caf::atom_constant<caf::atom("pollfor")>;
/// Names the watch hub: it gets commit records only while it has watches (HubGate).
using hub_atom = caf::atom_constant<caf::atom("hub")>;

/// How many watches the watch hub serves, shared between the hub and the writer. A commit
/// record wakes the hub (a thread wake-up, a large part of a small write) only while it
/// has one. The hub raises the count before it reads a new watch's snapshot, and the
/// writer reads it after its commit (both sequentially consistent): a record the writer
/// skips belongs to a commit that snapshot sees.
struct HubGate {
  std::atomic<std::size_t> watches{0};
  /// Where the writer posts its commit records for the hub (never to its mailbox).
  HubInbox inbox;
};

/// Which commit records a subscriber needs; empty: all of them. Beehive's own actors
/// subscribe with one, so that a write wakes only the actors it concerns.
using RecordFilter = std::function<bool(const commit_record&)>;

struct Subscriber {
  caf::actor actor;
  RecordFilter wants;
};

using store_writer_impl =
    store_writer_actor::extend<caf::reacts_to<drain_queue_atom>, caf::reacts_to<shutdown_atom>,
                               caf::reacts_to<abort_session_atom>,
                               caf::reacts_to<poll_foreign_atom>,
                               caf::reacts_to<hub_atom, caf::actor>,
                               caf::reacts_to<subscribe_atom, caf::actor, RecordFilter>>;

// The reads of the actor surface, answered by the writer in order with its writes.
using ActorRead = std::variant<get_request, get_by_slug_request, list_request, relation_request,
                               has_incoming_refs_request, list_events_request>;

/// with_max_object_bytes' default, and the bounds on event runs.
inline constexpr std::size_t default_max_object_bytes = 8 * 1024 * 1024;
inline constexpr std::size_t max_event_message_bytes = 64 * 1024;
inline constexpr std::size_t max_event_detail_bytes = 1024 * 1024;

struct StoreWriterConfig {
  std::unique_ptr<store::Writer> writer;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<WriteQueue> queue;
  /// Null: no metrics, and no clock reads for them.
  std::shared_ptr<MetricsSink> metrics;
  /// Subscribed before the writer serves anything: a restarted writer must not commit
  /// a write its predecessor's subscribers would miss.
  std::vector<Subscriber> subscribers;
  /// The watch hub and its gate (a restarted writer starts with them too).
  caf::actor hub;
  std::shared_ptr<HubGate> hub_gate;
  /// The largest spec, and status, a write may store (with_max_object_bytes).
  std::size_t max_object_bytes = default_max_object_bytes;
  /// How long the writer keeps polling its queue after a drain before it sleeps.
  std::chrono::microseconds linger{100};
  /// How often the writer checks whether another process (or another Store on the same
  /// file) committed, to publish those changes like its own: one PRAGMA data_version
  /// while nothing happened, then only the rows above the last version seen. 0: never.
  std::chrono::milliseconds foreign_poll{100};
};

struct StoreWriterState;

struct StoreWriterState {
  StoreWriterState() = default;
  StoreWriterState(const StoreWriterState&) = delete;
  StoreWriterState& operator=(const StoreWriterState&) = delete;

  std::shared_ptr<StoreWriterConfig> cfg;
  std::vector<Subscriber> subscribers;
  caf::actor hub;

  std::uint64_t session = 0;  // the open within session; 0 = none
  std::uint64_t last_session = 0;
  std::uint64_t aborted_session = 0;  // rolled back by stop: its later steps fail stopped
  int depth = 0;  // savepoints open inside the session
  /// Why the session's transaction is gone, when the database rolled it back by itself
  /// after a failure (an I/O error, a full disk): the rest of the session fails with
  /// this instead of running outside any transaction, and its commit fails.
  std::string broken;
  struct Mark {
    std::size_t changes, wakes;
    bool edges_removed;
  };
  std::vector<Mark> marks;    // the session record's extent at each savepoint
  commit_record session_rec;  // what the session changed so far
  std::deque<std::function<void()>> deferred;  // arrived while a session was open
  std::uint64_t transactions = 0;  // committed
  int linger_credit = 8;           // 0..16: up when lingering after a drain caught a request
  unsigned linger_probe = 0;
  // Gathering (see refill): the callers the last group commit answered, the queue's
  // length when it committed, how long its COMMIT took, and whether waiting for those
  // callers has been paying.
  std::size_t last_group = 0;
  std::size_t queued_at_commit = 0;  // the queue's length when it committed
  std::chrono::steady_clock::duration last_commit{};
  int gather_credit = 8;  // 0..16
  unsigned gather_probe = 0;
  std::chrono::steady_clock::time_point session_began;  // metrics only
  // Other processes' commits (see foreign_poll): the data_version last read, the
  // resource version up to which everything was published, and the versions this writer
  // published since the last poll (those rows need not be published again).
  std::int64_t data_version = 0;
  std::int64_t seen_rv = 0;
  std::vector<std::int64_t> own_rvs;

  static inline const char* name = "beehive.store_writer";
};

store_writer_impl::behavior_type store_writer(
    store_writer_impl::stateful_pointer<StoreWriterState> self,
    std::shared_ptr<StoreWriterConfig> cfg);

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::RecordFilter)
