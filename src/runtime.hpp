#pragma once

// Runtime: what a Beehive and its clients share — the actor system, the store, the
// clock, the registered kinds and the actors — with the lifecycle (start, drain, stop)
// and the blocking hand-off to the store_writer.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include <beehive/actors.hpp>
#include <beehive/options.hpp>

#include "actors/controller.hpp"
#include "actors/event_log.hpp"
#include "actors/gc.hpp"
#include "actors/scheduler.hpp"
#include "actors/store_writer.hpp"
#include "actors/supervisor.hpp"
#include "actors/watch_hub.hpp"
#include "options_internal.hpp"
#include "store/backend.hpp"

namespace beehive::detail {

class Runtime;

/// One reconcile in flight, counted for stop's drain until destroyed.
struct Flight {
  explicit Flight(std::weak_ptr<Runtime> r) : rt(std::move(r)) {}
  ~Flight();
  std::weak_ptr<Runtime> rt;
};
using FlightPtr = std::shared_ptr<Flight>;

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  Runtime(caf::actor_system* sys, std::shared_ptr<Store> store, const std::vector<Option>& opts);
  ~Runtime();

  store::Backend& backend() { return *backend_; }
  Clock& clock() { return *clock_; }
  /// What timers run on (see TimerClock).
  const TimerClock& timers() const { return *timers_; }
  store_writer_actor store_writer() const {
    std::lock_guard k(kinds_mu_);
    return writer_public_;
  }

  /// Reports to the application's logger.
  void log(LogLevel level, std::string_view message, const LogFields& fields = {}) const {
    if (logger_) logger_(level, message, fields);
  }
  const Logger& logger() const { return logger_; }

  /// Throws stopped unless calls are being served: before start, while running, and,
  /// for a reconcile's own calls, while draining.
  void ensure_running(const Context& ctx) const;

  /// Sends `op` to the store_writer and waits for the commit, bounded by `ctx`. A
  /// context inside `within` sends it to that transaction.
  WriteReply write(const Context& ctx, WriteOp op, RowCheck check);
  /// A read inside a within block, served by the writer so that it sees the block's own
  /// writes.
  WriteReply read_in_transaction(const Context& ctx, ReadOp op) {
    return write(ctx, std::move(op), {});
  }
  /// An object's relations (not kind-scoped), inside a within block or not.
  std::vector<Ref> related(const Context& ctx, ObjectID id, unsigned relation);

  /// Runs `fn` as a transaction (see ControllerClient::within).
  void within(const Context& ctx, const std::function<void(const Context&)>& fn);

  /// Runs `fn` after the commit of `ctx`'s transaction, or now outside one.
  void after_commit(const Context& ctx, std::function<void()> fn);

  // -- watches --------------------------------------------------------------------

  /// Subscribes a conflating stream core to the kind (or one object of it).
  std::shared_ptr<ChangeCore> watch(const Context& ctx, const GroupKind& gk,
                                    std::optional<ObjectID> id);
  std::shared_ptr<EventCore> watch_events(const Context& ctx, ObjectID id, const EventQuery& q);
  /// `no_controller` for a client-only kind.
  std::shared_ptr<StreamCore<Schedule>> watch_schedule(const Context& ctx, const GroupKind& gk,
                                                       ObjectID id);
  std::uint64_t next_subscription() { return ++last_subscription_; }
  const watch_hub_impl& watch_hub() const { return hub_; }
  /// Object `id` as committed, for converged-write checks.
  std::optional<ObjectRow> read_committed(ObjectID id);
  /// What the writer shares with the watch hub (see WatchHubFeed).
  WatchHubFeed& hub_feed() { return *hub_feed_; }
  /// Handles for the actor surface (null before start / for unknown kinds).
  caf::actor controller(const GroupKind& gk) const;
  caf::actor gc() const;
  caf::actor event_log() const;
  scheduler_actor scheduler() const;

  // -- controllers ----------------------------------------------------------------

