#pragma once

// The root actor: beehive's supervisor. It spawns every other actor, publishes their
// handles in the ActorDirectory, restarts a failed one from the store, and runs start and
// stop as message protocols.
//
// Restart groups (an actor restarts with those that hold its handle):
//   store_writer -> the writer, then the gc and the event_log (the controllers and the
//                   hub are handed to the new writer as they are);
//   scheduler    -> the scheduler, every controller, the gc and the event_log;
//   a controller, the gc, the event_log, the watch hub or the reader -> itself alone.
// A restart that throws (a thread the system refused: the reader and each reconcile
// worker is one) is logged and tried again every `restart_retry` on the timers' time
// line; meanwhile that actor is missing (a kind without its controller queues nothing).
// A restarted controller lists its kind again and reconciles it; the gc runs a pass; a
// restarted hub serves new watches (those it served end with errc::store). Nothing
// committed is lost: what matters lives in the store and the rest is rebuilt from it.
//
// Stop, in order: every controller stops dispatching and answers once its reconciles
// have ended (bounded by the deadline); the gc finishes what it queued; the controllers,
// the gc, the event_log and the scheduler quit; the writer serves what is queued and
// quits (at the deadline a still-open within block is rolled back), handing its shutdown
// to the hub after its last commit record; the hub delivers what is left, ends every
// watch and quits. Then the root answers the stop request.
//
// Settle (for beehive::testing::settle): the root asks every actor to answer once it is
// idle at the timers' now (see settle.hpp), in rounds, until a round saw no commit.
//
// Every member runs on the root's thread; the facade talks to it only by messages and
// reads handles from the ActorDirectory.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_directory.hpp"
#include "actors/atoms.hpp"
#include "actors/controller.hpp"
#include "actors/services.hpp"
#include "actors/settle.hpp"
#include "actors/store_writer.hpp"
#include "actors/watch_hub.hpp"
#include "actors/write_queue.hpp"
#include "rendezvous.hpp"

namespace beehive::detail {

/// How long a restart that failed waits before it is tried again.
inline constexpr std::chrono::seconds restart_retry{1};

/// What the root is given once, when the beehive is built.
struct RootConfig {
  Services services;
  /// The Beehive's clock: a ManualClock's steps tick the scheduler.
  std::shared_ptr<Clock> clock;
  std::shared_ptr<WriteQueue> queue;
  std::shared_ptr<WatchHubFeed> hub_feed;
  /// The application's commit-record subscribers, for every writer in turn.
  std::shared_ptr<AppSubscribers> app_subscribers = std::make_shared<AppSubscribers>();
  std::shared_ptr<ActorDirectory> directory;
  /// The first writer's connection (opened by the facade, so that a failure to open it
  /// is the constructor's), then how a restarted writer opens its own.
  std::unique_ptr<store::Writer> first_writer;
  std::function<std::unique_ptr<store::Writer>()> open_writer;
  /// Where the writers stand in other processes' commits (each writer goes on from it).
  std::shared_ptr<store::ForeignCursor> foreign_cursor = std::make_shared<store::ForeignCursor>();
  /// The within sessions crashed writers left open (shared by the writers it restarts).
  std::shared_ptr<CrashedSessions> crashed_sessions = std::make_shared<CrashedSessions>();
  /// The store, for the writer's reader (the actor surface's reads).
  std::shared_ptr<store::Backend> backend;
  /// A registered kind's schema versions (see StoreWriterConfig::schema_versions).
  std::function<SchemaVersions(const GroupKind&, unsigned defaults)> schema_versions;
  std::size_t max_object_bytes = default_max_object_bytes;
  /// The gc's and the event_log's cadence (the resync interval, at most 30 s).
  std::chrono::milliseconds cadence{30000};
  /// What the gc keeps of the change log (with_change_log_retention's defaults).
  trim_change_log_request change_log_retention{100000, std::chrono::minutes(5)};
};

/// `start`: the registered kinds, the event retention policy, and how a worker runs a
/// reconcile pass (Services::reconcile, known only once the facade is complete).
struct StartPlan {
  std::vector<std::shared_ptr<KindEntry>> kinds;
  trim_events_request retention;
  std::function<Outcome(const KindEntry&, std::int64_t)> reconcile;
};

/// `stop`: when the protocol gives up waiting (nullopt: never), and, for a caller whose
/// context can be cancelled, whether it has ended (asked every few milliseconds while
/// stopping; once true, the stop goes on as if its deadline had passed).
struct StopRequest {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::function<bool()> ended;
};

/// `settle`: the outcome goes to the blocked caller's slot (true once settled), which
/// the caller stops waiting on when its context ends.
struct SettleRequest {
  std::shared_ptr<Rendezvous<bool>> reply = std::make_shared<Rendezvous<bool>>();
  /// Asked again after the writer it asked had died (its down message not yet heard).
  int retries = 0;
};

struct StopReport {
  bool drained = true;  // every reconcile ended before the deadline
  bool closed = true;   // no within block had to be rolled back at the deadline
};

struct RootState {
  RootState() = default;

