#pragma once

// The store_writer actor: the one executor of write transactions. It owns the
// WriteEngine (src/store/write_engine.*) and is a thin CAF shell around it: its handlers
// turn messages into engine calls and engine results into replies, and it forwards the
// engine's commit records to its subscribers and the watch hub.
//
// Two doors lead in. Application actors send the typed requests of
// store_writer_actor (checked as the facade checks its calls; reads handed to the
// store_reader). Blocked facade callers push BlockingWrites (a write plus a reply slot)
// on the WriteQueue; the writer drains the queue, groups the plain writes of a drain
// into one transaction (group commit), and answers each slot after the commit.
//
// A `within` block opens a session: until it commits or rolls back, the writer serves
// only that session's writes and defers everything else, in arrival order.
//
// Thread-safety: spawned detached; only its own thread runs its handlers and the
// engine. Other threads touch only the WriteQueue and their own reply slots.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/metrics.hpp>
#include <beehive/time.hpp>

#include "actors/atoms.hpp"
#include "actors/hub_inbox.hpp"
#include "actors/record_inbox.hpp"
#include "actors/store_reader.hpp"
#include "actors/write_queue.hpp"
#include "rendezvous.hpp"
#include "store/backend.hpp"
#include "store/write_engine.hpp"

namespace beehive::detail {

using store::default_max_object_bytes;
using store::max_event_detail_bytes;
using store::max_event_message_bytes;
using store::ReadOp;
using store::SchemaVersions;
using store::SessionCmd;
using store::WriteOp;
using store::WriteReply;

/// A write a blocked facade caller handed over, with the slot its reply goes to.
struct BlockingWrite final : store::WaitingCaller {
  WriteOp op;
  store::RowCheck check;
  std::uint64_t session = 0;  // the within session the write belongs to; 0 = none
  int cpu = -1;               // the CPU its caller ran on when it queued the write
  bool for_leader = false;    // written by a reconcile: fenced (Writer::fence)
  std::int64_t term = 0;      // the term that reconcile began in (0: any)
  std::shared_ptr<Rendezvous<WriteReply>> reply = std::make_shared<Rendezvous<WriteReply>>();

  bool abandoned() const override { return reply->abandoned(); }
  bool claim() override { return reply->claim(); }
  bool leader_work() const override { return for_leader; }
  std::int64_t leader_term() const override { return term; }

  BlockingWrite() = default;
  BlockingWrite(const BlockingWrite&) = delete;
  BlockingWrite& operator=(const BlockingWrite&) = delete;
  /// A write dropped unserved (its actor is gone) releases its caller.
  ~BlockingWrite() { reply->fail(errc::stopped, "beehive stopped"); }
};

// The writer's private messages.

/// What the writer shares with the watch hub. A commit record wakes the hub (a thread
/// wake-up, a large part of a small write) only while the hub has a watch: the hub
/// raises `watches` before it reads a new watch's snapshot, and the writer reads it after
/// its commit (both sequentially consistent), so a record the writer skips belongs to a
/// commit that snapshot sees.
struct WatchHubFeed {
  std::atomic<std::size_t> watches{0};
  /// The watch snapshots (and resumes' replays) the reader has read, object and event
  /// watches alike; one given up before the reader got to it is not read (for tests).
  std::atomic<std::uint64_t> snapshot_reads{0};
  /// Where the writer posts its commit records for the hub (never to its mailbox).
  HubInbox inbox;

  /// Makes `hub` the one whose watch count stands, from 0 (`publish_zero` reports it); a
  /// hub it replaced (on its way out, restarted with the reader) then publishes nothing.
  template <class F>
  void start_publisher(const caf::actor_addr& hub, F publish_zero) {
    std::lock_guard lk(publisher_mu_);
    publisher_ = hub;
    watches = 0;
    publish_zero();
  }
  /// Runs `publish` (which sets `watches`, the gauge) unless another hub replaced `hub`.
  template <class F>
  void if_publisher(const caf::actor_addr& hub, F publish) {
    std::lock_guard lk(publisher_mu_);
    if (publisher_ == hub) publish();
  }