  void register_kind(const GroupKind& gk, ReconcileFn fn, const std::vector<Option>& opts);
  /// A controller hands an id to a worker: the reconcile is in flight until the
  /// returned token is released (after the pass, or when the job is dropped unserved).
  FlightPtr begin_flight();
  /// One reconcile pass of `id`, on a worker's thread.
  Outcome reconcile_once(const KindEntry& kind, ObjectID id);
  /// The kind's migrator (null without one) and the schema versions it writes.
  const Migrator* migrator(const GroupKind& gk) const;
  int spec_version(const GroupKind& gk) const;
  int status_version(const GroupKind& gk) const;
  /// Queues `id` in its kind's controller; no_controller for a client-only kind.
  void requeue(const GroupKind& gk, ObjectID id, bool reset_backoff);
  /// The kind's registration, or null for a client-only kind.
  std::shared_ptr<KindEntry> kind(const GroupKind& gk) const;

  // -- lifecycle ------------------------------------------------------------------

  std::function<void(const Context&)> start(const Context& ctx);
  /// Drains and stops; throws deadline_exceeded when in-flight reconciles outlive
  /// `ctx` (stopped either way). Idempotent.
  void stop(const Context& ctx);

  /// Restarts the failed actor `dead` (called by the supervisor); logs it.
  void restart(const caf::actor_addr& dead, const caf::error& reason);

  /// After stop: releases every actor handle and, for an actor system of its own,
  /// destroys it (waiting for reconciles still running). Called by ~Beehive, never from
  /// an actor's thread.
  void shutdown_system();

 private:
  enum class State { created, running, draining, stopped };

  void spawn_controllers();
  /// Spawns `entry`'s controller, subscribes it, starts it; the caller holds mu_.
  void spawn_controller(const std::shared_ptr<KindEntry>& entry);
  /// The gc's and the event_log's writer, timer and cadence (the resync interval).
  Periodic periodic() const;
  void spawn_gc();
  void spawn_event_log();
  /// Stops the controllers dispatching and waits until no reconcile runs (false when
  /// `deadline` passed first).
  bool drain_reconciles(std::optional<Context::Deadline> deadline);
  /// Subscribes a gc-like actor to the writer's commit records, has it supervised,
  /// publishes it in `slot` and starts it.
  void adopt(const caf::actor& a, RecordFilter wants, caf::actor& slot);
  void spawn_hub();
  void spawn_writer(std::vector<Subscriber> subscribers = {}, caf::actor hub = {});
  /// Returns once the writer has handled every message sent to it before.
  void sync_with_writer();
  /// The hub handle, safe from any thread.
  watch_hub_impl hub() const;
  /// Hands `w` to the hub for `core` and returns once its snapshot is in (every later
  /// commit arrives live); the stream unsubscribes when it ends.
  template <class Watch, class Core>
  void open_watch(std::shared_ptr<Watch> w, const std::shared_ptr<Core>& core);
  void kill_controllers();
  /// Shuts the writer (and after it the hub) down; false when a within block was still
  /// open at `deadline` and was rolled back.
  bool stop_writer(std::optional<Context::Deadline> deadline = std::nullopt);

  std::unique_ptr<caf::actor_system_config> own_cfg_;
  std::unique_ptr<caf::actor_system> own_sys_;
  caf::actor_system* sys_;
  std::shared_ptr<Store> store_;
  store::Backend* backend_;
  OptionSet settings_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<const TimerClock> timers_;
  Logger logger_;
  std::shared_ptr<WriteQueue> queue_ = std::make_shared<WriteQueue>();
  store_writer_impl writer_;
  store_writer_actor writer_public_;
  scheduler_impl scheduler_;
  watch_hub_impl hub_;
  std::shared_ptr<WatchHubFeed> hub_feed_ = std::make_shared<WatchHubFeed>();
  caf::actor gc_;
  caf::actor event_log_;
  caf::actor supervisor_;
  std::atomic<std::uint64_t> last_subscription_{0};
  /// The parent of every reconcile's context: stop cancels it, so that reconciles in
  /// flight see their context end at once.
  Context stop_ctx_;
  std::function<void()> cancel_reconciles_;
  int clock_token_ = 0;

  mutable std::mutex mu_;  // lifecycle; held while stop drains, so never by calls
  std::atomic<State> state_{State::created};
  mutable std::mutex kinds_mu_;  // the registry below; read by calls at any time
  std::map<GroupKind, std::shared_ptr<KindEntry>> kinds_;
  std::string claimed_;              // the database this running beehive claimed
  std::shared_ptr<void> run_claim_;  // its claim across processes (see Backend::claim)

  friend struct Flight;
  std::mutex flight_mu_;
  std::condition_variable flight_cv_;
  int in_flight_ = 0;
};

}  // namespace beehive::detail