  std::shared_ptr<RootConfig> cfg;
  enum class Phase { created, running, stopping, stopped } phase = Phase::created;
  std::vector<std::shared_ptr<KindEntry>> kinds;
  trim_events_request retention;

  store_writer_impl writer;
  watch_hub_impl hub;
  scheduler_impl scheduler;
  caf::actor gc;
  caf::actor event_log;
  /// Each kind's controller, and the inbox the writer folds its commit records into.
  struct Controller {
    caf::actor actor;
    RecordInboxPtr inbox;
  };
  std::map<GroupKind, Controller> controllers;
  /// Every worker still alive, and the controller it works for.
  std::map<caf::actor_addr, caf::actor> workers;
  int clock_token = 0;  // the ManualClock subscription that ticks the scheduler
  /// Restarts that failed, tried again at the next wake (`restart_retry`).
  struct Retry {
    std::string what;
    std::function<void()> redo;
  };
  std::vector<Retry> retries;
  bool opening_writer = false;  // a restarted writer's connection is being opened
  /// The stop reached its last step (close_writer): it may finish once the writer and
  /// the hub are gone, not before (a writer that dies while controllers drain).
  bool closing_writer = false;
  /// The stop ended what the writer's shutdown would have (end_without_writer): once.
  bool ended_without_writer = false;
  /// Settles asked for meanwhile: quiet only once the writer is back (or failed again).
  std::vector<std::shared_ptr<Rendezvous<bool>>> settles_waiting_for_writer;

  // The stop in progress.
  std::optional<caf::typed_response_promise<StopReport>> stopping;
  StopReport report;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::function<bool()> stop_ended;  // StopRequest::ended
  /// The stop's deadline passed or its caller's context ended: the stage in progress
  /// stops waiting (what it does then), and every later stage finds `gave_up` set.
  std::function<void()> give_up;
  bool gave_up = false;
  std::vector<caf::typed_response_promise<bool>> awaiting_workers;
  /// The stop's drain waits for the passes that replaced controllers left running: called
  /// once the last of their workers is down.
  std::function<void()> orphans_gone;

  static inline const char* name = "beehive.root";
};

/// A restarted writer's connection, opened off the root's thread (a PostgreSQL connect
/// can wait out its timeout): the connection, or why it did not open.
struct WriterOpened {
  /// The store, kept until the connection is gone (the message may outlive the beehive).
  std::shared_ptr<store::Backend> backend;
  std::shared_ptr<std::unique_ptr<store::Writer>> connection;
  std::string error;
};

using root_actor =
    caf::typed_actor<caf::replies_to<open_atom>::with<bool>, caf::replies_to<StartPlan>::with<bool>,
                     caf::replies_to<StopRequest>::with<StopReport>,
                     caf::replies_to<await_workers_atom>::with<bool>, caf::reacts_to<SettleRequest>,
                     caf::reacts_to<stop_deadline_atom>, caf::reacts_to<leadership_atom, bool>,
                     caf::reacts_to<wake_atom>, caf::reacts_to<WriterOpened>>;

/// Spawns nothing until `open`; the controllers, scheduler, gc and event_log on start.
root_actor::behavior_type root(root_actor::stateful_pointer<RootState> self,
                               std::shared_ptr<RootConfig> cfg);

}  // namespace beehive::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::StartPlan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::WriterOpened)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::StopRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::StopReport)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(beehive::detail::SettleRequest)
