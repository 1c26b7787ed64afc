#include "runtime.hpp"

#include <sched.h>

#include <iostream>
#include <set>
#include <string>

#include "context_internal.hpp"
#include "metrics/store_metrics.hpp"
#include "transaction.hpp"

namespace beehive::detail {

namespace {

// Databases claimed by a running beehive in this process.
std::mutex claims_mu;
std::set<std::string> claims;

// within blocks open on this thread: a write from here outside them would wait for
// them forever.
thread_local int open_sessions = 0;
// Reconciles running on this thread: a stop from here would wait for itself.
thread_local int in_reconcile = 0;

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

Runtime::Runtime(caf::actor_system* sys, std::shared_ptr<Store> store,
                 const std::vector<Option>& opts)
    : store_(std::move(store)), settings_(OptionSet::from(opts)) {
  if (!store_) throw Error(errc::invalid_argument, "no store");
  std::tie(stop_ctx_, cancel_reconciles_) = Context{}.with_cancel();
  backend_ = &store::backend_of(*store_);
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
  services_.backend = backend_;
  services_.timers = timers_;
  services_.logger = logger_;
  services_.metrics = settings_.metrics;
  if (services_.metrics) declare_store_metrics(*services_.metrics);
  auto cfg = std::make_shared<RootConfig>();
  cfg->services = services_;
  cfg->clock = clock_;
  cfg->queue = queue_;
  cfg->hub_feed = hub_feed_;
  cfg->directory = directory_;
  cfg->first_writer = backend_->open_writer();
  cfg->open_writer = [b = backend_] { return b->open_writer(); };
  // Aliases the store: the writer's reader may outlive this Runtime by a read.
  cfg->backend = std::shared_ptr<store::Backend>(store_, backend_);
  cfg->schema_versions = [this](const GroupKind& gk) {
    return SchemaVersions{spec_version(gk), status_version(gk)};
  };
  cfg->max_object_bytes = settings_.max_object_bytes.value_or(default_max_object_bytes);
  cfg->cadence = settings_.resync_interval.value_or(KindSettings{}.resync);
  ForgetSystem forget(own_sys_ != nullptr);
  root_ = sys_->spawn<caf::hidden>(detail::root, std::move(cfg));
  caf::scoped_actor self{*sys_, true};
  self->request(root_, caf::infinite, open_atom::value)
      .receive([](bool) {}, [](caf::error& err) { throw Error(errc::store, error_message(err)); });
}

template <class Watch, class Core>
void Runtime::open_watch(std::shared_ptr<Watch> w, const std::shared_ptr<Core>& core) {
  w->core = core;
  w->subscription = next_subscription();
  std::weak_ptr<Runtime> weak = weak_from_this();
  core->set_on_end([weak, sub = w->subscription] {
    if (auto rt = weak.lock())
      if (auto h = rt->watch_hub()) caf::anon_send(h, unsubscribe_atom::value, sub);
  });
  auto ready = w->ready;
  caf::anon_send(watch_hub(), std::move(w));
  ready->take(Context{});
}

std::shared_ptr<EventCore> Runtime::watch_events(const Context& ctx, ObjectID id,
                                                 const EventQuery& q) {
  ensure_running(ctx);
  ctx.throw_if_done();
  auto core = std::make_shared<EventCore>(ctx);
  auto w = std::make_shared<EventStreamWatch>();
  w->filter = {id, q, nullptr};
  open_watch(std::move(w), core);
  return core;
}

std::shared_ptr<StreamCore<Schedule>> Runtime::watch_schedule(const Context& ctx,
                                                              const GroupKind& gk, ObjectID id) {
  ensure_running(ctx);
  ctx.throw_if_done();
  auto entry = kind(gk);
  if (!entry) throw Error(errc::no_controller, to_string(gk) + " has no controller");
  auto core = std::make_shared<StreamCore<Schedule>>(ctx);
  entry->schedules->watch(id, core);
  return core;
}

std::shared_ptr<ChangeCore> Runtime::watch(const Context& ctx, const GroupKind& gk,
                                           std::optional<ObjectID> id) {
  ensure_running(ctx);
  ctx.throw_if_done();
  auto core = std::make_shared<ChangeCore>(ctx, merge_changes);
  auto w = std::make_shared<StreamWatch>();
  w->gk = gk;
  w->id = id;
  open_watch(std::move(w), core);
  return core;
}

std::vector<Ref> Runtime::related(const Context& ctx, ObjectID id, unsigned relation) {
  ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx))
    return read_in_transaction(ctx, ReadOp{ReadOp::related, {}, id, {}, relation}).refs;
  return backend().reader()->related(id, relation);
}

