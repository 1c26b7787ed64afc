#include "beehive_core.hpp"

#include "thread_guards.hpp"

#include <sched.h>

#include <algorithm>
#include <future>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "context_internal.hpp"
#include "metrics/store_metrics.hpp"
#include "systems_left_running.hpp"
#include "transaction.hpp"

namespace beehive::detail {

namespace {

/// Databases claimed by a running beehive in this process. Never destroyed: a Beehive
/// whose pass never ends is destroyed on a detached thread (the testing kit does so),
/// which may release its claim while the process exits.
struct Claims {
  std::mutex mu;
  std::set<std::string> ids;
};
Claims& claims() {
  static auto* all = new Claims;
  return *all;
}

/// Takes the lifecycle lock, or throws the context's error once it ends: a stop in
/// progress holds the lock until its own deadline, not the caller's.
std::unique_lock<LifecycleMutex> lock_lifecycle(LifecycleMutex& mu, const Context& ctx) {
  std::unique_lock lk(mu, std::defer_lock);
  if (ContextAccess::can_be_cancelled(ctx)) {
    // A cancellation is a flag, not a signal: looked at every 10 ms.
    while (!lk.try_lock_for(std::chrono::milliseconds(10))) ctx.throw_if_done();
  } else if (auto deadline = ctx.deadline()) {
    while (!lk.try_lock_until(*deadline)) ctx.throw_if_done();
  } else {
    lk.lock();
  }
  return lk;
}

}  // namespace

namespace {

/// A thread that spawns into an actor system keeps a reference to the system's logger in
/// a thread-local (CAF 0.17), and the system's destructor waits until every such
/// reference is gone: it hangs while any other thread that once spawned in it lives.
/// A Beehive that owns its system lets its callers' threads go of it on the way out of
/// every call that spawns, so that it may be destroyed on any thread.
class ForgetSystem {
 public:
  explicit ForgetSystem(bool own) : own_(own) {}
  ~ForgetSystem() {
    if (own_) caf::logger::set_current_actor_system(nullptr);
  }
  ForgetSystem(const ForgetSystem&) = delete;
  ForgetSystem& operator=(const ForgetSystem&) = delete;

