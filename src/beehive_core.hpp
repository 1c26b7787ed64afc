#pragma once

// BeehiveCore: the blocking facade's handle on a beehive — what a Beehive and its clients
// share: the actor system, the store, the clock, the registered kinds, the handles of
// the actors (read from the root's ActorDirectory) and the blocking hand-off to the
// store_writer. Start and stop are requests to the root actor, which runs both
// protocols; the core keeps only what concerns callers: whether calls are served,
// and the claim on the database.
//
// Thread-safety: every member function may be called from any thread, except that
// start and stop are serialized among themselves.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <beehive/actors.hpp>
#include <beehive/options.hpp>
#include <beehive/stream.hpp>

#include "actors/controller.hpp"
#include "actors/root.hpp"
#include "actors/scheduler.hpp"
#include "actors/store_writer.hpp"
#include "actors/watch_hub.hpp"
#include "lifecycle_mutex.hpp"
#include "options_internal.hpp"
#include "spec_version_claim.hpp"
#include "store/backend.hpp"
#include "store/object_limits.hpp"

namespace beehive::detail {

class BeehiveCore : public std::enable_shared_from_this<BeehiveCore> {
 public:
  BeehiveCore(caf::actor_system* sys, std::shared_ptr<Store> store,
              const std::vector<Option>& opts);
  ~BeehiveCore();