Runtime::~Runtime() { shutdown_system(); }

void Runtime::shutdown_system() {
  try {
    stop(Context{});
  } catch (...) {
  }
  if (root_) {
    ForgetSystem forget(own_sys_ != nullptr);
    {
      // Reconciles that outlived stop's deadline still use this runtime: wait for them.
      caf::scoped_actor self{*sys_, true};
      self->request(root_, caf::infinite, await_workers_atom::value)
          .receive([](bool) {}, [](caf::error&) {});
    }
    caf::anon_send_exit(root_, caf::exit_reason::user_shutdown);
    root_ = nullptr;
  }
  own_sys_.reset();
  own_cfg_.reset();
  // A controller that captured a Client holds this runtime: drop the controllers so the
  // cycle breaks and the store closes.
  std::lock_guard k(kinds_mu_);
  for (auto& [gk, entry] : kinds_) entry->reconcile = nullptr;
}

void Runtime::ensure_running(const Context& ctx) const {
  auto s = state_.load(std::memory_order_acquire);
  if (s == State::created || s == State::running) return;
  // An open within block goes on to its end (the writer decides: it serves the block
  // until stop's deadline, then rolls it back), and while draining, reconciles finish
  // their work (unless stop cancelled their context).
  if (ContextAccess::transaction(ctx)) return;
  if (s == State::draining && ContextAccess::is_reconcile(ctx)) return;
  throw Error(errc::stopped, "beehive stopped");
}

WriteReply Runtime::write(const Context& ctx, WriteOp op, RowCheck check) {
  ensure_running(ctx);
  ctx.throw_if_done();
  auto w = std::make_shared<BlockingWrite>();
  if (auto txn = ContextAccess::transaction(ctx))
    w->session = txn->session();
  else if (open_sessions > 0)
    throw Error(errc::invalid_argument,
                "a write outside the within block open on this thread would wait for it "
                "forever; use the context within passes to its function");
  w->op = std::move(op);
  w->check = std::move(check);
  w->cpu = sched_getcpu();  // see reply_group
  auto reply = w->reply;
  queue_->push(std::move(w));
  return reply->take(ctx, queue_->replies_come_quickly());
}

std::optional<ObjectRow> Runtime::read_committed(ObjectID id) {
  return backend_->reader()->get(id);
}

void Runtime::after_commit(const Context& ctx, std::function<void()> fn) {
  if (auto txn = ContextAccess::transaction(ctx))
    txn->after_commit(std::move(fn));
  else
    fn();
}

void Runtime::within(const Context& ctx, const std::function<void(const Context&)>& fn) {
  // Session steps never give up half-way: they wait without the caller's deadline.
  auto step = [this](const std::shared_ptr<Transaction>& txn, SessionCmd::Kind k) {
    return write(ContextAccess::with_transaction(Context{}, txn), SessionCmd{k}, {});
  };
  // Undoing after a throw: the block's own exception is what the caller should see (a
  // writer that stopped meanwhile rolled the transaction back already).
  auto undo = [&](const std::shared_ptr<Transaction>& txn, SessionCmd::Kind k) {
    try {
      step(txn, k);
    } catch (const Error&) {
    }
  };
  if (auto txn = ContextAccess::transaction(ctx)) {
    step(txn, SessionCmd::savepoint);
    txn->mark();
    try {
      fn(ctx);
    } catch (...) {
      txn->drop_to_mark();
      undo(txn, SessionCmd::rollback_to);
      throw;
    }
    txn->keep();
    step(txn, SessionCmd::release);
    return;
  }
  auto begun = write(ctx, SessionCmd{SessionCmd::begin}, {});
  auto txn = std::make_shared<Transaction>(begun.session);
  auto inner = ContextAccess::with_transaction(ctx, txn);
  ++open_sessions;
  try {
    fn(inner);
  } catch (...) {
    --open_sessions;
    txn->take_post_commit();  // dropped; they hold the block's context, which holds txn
    undo(txn, SessionCmd::rollback);
    throw;
  }
  --open_sessions;
  auto hooks = txn->take_post_commit();
  step(txn, SessionCmd::commit);
  for (auto& f : hooks) f();
}