 private:
  std::mutex publisher_mu_;
  caf::actor_addr publisher_;
};

/// Which commit records a subscriber needs; empty: all of them. Beehive's own actors
/// subscribe with one, so that a write wakes only the actors it concerns.
using RecordFilter = std::function<bool(const commit_record&)>;

struct Subscriber {
  caf::actor actor;
  RecordFilter wants;
  bool app = false;  // the application's (AppSubscribers), told `watch_ended` at stop
  /// A controller's: the records it wants are folded in there (bounded by the objects
  /// they name) rather than sent one message each.
  RecordInboxPtr inbox{};
};

using store_writer_impl = store_writer_actor::extend<
    caf::reacts_to<serve_queue_atom>, caf::reacts_to<shutdown_atom>,
    caf::replies_to<abort_session_atom>::with<bool>, caf::reacts_to<poll_foreign_atom>,
    caf::reacts_to<foreign_commit_atom>, caf::reacts_to<hub_atom, caf::actor>,
    caf::reacts_to<subscribe_atom, caf::actor, RecordFilter>,
    caf::reacts_to<subscribe_atom, caf::actor, RecordFilter, RecordInboxPtr>,
    caf::reacts_to<retire_atom, caf::actor>, caf::reacts_to<sweep_page_atom>,
    caf::reacts_to<drain_atom>, caf::replies_to<settle_atom>::with<std::uint64_t>>;

/// The application's commit-record subscribers (`subscribe_atom` + an actor), kept
/// across writer restarts: a restarted writer serves them from its first commit.
/// Changed by the writer; read by the root only while no writer runs (the mutex keeps
/// that visible).
struct AppSubscribers {
  std::mutex mu;
  std::vector<caf::actor> actors;
};

/// The within sessions crashed writers left open, the latest `kept` of them: their
/// blocks' later steps hear that the writer failed (errc::store), not that they misused
/// a context. Added to by a dying writer, read by its successors (the mutex keeps that
/// visible across their threads).
class CrashedSessions {
 public:
  static constexpr std::size_t kept = 64;
  void add(std::uint64_t session) {
    std::lock_guard lk(mu_);
    if (sessions_.size() == kept) sessions_.pop_front();
    sessions_.push_back(session);
  }
  bool contains(std::uint64_t session) const {
    std::lock_guard lk(mu_);
    return std::find(sessions_.begin(), sessions_.end(), session) != sessions_.end();
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::uint64_t> sessions_;
};

struct StoreWriterConfig {
  std::unique_ptr<store::Writer> writer;
  /// The read connections the actor surface's reads go to.
  std::shared_ptr<store::Backend> backend;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<WriteQueue> queue;
  /// Null: no metrics, and no clock reads for them.
  std::shared_ptr<MetricsSink> metrics;
  /// The schema versions of a registered kind (from the runtime's kind registry): an
  /// actor's write without a version is written at these.
  std::function<SchemaVersions(const GroupKind&, unsigned defaults)> schema_versions;
  /// Subscribed before the writer serves anything: a restarted writer must not commit
  /// a write its predecessor's subscribers would miss.
  std::vector<Subscriber> subscribers;
  std::shared_ptr<AppSubscribers> app_subscribers = std::make_shared<AppSubscribers>();
  /// The watch hub and what it shares with the writer (a restarted writer starts with
  /// them too).
  caf::actor hub;
  std::shared_ptr<WatchHubFeed> hub_feed;
  /// Where the writers stand in other processes' commits: a restarted writer goes on
  /// from where the last one was.
  std::shared_ptr<store::ForeignCursor> foreign_cursor = std::make_shared<store::ForeignCursor>();
  std::shared_ptr<CrashedSessions> crashed_sessions = std::make_shared<CrashedSessions>();
  /// The largest spec, and status, a write may store (with_max_object_bytes).
  std::size_t max_object_bytes = default_max_object_bytes;
  /// How long the writer keeps polling its queue after a drain before it sleeps.
  std::chrono::microseconds idle_wait{100};
  /// How often the writer checks whether another process (or another Store on the same
  /// file) committed, to publish those changes like its own: one PRAGMA data_version
  /// while nothing happened, then only the rows above the last version seen. 0: never.
  std::chrono::milliseconds foreign_poll{100};
};

struct StoreWriterState {
  StoreWriterState() = default;
  /// After a crash (not a shutdown), hands the blocking writes that waited behind the
  /// session the crash ended back to the queue, for the restarted writer, and answers the
  /// actors' requests that waited (and the sweeps asked for) with errc::stopped.
  ~StoreWriterState();
  StoreWriterState(const StoreWriterState&) = delete;
  StoreWriterState& operator=(const StoreWriterState&) = delete;

  std::shared_ptr<StoreWriterConfig> cfg;
  std::unique_ptr<store::WriteEngine> engine;
  std::vector<Subscriber> subscribers;
  caf::actor hub;
  store_reader_actor reader;
  /// Work that arrived while a within session was open, in arrival order: run once the
  /// session ends, or refused (errc::stopped) when it came after the shutdown.
  struct Deferred {
    std::function<void()> run;
    std::function<void()> refuse;
    /// Its caller stopped waiting (a blocking write): dropped unrun, and its request
    /// with it, rather than held until the block ends.
    std::function<bool()> abandoned{};
    BlockingWritePtr write{};  // a blocking caller's, which a crash hands on
    bool shutdown = false;     // the root's: a crash drops it (the root restarts the writer)
  };
  std::deque<Deferred> deferred;
  bool running_deferred = false;
  /// Retention sweeps asked for (of event runs, of the change log), in order; the first
  /// is in progress. It runs a page at a time, each page sending `sweep_page_atom` for the next, so
  /// that what arrives meanwhile (writes above all) is served between its pages, not after all of
  /// them.
  using SweepPolicy = std::variant<trim_events_request, trim_change_log_request>;
  struct Sweep {
    SweepPolicy policy;
    caf::typed_response_promise<int> rp;
    int removed = 0;
  };
  std::deque<Sweep> sweeps;
  bool closed = false;  // shut down: whatever is still deferred is refused
  /// Stop began (the root's drain_atom): the application's requests are refused with
  /// errc::stopped, as the Client's calls are; beehive's own maintenance and the blocking
  /// queue (the passes still in flight write through it) are served to the end.
  bool draining = false;
  bool stop_gave_up = false;  // stop's deadline passed: no within block begins any more

  static inline const char* name = "beehive.store_writer";
};

store_writer_impl::behavior_type store_writer(
    store_writer_impl::stateful_pointer<StoreWriterState> self,
    std::shared_ptr<StoreWriterConfig> cfg);

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::RecordFilter)