  store::Backend& backend() { return *backend_; }
  /// The actor system the actors run in (the application's, or this beehive's own).
  caf::actor_system& system() { return *sys_; }
  Clock& clock() { return *clock_; }
  /// What timers run on (see TimerClock).
  const TimerClock& timers() const { return *timers_; }
  store_writer_actor store_writer() const {
    return caf::actor_cast<store_writer_actor>(directory_->writer());
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
  /// `selector`: null for every object; `resume_from`: no snapshot, the changes above it.
  std::shared_ptr<ChangeCore> watch(const Context& ctx, const GroupKind& gk,
                                    std::optional<ObjectID> id,
                                    std::shared_ptr<const store::LabelSelector> selector = nullptr,
                                    std::optional<std::int64_t> resume_from = std::nullopt);
  std::shared_ptr<EventCore> watch_events(const Context& ctx, ObjectID id, const EventQuery& q);
  /// `no_controller` for a client-only kind.
  std::shared_ptr<StreamCore<Schedule>> watch_schedule(const Context& ctx, const GroupKind& gk,
                                                       ObjectID id);
  std::uint64_t next_subscription() { return services_.next_subscription(); }
  /// The watch hub's handle (null before it serves, and after stop).
  watch_hub_impl watch_hub() const { return directory_->hub(); }
  /// Runs `f` on a pooled reader for a caller whose reads give up when `ctx` ends (a
  /// reader can wait: for a free connection; on PostgreSQL also for another session's
  /// lock or a server that does not answer). A read given up throws the context's error.
  template <class F>
  auto read(const Context& ctx, F&& f) {
    try {
      auto lease = reader_for(ctx);
      return f(*lease);
    } catch (const Error&) {
      ctx.throw_if_done();
      throw;
    }
  }
  /// Object `id` as committed, for converged-write checks; gives up when `ctx` ends.
  std::optional<ObjectRow> read_committed(const Context& ctx, ObjectID id);
  /// What the writer shares with the watch hub (see WatchHubFeed).
  WatchHubFeed& hub_feed() { return *hub_feed_; }
  /// Handles for the actor surface (null before start / for unknown kinds).
  caf::actor controller(const GroupKind& gk) const;
  caf::actor gc() const;
  caf::actor event_log() const;
  scheduler_actor scheduler() const;
  /// When the scheduler's first timer falls due, on the timers' time line, housekeeping's
  /// (the gc's and the event log's cadence) left out; none when no such timer is armed
  /// or before start (the test kit steps a ManualClock through them).
  std::optional<Time> next_timer() const;
  /// The reader actor (reader.hpp), where the hub reads watch snapshots; for tests that
  /// hold it up.
  caf::actor reader() const;

  // -- controllers ----------------------------------------------------------------

  void register_kind(const GroupKind& gk, ReconcileFn fn, const std::vector<Option>& opts);
  /// One reconcile pass of `id`, on a worker's thread (Services::reconcile).
  Outcome reconcile_once(const KindEntry& kind, ObjectID id);
  /// The kind's migrator (null without one) and the schema versions it writes.
  const Migrator* migrator(const GroupKind& gk) const;
  int spec_version(const GroupKind& gk) const;
  int status_version(const GroupKind& gk) const;
  /// The largest spec, status or set of labels a write may store (with_max_object_bytes).
  std::size_t max_object_bytes() const {
    return settings_.max_object_bytes.value_or(store::default_max_object_bytes);
  }
  /// spec_version for a write of the kind (see SpecVersionClaim).
  SpecVersionClaim writing_spec_version(const GroupKind& gk);
  /// The versions an actor's write request of the kind is stored at where it leaves them
  /// unset (`defaults`, store::VersionDefault bits). Before registration closes, a kind
  /// with no controller yet notes those defaulted writes (at version 0) as the Client's
  /// do, whatever their outcome (the writer does not report it).
  SchemaVersions request_versions(const GroupKind& gk, unsigned defaults);
  /// Queues `id` in its kind's controller and returns once it is queued, bounded by
  /// `ctx` (a caller whose context ends first leaves it unqueued); no_controller for a
  /// client-only kind, not_found when the controller finds no such object of the kind.
  void requeue(const Context& ctx, const GroupKind& gk, ObjectID id, bool reset_backoff);
  /// A requeue made in a within block, after its commit: the block's deadline no longer
  /// applies (what it asked for is committed), and nothing waits for the controller to
  /// queue the object.
  void requeue_after_commit(const GroupKind& gk, ObjectID id, bool reset_backoff);
  /// The kind's registration, or null for a client-only kind.
  std::shared_ptr<KindEntry> kind(const GroupKind& gk) const;

  // -- lifecycle ------------------------------------------------------------------

  std::function<void(const Context&)> start(const Context& ctx);
  /// Whether this running beehive leads the processes on its store (leadership.cpp).
  bool is_leader() const;
  /// Running, and another process leads.
  bool is_standby() const;
  /// The current leadership, then each change, until stop.
  Stream<bool> watch_leadership(const Context& ctx);
  /// Drains and stops; throws deadline_exceeded when in-flight reconciles outlive
  /// `ctx` (stopped either way). Idempotent.
  void stop(const Context& ctx);

  /// Returns once nothing is left to do at the clock's current time (see
  /// beehive::testing::settle); throws deadline_exceeded when `ctx` ends first.
  void settle(const Context& ctx);

  /// After stop: waits for reconciles that outlived stop's deadline, ends the root and,
  /// for an actor system of its own, destroys it. Called by ~Beehive, never from an
  /// actor's thread.
  void shutdown_system();

 private:
  store::ReaderLease reader_for(const Context& ctx);
  enum class State { created, running, draining, stopped };

  /// Hands `w` to the hub for `core` and returns once its snapshot is in (every later
  /// commit arrives live); the stream unsubscribes when it ends. Throws cancelled or
  /// deadline_exceeded when `ctx` ends first (the stream is closed, so unsubscribed).
  template <class Watch, class Core>
  void open_watch(const Context& ctx, std::shared_ptr<Watch> w, const std::shared_ptr<Core>& core);
  /// stop without its refusals (from inside a reconcile or a within block).
  void stop_now(const Context& ctx);
  /// Runs the root's stop protocol (see root.hpp) and waits for its report.
  StopReport stop_actors(const Context& ctx);
  /// The retention policy the event_log applies, from the Beehive's and kinds' options.
  trim_events_request retention_policy() const;
  /// Ends own_sys_, waiting for it at most own_system_grace (see the definition).
  void end_own_system();
  static constexpr std::chrono::seconds own_system_grace{5};

  std::unique_ptr<caf::actor_system_config> own_cfg_;
  std::unique_ptr<caf::actor_system> own_sys_;
  caf::actor_system* sys_;
  std::shared_ptr<Store> store_;
  store::Backend* backend_;
  std::shared_ptr<void> served_;  // the store serves this beehive until it stops
  OptionSet settings_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<const TimerClock> timers_;
  Logger logger_;
  Services services_;
  std::shared_ptr<WriteQueue> queue_ = std::make_shared<WriteQueue>();
  std::shared_ptr<WatchHubFeed> hub_feed_ = std::make_shared<WatchHubFeed>();
  std::shared_ptr<ActorDirectory> directory_ = std::make_shared<ActorDirectory>();
  root_actor root_;
  /// The parent of every reconcile's context: stop cancels it, so that reconciles in
  /// flight see their context end at once.
  Context stop_ctx_;
  std::function<void()> cancel_reconciles_;
  /// The parent of the contexts of the passes begun while leadership stays as it is (a
  /// child of stop_ctx_): a change of leadership cancels it, so that the passes of a
  /// term this process no longer leads end (their writes would fail the fence), and
  /// begins another.
  mutable std::mutex term_ctx_mu_;
  Context term_ctx_;
  std::function<void()> cancel_term_;

  LifecycleMutex mu_;  // held while start or stop runs (stop drains with it), never by calls
  std::atomic<State> state_{State::created};
  mutable std::mutex kinds_mu_;  // the registry below; read by calls at any time
  std::map<GroupKind, std::shared_ptr<KindEntry>> kinds_;
  std::set<GroupKind> written_unregistered_;         // see writing_spec_version
  std::map<GroupKind, int> writing_unregistered_;    // such writes in flight
  std::set<GroupKind> status_written_unregistered_;  // statuses, see request_versions
  /// Gives up the database's claims (in this process and across processes).
  void release_claims();
  std::string claimed_;              // the database this running beehive claimed
  std::shared_ptr<void> run_claim_;  // its claim across processes (see Backend::claim)

  /// Called by the store (on its thread) when this process's leadership changes.
  void leadership_changed(bool leads);
  /// Tells the leadership streams (and the leader gauge) `leads`, or what the store says
  /// now (read under their lock), unless it is what they were told last.
  void report_leadership(std::optional<bool> leads);
  /// Subscribes to the store's leadership changes (start), and unsubscribes, ending
  /// the leadership streams (stop).
  void follow_leadership();
  void unfollow_leadership();
  /// Ends every leadership stream with `stopped`, and any opened later.
  void end_leadership_streams();
  std::mutex leadership_mu_;  // the streams below
  std::vector<std::shared_ptr<StreamCore<bool>>> leadership_streams_;
  bool leadership_streams_ended_ = false;
  /// What the streams have been told last: a stream opened later starts from it (start
  /// tells them before the beehive counts as running).
  bool leads_reported_ = false;
};

}  // namespace beehive::detail