void Runtime::register_kind(const GroupKind& gk, ReconcileFn fn, const std::vector<Option>& opts) {
  std::lock_guard lk(mu_);
  if (state_ == State::stopped || state_ == State::draining)
    throw Error(errc::stopped, "beehive stopped");
  if (state_ != State::created)
    throw Error(errc::already_started, "register controllers before start");
  if (kind(gk)) throw Error(errc::already_registered, to_string(gk) + " already has a controller");
  auto kind_opts = OptionSet::from(opts);
  auto entry = std::make_shared<KindEntry>();
  entry->gk = gk;
  entry->reconcile = std::move(fn);
  auto& s = entry->settings;
  s.concurrency = kind_opts.concurrency.value_or(1);
  if (auto r = kind_opts.resync_interval.has_value() ? kind_opts.resync_interval
                                                     : settings_.resync_interval)
    s.resync = *r;
  entry->event_retention = kind_opts.event_retention;
  entry->migrator = kind_opts.migrator;
  if (settings_.metrics)
    entry->metrics = std::make_shared<KindMetrics>(settings_.metrics, gk, s.concurrency);
  s.apply(settings_, false);
  s.apply(kind_opts, true);
  std::lock_guard k(kinds_mu_);
  kinds_.emplace(gk, std::move(entry));
}

const Migrator* Runtime::migrator(const GroupKind& gk) const {
  auto k = kind(gk);
  return k ? k->migrator.get() : nullptr;
}

int Runtime::spec_version(const GroupKind& gk) const {
  auto* m = migrator(gk);
  return m ? m->schema_version_spec() : 0;
}

int Runtime::status_version(const GroupKind& gk) const {
  auto* m = migrator(gk);
  return m ? m->schema_version_status() : 0;
}

caf::actor Runtime::controller(const GroupKind& gk) const { return directory_->controller(gk); }
caf::actor Runtime::gc() const { return directory_->gc(); }
caf::actor Runtime::event_log() const { return directory_->event_log(); }
scheduler_actor Runtime::scheduler() const {
  return caf::actor_cast<scheduler_actor>(directory_->scheduler());
}

void Runtime::requeue(const GroupKind& gk, ObjectID id, bool reset_backoff) {
  if (!kind(gk)) throw Error(errc::no_controller, to_string(gk) + " has no controller");
  // Before start the request has nowhere to go: start reconciles everything anyway.
  if (auto c = directory_->controller(gk)) caf::anon_send(c, requeue_request{id, reset_backoff});
}

std::shared_ptr<KindEntry> Runtime::kind(const GroupKind& gk) const {
  std::lock_guard lk(kinds_mu_);
  auto it = kinds_.find(gk);
  return it == kinds_.end() ? nullptr : it->second;
}

Outcome Runtime::reconcile_once(const KindEntry& kind, ObjectID id) {
  Outcome out;
  ++in_reconcile;
  struct Leave {
    ~Leave() { --in_reconcile; }
  } leave;
  auto exists = [&] {
    auto row = backend_->reader()->get(id);
    return row && row->meta.group == kind.gk.group && row->meta.kind == kind.gk.kind;
  };
  try {
    auto row = backend_->reader()->get(id);
    if (!row || row->meta.group != kind.gk.group || row->meta.kind != kind.gk.kind) {
      out.kind = Outcome::gone;
    } else {
      ControllerClientCore core(shared_from_this(), kind.gk);
      out = kind.reconcile(ContextAccess::for_reconcile(stop_ctx_), core, *row);
      if (out.kind == Outcome::error) {
        // Stop cancelled the pass: not a failure. Or the object went meanwhile (the GC
        // collected it once the pass removed the last finalizer): nothing left to do.
        if (stop_ctx_.done())
          out = {Outcome::cancelled, {}, out.message};
        else if (!exists())
          out = {Outcome::gone, {}, out.message};
      }
      if (out.kind == Outcome::quarantined)
        log(LogLevel::warning,
            "quarantined " + to_string(kind.gk) + " " + std::to_string(id) +
                ", which does not decode",
            {{"kind", to_string(kind.gk)}, {"id", std::to_string(id)}, {"reason", out.message}});
    }
  } catch (const std::exception& e) {
    out = {Outcome::error, {}, e.what()};  // the store failed to read it: retry later
  } catch (...) {
    out = {Outcome::error, {}, "unknown exception"};
  }
  return out;
}