 private:
  bool own_;
};

}  // namespace

BeehiveCore::BeehiveCore(caf::actor_system* sys, std::shared_ptr<Store> store,
                         const std::vector<Option>& opts)
    : store_(std::move(store)), settings_(OptionSet::from(opts)) {
  if (!store_) throw Error(errc::invalid_argument, "no store");
  std::tie(stop_ctx_, cancel_reconciles_) = Context{}.with_cancel();
  std::tie(term_ctx_, cancel_term_) = stop_ctx_.with_cancel();
  backend_ = &store::backend_of(*store_);
  served_ = backend_->serve();
  clock_ = settings_.clock ? settings_.clock : std::make_shared<SystemClock>();
  timers_ = std::make_shared<const TimerClock>(clock_);
  logger_ = settings_.logger ? settings_.logger : stderr_logger();
  if (sys) {
    sys_ = sys;
  } else {
    own_cfg_ = std::make_unique<caf::actor_system_config>();
    add_message_types(*own_cfg_);
    // Idle workers of the `sharing` scheduler sleep on a condition variable; the default
    // work-stealing ones poll. Measured (bench_perf): idle CPU 35 -> 6 ms/s, context
    // switches 1 400 -> 13/s, a blocking update 122 -> 75 us.
    own_cfg_->set("scheduler.policy", caf::atom("sharing"));
    own_sys_ = std::make_unique<caf::actor_system>(*own_cfg_);
    sys_ = own_sys_.get();
  }
  services_.backend = std::shared_ptr<store::Backend>(store_, backend_);
  services_.timers = timers_;
  services_.logger = logger_;
  services_.metrics = settings_.metrics;
  if (services_.metrics) declare_store_metrics(*services_.metrics);
  // Read by the watch hub when an event watch opens (the stop ends the hub before this
  // object goes, as for schema_versions below).
  services_.event_retention = [this](const GroupKind& gk) {
    auto r = settings_.event_retention;
    if (auto k = kind(gk); k && k->event_retention) r = k->event_retention;
    if (r && r->first <= 0 && r->second.count() <= 0) r.reset();
    return r;
  };
  services_.writer = [d = directory_] { return caf::actor_cast<caf::actor>(d->writer()); };
  auto cfg = std::make_shared<RootConfig>();
  cfg->services = services_;
  cfg->clock = clock_;
  cfg->queue = queue_;
  cfg->hub_feed = hub_feed_;
  cfg->directory = directory_;
  cfg->first_writer = backend_->open_writer();
  // Aliases the store: the writer's reader may outlive this BeehiveCore by a read, and a
  // restarted writer's connection may be opened after it (see root.cpp, restart_writer).
  cfg->backend = std::shared_ptr<store::Backend>(store_, backend_);
  cfg->open_writer = [b = cfg->backend] { return b->open_writer(); };
  cfg->schema_versions = [this](const GroupKind& gk, unsigned defaults) {
    return request_versions(gk, defaults);
  };
  cfg->max_object_bytes = max_object_bytes();
  // Housekeeping (gc, retention, the log's trim) runs at least at the default resync's
  // cadence: a long resync, or none, must not let the change log and the event runs
  // grow past their retention for as long.
  const auto default_cadence = KindSettings{}.resync;
  cfg->cadence = settings_.resync_interval.value_or(default_cadence);
  if (cfg->cadence.count() <= 0 || cfg->cadence > default_cadence) cfg->cadence = default_cadence;
  if (auto& r = settings_.change_log_retention) cfg->change_log_retention = {r->first, r->second};
  ForgetSystem forget(own_sys_ != nullptr);
  root_ = sys_->spawn<caf::hidden>(detail::root, std::move(cfg));
  caf::scoped_actor self{*sys_, true};
  self->request(root_, caf::infinite, open_atom::value)
      .receive([](bool) {}, [](caf::error& err) { throw Error(errc::store, error_message(err)); });
}

BeehiveCore::~BeehiveCore() { shutdown_system(); }

void BeehiveCore::end_own_system() {
  if (!own_sys_) return;
  // CAF 0.17's actor system ends once every detached actor's thread has, and such a
  // thread lasts as long as any handle to its actor: an application that still holds
  // one (a store_writer handle it kept) would hang this destructor for ever. The system
  // ends on a thread of its own; past a grace period that thread is left to finish when
  // the last handle goes, and the destructor returns.
  auto ended = std::make_shared<std::promise<void>>();
  auto done = ended->get_future();
  std::thread end([sys = std::move(own_sys_), cfg = std::move(own_cfg_), ended]() mutable {
    sys.reset();
    cfg.reset();  // after the system, which uses it
    ended->set_value();
  });
  if (done.wait_for(own_system_grace) == std::future_status::ready) {
    end.join();
    return;
  }
  end.detach();
  ++systems_left_running;
  log(LogLevel::warning,
      "this beehive's actor system ends only once the application drops the actor handles "
      "it still holds (from store_writer(), actor_handles(), ...): drop them before the "
      "Beehive",
      {});
}

void BeehiveCore::shutdown_system() {
  // Destroyed inside one of its own reconciles or within blocks, it would wait for that
  // reconcile or block: its end goes on on another thread, once that returns. (Never so
  // in ~BeehiveCore: a pass and a block hold their runtime.)
  if (reconcile_on_this_thread(this) ||
      std::find(open_sessions.begin(), open_sessions.end(), this) != open_sessions.end()) {
    log(LogLevel::error,
        "a beehive destroyed inside one of its own reconciles or within blocks: it stops on "
        "another thread once that returns",
        {});
    std::thread([core = shared_from_this()] { core->shutdown_system(); }).detach();
    return;
  }
  try {
    // Inside a within block too (another beehive's, which stop refuses): a destructor
    // has no one to refuse, and this beehive's passes are cancelled.
    stop_now(Context{});
  } catch (...) {
  }
  if (root_) {
    ForgetSystem forget(own_sys_ != nullptr);
    {
      // Reconciles that outlived stop's deadline still use this runtime: wait for them.
      caf::scoped_actor self{*sys_, true};
      self->request(root_, caf::infinite, await_workers_atom::value)
          .receive([](bool) {}, [](caf::error&) {});
      release_claims();  // kept by a stop that left a pass running
      // The root is hidden: the actor system's end does not wait for it. Its state holds
      // the handles of detached actors, and CAF 0.17 keeps a detached actor's thread (and
      // the system's end with it) until its last handle goes: wait until the root is gone.
      self->monitor(root_);
      self->send_exit(root_, caf::exit_reason::user_shutdown);
      self->receive([](const caf::down_msg&) {});
    }
    root_ = nullptr;
  }
  end_own_system();
  // A controller that captured a Client holds this runtime: drop the controllers so the
  // cycle breaks and the store closes. Dropped outside the lock: a controller's end may
  // still call a Client, which reads the kinds (and is told `stopped`).
  std::vector<ReconcileFn> controllers;
  {
    std::lock_guard k(kinds_mu_);
    for (auto& [gk, entry] : kinds_)
      controllers.push_back(std::exchange(entry->reconcile, nullptr));
  }
}

void BeehiveCore::release_claims() {
  {
    std::lock_guard c(claims().mu);
    if (!claimed_.empty()) claims().ids.erase(claimed_);
  }
  claimed_.clear();
  run_claim_.reset();
}

void BeehiveCore::ensure_running(const Context& ctx) const {
  if (auto txn = ContextAccess::transaction(ctx); txn && txn->owner() != this)
    throw Error(errc::invalid_argument,
                "this context belongs to another beehive's within block; use it only with "
                "that beehive's clients (a transaction cannot span two beehives)");
  auto s = state_.load(std::memory_order_acquire);
  if (s == State::created || s == State::running) return;
  // An open within block goes on to its end (the writer decides: it serves the block
  // until stop's deadline, then rolls it back), and while draining, reconciles finish
  // their work (unless stop cancelled their context).
  if (ContextAccess::transaction(ctx)) return;
  if (s == State::draining && ContextAccess::is_reconcile(ctx, this)) return;
  throw Error(errc::stopped, "beehive stopped");
}

caf::actor BeehiveCore::controller(const GroupKind& gk) const { return directory_->controller(gk); }
caf::actor BeehiveCore::gc() const { return directory_->gc(); }
caf::actor BeehiveCore::event_log() const { return directory_->event_log(); }
caf::actor BeehiveCore::reader() const { return directory_->reader(); }
scheduler_actor BeehiveCore::scheduler() const {
  return caf::actor_cast<scheduler_actor>(directory_->scheduler());
}

std::optional<Time> BeehiveCore::next_timer() const {
  auto s = scheduler();
  if (!s) return std::nullopt;
  std::optional<Time> out;
  // Housekeeping (the gc's and the event log's cadence, 30 s at most) is left out: a
  // test stepping through days would step through thousands of its wakes. It runs at
  // the times the other timers and the end of the advance land on.
  std::vector<caf::actor> skipped;
  for (auto a : {directory_->gc(), directory_->event_log()})
    if (a) skipped.push_back(caf::actor_cast<caf::actor>(a));
  ForgetSystem forget(own_sys_ != nullptr);
  caf::scoped_actor self{*sys_, true};
  self->request(caf::actor_cast<scheduler_impl>(s), caf::infinite, inspect_atom::value,
                std::move(skipped))
      .receive(
          [&](Time earliest) {
            if (earliest != Time::max()) out = earliest;
          },
          [](caf::error&) {});
  return out;
}

namespace {
/// Asks `c` to requeue `id`; the reply says once the object is queued.
auto send_requeue(const caf::actor& c, ObjectID id, bool reset_backoff) {
  auto r = std::make_shared<BlockingRequeue>();
  r->request = requeue_request{id, reset_backoff};
  auto reply = r->reply;
  caf::anon_send(caf::actor_cast<controller_impl>(c), std::move(r));
  return reply;
}
}  // namespace

void BeehiveCore::requeue_after_commit(const GroupKind& gk, ObjectID id, bool reset_backoff) {
  if (state_.load(std::memory_order_acquire) == State::created) {
    write(Context{}, log_requeue_request{gk, id, reset_backoff}, {});  // as requeue's
    return;
  }
  if (auto c = directory_->controller(gk)) send_requeue(c, id, reset_backoff);
}

void BeehiveCore::requeue(const Context& ctx, const GroupKind& gk, ObjectID id,
                          bool reset_backoff) {
  if (!kind(gk)) throw Error(errc::no_controller, to_string(gk) + " has no controller");
  // Not started: the controller that runs the kind may be another process's (this one
  // a tool or a client beside it), so the request goes through the change log, as a
  // standby's does. Should this process start later, it reconciles everything anyway.
  if (state_.load(std::memory_order_acquire) == State::created) {
    write(ctx, log_requeue_request{gk, id, reset_backoff}, {});
    return;
  }
  auto c = directory_->controller(gk);
  if (!c) return;  // being restarted: its restart lists the kind and queues every object
  auto reply = send_requeue(c, id, reset_backoff);
  try {
    reply->take(ctx, false);  // answered once the object is queued
  } catch (const Error& e) {
    // The controller went before it queued the object (a crash) while the beehive runs:
    // its restart lists the kind and queues every object, this one included.
    if (auto s = state_.load(std::memory_order_acquire);
        e.value() == errc::stopped && (s == State::created || s == State::running))
      return;
    throw;
  }
}

std::function<void(const Context&)> BeehiveCore::start(const Context& ctx) {
  auto lk = lock_lifecycle(mu_, ctx);
  ForgetSystem forget(own_sys_ != nullptr);
  if (state_ == State::running) throw Error(errc::already_started, "beehive already started");
  if (state_ != State::created) throw Error(errc::stopped, "beehive stopped");
  ctx.throw_if_done();
  auto id = backend_->identity();
  {
    std::lock_guard c(claims().mu);
    if (!claims().ids.insert(id).second)
      throw Error(errc::store_in_use, id + " is used by another running beehive");
  }
  try {
    run_claim_ = backend_->claim();  // and across processes
    follow_leadership();
  } catch (...) {
    std::lock_guard c(claims().mu);
    claims().ids.erase(id);
    throw;
  }
  claimed_ = id;
  if (auto warning = backend_->exposure(); !warning.empty())
    log(LogLevel::warning, warning, {{"store", id}});
  StartPlan plan;
  {
    std::lock_guard k(kinds_mu_);
    for (auto& [gk, entry] : kinds_) plan.kinds.push_back(entry);
  }
  plan.retention = retention_policy();
  std::weak_ptr<BeehiveCore> weak = shared_from_this();
  plan.reconcile = [weak](const KindEntry& kind, ObjectID id) {
    if (auto rt = weak.lock()) return rt->reconcile_once(kind, id);
    return Outcome{Outcome::cancelled, {}, "beehive gone"};
  };
  std::optional<std::string> failed;
  {
    caf::scoped_actor self{*sys_, true};
    self->request(root_, caf::infinite, std::move(plan))
        .receive([](bool) {},
                 [&failed](caf::error& err) {
                   failed = error_message(err);
                   if (failed->empty()) failed = caf::to_string(err);
                 });
  }
  state_ = State::running;
  // Started, it stays so: a context that ended meanwhile (the start is short) would
  // leave a beehive stopped for good, which no later start could run.
  if (failed) {  // a start that failed half-way leaves nothing running
    lk.unlock();
    try {
      stop(Context{});
    } catch (...) {
    }
    throw Error(errc::stopped, "the beehive could not start: " + *failed);
  }
  return [weak](const Context& stop_ctx) {
    if (auto rt = weak.lock()) rt->stop(stop_ctx);
  };
}

trim_events_request BeehiveCore::retention_policy() const {
  trim_events_request policy;
  auto retention = [](const std::pair<int, std::chrono::milliseconds>& r) {
    return beehive::event_retention{r.first, r.second};
  };
  if (settings_.event_retention) policy.fallback = retention(*settings_.event_retention);
  std::lock_guard k(kinds_mu_);
  for (auto& [gk, entry] : kinds_)
    if (entry->event_retention)
      policy.retention.emplace_back(gk, retention(*entry->event_retention));
  return policy;
}

void BeehiveCore::settle(const Context& ctx) {
  // A settle waits until no reconcile runs: from inside one it would wait for itself.
  if (reconcile_on_this_thread(this) || ContextAccess::is_reconcile(ctx, this))
    throw Error(errc::invalid_argument,
                "settle called from inside a reconcile would wait for that reconcile forever");
  ctx.throw_if_done();
  auto stopped = [this] {
    if (auto s = state_.load(); s == State::draining || s == State::stopped)
      throw Error(errc::stopped, "beehive stopped");
  };
  stopped();
  if (!root_) return;
  SettleRequest req;
  caf::anon_send(root_, req);
  // Bounded by the context, its deadline and its cancellation alike: the root stops
  // settling for a caller that went.
  req.reply->take(ctx, false);
  ctx.throw_if_done();
  // A stop that overlapped the settle quietened the controllers by cancelling them: that
  // is not the quiet asked for.
  stopped();
}

StopReport BeehiveCore::stop_actors(const Context& ctx) {
  StopReport report;
  if (!root_) return report;
  StopRequest req{ctx.deadline(), {}};
  if (ContextAccess::can_be_cancelled(ctx)) req.ended = [ctx] { return ctx.done(); };
  caf::scoped_actor self{*sys_, true};
  self->request(root_, caf::infinite, std::move(req))
      .receive([&](const StopReport& r) { report = r; }, [](caf::error&) {});
  return report;
}

void BeehiveCore::stop(const Context& ctx) {
  if (state_.load(std::memory_order_acquire) == State::stopped) return;  // a no-op, from anywhere
  // Stop waits for every reconcile and every within block: from inside one it would
  // wait for itself.
  if (reconcile_on_this_thread(this))
    throw Error(errc::invalid_argument,
                "stop called from inside a reconcile would wait for that reconcile forever");
  // Any runtime's block, not only this one's: this runtime's reconciles may be waiting to
  // write to the runtime whose block this thread holds open.
  if (!open_sessions.empty())
    throw Error(errc::invalid_argument,
                "stop called inside a within block would wait for that block forever");
  stop_now(ctx);
}

void BeehiveCore::stop_now(const Context& ctx) {
  auto lk = lock_lifecycle(mu_, ctx);
  ForgetSystem forget(own_sys_ != nullptr);
  if (state_ == State::stopped) return;
  bool was_running = state_ == State::running;
  state_ = State::draining;
  // A draining process leads nothing (is_leader says so): nor does the gauge, before
  // leadership is handed over below. Nor does it take the lead meanwhile: it would run
  // no controllers, and hold every other process off until its stop ends.
  if (was_running) backend_->stand_down();
  if (services_.metrics) report_leader(*services_.metrics, false);
  cancel_reconciles_();  // reconciles in flight see their context end now
  auto report = stop_actors(ctx);
  state_ = State::stopped;
  served_.reset();  // its writer is gone: the store may serve another beehive
  {
    std::lock_guard k(kinds_mu_);
    for (auto& [gk, entry] : kinds_) {
      entry->schedules->clear_all();  // nothing runs any more
      entry->schedules->finish_all(errc::stopped);
    }
  }
  if (!was_running) {
    end_leadership_streams();  // opened before a start that never came, or failed
    return;
  }
  // A pass that outlived the deadline still runs: the database stays claimed until it
  // ends (the destructor waits for it), or a beehive started on it meanwhile would
  // reconcile the object that pass holds, at the same time. Unless the store fences a
  // leader's writes by term: leadership then goes to a standby at once, as it must.
  if (report.drained || backend_->fences_leaders()) release_claims();
  unfollow_leadership();
  // Given up at the deadline, or when the context was cancelled: the caller learns which.
  auto code = ctx.error() ? static_cast<errc>(ctx.error().value()) : errc::deadline_exceeded;
  auto when =
      code == errc::cancelled ? "the stop's context was cancelled" : "the stop deadline passed";
  if (!report.drained) throw Error(code, std::string("reconciles still running when ") + when);
  if (!report.closed)
    throw Error(code, std::string("a within block was still open when ") + when + "; rolled back");
}

}  // namespace beehive::detail