std::function<void(const Context&)> Runtime::start(const Context& ctx) {
  std::unique_lock lk(mu_);
  ForgetSystem forget(own_sys_ != nullptr);
  if (state_ == State::running) throw Error(errc::already_started, "beehive already started");
  if (state_ != State::created) throw Error(errc::stopped, "beehive stopped");
  ctx.throw_if_done();
  auto id = backend_->identity();
  {
    std::lock_guard c(claims_mu);
    if (!claims.insert(id).second)
      throw Error(errc::store_in_use, id + " is used by another running beehive");
  }
  try {
    run_claim_ = backend_->claim();  // and across processes
  } catch (...) {
    std::lock_guard c(claims_mu);
    claims.erase(id);
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
  std::weak_ptr<Runtime> weak = shared_from_this();
  plan.reconcile = [weak](const KindEntry& kind, ObjectID id) {
    if (auto rt = weak.lock()) return rt->reconcile_once(kind, id);
    return Outcome{Outcome::cancelled, {}, "beehive gone"};
  };
  {
    caf::scoped_actor self{*sys_, true};
    self->request(root_, caf::infinite, std::move(plan)).receive([](bool) {}, [](caf::error&) {});
  }
  state_ = State::running;
  if (ctx.done()) {  // a start cancelled half-way leaves nothing running
    lk.unlock();
    try {
      stop(Context{});
    } catch (...) {
    }
    ctx.throw_if_done();
  }
  return [weak](const Context& stop_ctx) {
    if (auto rt = weak.lock()) rt->stop(stop_ctx);
  };
}

trim_events_request Runtime::retention_policy() const {
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

void Runtime::settle(const Context& ctx) {
  ctx.throw_if_done();
  if (!root_) return;
  ForgetSystem forget(own_sys_ != nullptr);
  caf::scoped_actor self{*sys_, true};
  caf::duration timeout = caf::infinite;
  if (auto d = ctx.deadline())
    timeout = caf::duration{std::max(std::chrono::ceil<std::chrono::milliseconds>(
                                         *d - std::chrono::steady_clock::now()),
                                     std::chrono::milliseconds(1))};
  std::optional<Error> failure;
  self->request(root_, timeout, settle_atom::value)
      .receive([](bool) {},
               [&](caf::error& err) {
                 if (err == caf::sec::request_timeout)
                   failure = Error(errc::deadline_exceeded, "not settled before the deadline");
                 else
                   failure = Error(to_errc(err).value_or(errc::store), error_message(err));
               });
  if (failure) throw *failure;
  ctx.throw_if_done();
}

StopReport Runtime::stop_actors(std::optional<Context::Deadline> deadline) {
  StopReport report;
  if (!root_) return report;
  caf::scoped_actor self{*sys_, true};
  self->request(root_, caf::infinite, StopRequest{deadline})
      .receive([&](const StopReport& r) { report = r; }, [](caf::error&) {});
  return report;
}

void Runtime::stop(const Context& ctx) {
  // Stop waits for every reconcile and every within block: from inside one it would
  // wait for itself.
  if (in_reconcile > 0)
    throw Error(errc::invalid_argument,
                "stop called from inside a reconcile would wait for that reconcile forever");
  if (open_sessions > 0)
    throw Error(errc::invalid_argument,
                "stop called inside a within block would wait for that block forever");
  std::unique_lock lk(mu_);
  ForgetSystem forget(own_sys_ != nullptr);
  if (state_ == State::stopped) return;
  bool was_running = state_ == State::running;
  state_ = State::draining;
  cancel_reconciles_();  // reconciles in flight see their context end now
  auto report = stop_actors(ctx.deadline());
  state_ = State::stopped;
  {
    std::lock_guard k(kinds_mu_);
    for (auto& [gk, entry] : kinds_) entry->schedules->finish_all(errc::stopped);
  }
  if (!was_running) return;
  {
    std::lock_guard c(claims_mu);
    claims.erase(claimed_);
  }
  claimed_.clear();
  run_claim_.reset();
  if (!report.drained)
    throw Error(errc::deadline_exceeded, "reconciles still running when the stop deadline passed");
  if (!report.closed)
    throw Error(errc::deadline_exceeded,
                "a within block was still open when the stop deadline passed; rolled back");
}

}  // namespace beehive::detail
