#include "runtime.hpp"

#include <sched.h>

#include <iostream>
#include <set>
#include <string>

#include "context_internal.hpp"
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

/// A controller's writer subscription: only the commits that concern its kind.
RecordFilter controller_filter(const GroupKind& gk) {
  return [gk](const commit_record& rec) { return controller_wants(gk, rec); };
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
  ForgetSystem forget(own_sys_ != nullptr);
  // Detached: restarting a controller waits for the writer (see spawn_controller).
  supervisor_ = sys_->spawn<caf::detached + caf::hidden>(detail::supervisor, this);
  spawn_writer();
  spawn_hub();
}

void Runtime::spawn_writer(std::vector<Subscriber> subscribers, caf::actor hub) {
  auto cfg = std::make_shared<StoreWriterConfig>();
  cfg->subscribers = std::move(subscribers);
  cfg->hub = std::move(hub);
  cfg->hub_feed = hub_feed_;
  // Aliases the store: the writer's reader may outlive this Runtime by a read.
  cfg->backend = std::shared_ptr<store::Backend>(store_, backend_);
  cfg->schema_versions = [this](const GroupKind& gk) {
    return SchemaVersions{spec_version(gk), status_version(gk)};
  };
  cfg->writer = backend_->open_writer();
  cfg->clock = clock_;
  cfg->queue = queue_;
  cfg->metrics = settings_.metrics;
  cfg->max_object_bytes = settings_.max_object_bytes.value_or(default_max_object_bytes);
  // Detached: the writer blocks on disk, and a dedicated thread makes the blocking
  // hand-off one wake each way.
  auto w = sys_->spawn<caf::detached>(detail::store_writer, std::move(cfg));
  {
    std::lock_guard k(kinds_mu_);
    writer_ = w;
    writer_public_ = caf::actor_cast<store_writer_actor>(w);
  }
  caf::anon_send(supervisor_, caf::actor_cast<caf::actor>(w));
  queue_->set_wake([w] { caf::anon_send(w, serve_queue_atom::value); });
}

void Runtime::sync_with_writer() {
  // The writer's mailbox is in order: once it answers this, it has handled every message
  // sent to it before (subscriptions above all), before it serves queued writes again.
  caf::scoped_actor self{*sys_, true};
  self->request(writer_public_, caf::infinite, inspect_atom::value)
      .receive([](const store_writer_state&) {}, [](caf::error&) {});
}

void Runtime::spawn_hub() {
  hub_feed_->watches = 0;  // a restarted hub starts without watches
  auto h = sys_->spawn(detail::watch_hub, this);
  caf::anon_send(writer_, hub_atom::value, caf::actor_cast<caf::actor>(h));
  sync_with_writer();  // no commit may escape the hub once it serves watches
  caf::anon_send(supervisor_, caf::actor_cast<caf::actor>(h));
  std::lock_guard k(kinds_mu_);
  hub_ = std::move(h);
}

watch_hub_impl Runtime::hub() const {
  std::lock_guard k(kinds_mu_);
  return hub_;
}

void Runtime::restart(const caf::actor_addr& dead, const caf::error& reason) {
  std::lock_guard lk(mu_);
  auto s = state_.load();
  if (s == State::draining || s == State::stopped) return;  // stop ends them on purpose
  auto say = [&](const std::string& what) {
    log(LogLevel::error, what + " failed; restarted from the store",
        {{"reason", caf::to_string(reason)}});
  };
  if (writer_ && writer_.address() == dead) {
    // Its transaction, if any, died with its connection (SQLite rolls it back); what
    // callers queued is served by the new writer, which the other actors subscribe to.
    say("the store writer");
    // The subscribers come with the writer, not in later messages: a caller's write can
    // reach the new writer before anything this thread sends it.
    std::vector<Subscriber> subscribers;
    for (auto& [gk, entry] : kinds_)
      if (entry->controller) subscribers.push_back({entry->controller, controller_filter(gk)});
    spawn_writer(std::move(subscribers), caf::actor_cast<caf::actor>(hub()));
    caf::anon_send(writer_, serve_queue_atom::value);  // what callers queued meanwhile
    if (gc_) {  // they hold the writer's handle: new ones for the new writer
      caf::anon_send_exit(gc_, caf::exit_reason::user_shutdown);
      spawn_gc();
    }
    if (event_log_) {
      caf::anon_send_exit(event_log_, caf::exit_reason::user_shutdown);
      spawn_event_log();
    }
    return;
  }
  if (hub_ && hub_.address() == dead) {
    say("the watch hub");
    spawn_hub();
    return;
  }
  if (s != State::running) return;
  for (auto& [gk, entry] : kinds_) {
    if (entry->controller && entry->controller.address() == dead) {
      say("the controller of " + to_string(gk));
      ++entry->restarts;
      spawn_controller(entry);
      return;
    }
  }
  if (gc_ && gc_.address() == dead) {
    say("the gc");
    spawn_gc();
    return;
  }
  if (event_log_ && event_log_.address() == dead) {
    say("the event log");
    spawn_event_log();
    return;
  }
  if (scheduler_ && scheduler_.address() == dead) {
    // Controllers and the gc hold the scheduler: they restart with the new one.
    say("the scheduler");
    kill_controllers();
    spawn_controllers();
  }
}

template <class Watch, class Core>
void Runtime::open_watch(std::shared_ptr<Watch> w, const std::shared_ptr<Core>& core) {
  w->core = core;
  w->subscription = next_subscription();
  std::weak_ptr<Runtime> weak = weak_from_this();
  core->set_on_end([weak, sub = w->subscription] {
    if (auto rt = weak.lock())
      if (auto h = rt->hub()) caf::anon_send(h, unsubscribe_atom::value, sub);
  });
  auto ready = w->ready;
  caf::anon_send(hub(), std::move(w));
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
  entry->board->watch(id, core);
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
  stop_writer();
  std::lock_guard lk(mu_);
  {
    std::lock_guard k(kinds_mu_);
    for (auto& [gk, entry] : kinds_) entry->controller = nullptr;
    scheduler_ = nullptr;
    gc_ = nullptr;
    event_log_ = nullptr;
  }
  if (supervisor_) caf::anon_send_exit(supervisor_, caf::exit_reason::user_shutdown);
  supervisor_ = nullptr;
  own_sys_.reset();  // waits for every actor, reconciles still running included
  own_cfg_.reset();
  {
    // In an application's system, wait for reconciles that outlived stop's deadline. A
    // job dropped unserved releases its flight too, so this cannot wait for nothing.
    std::unique_lock f(flight_mu_);
    flight_cv_.wait(f, [&] { return in_flight_ == 0; });
  }
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
  if (settings_.metrics) entry->metrics = std::make_shared<KindMetrics>(settings_.metrics, gk);
  for (auto r : {settings_.max_retry_interval, kind_opts.max_retry_interval})
    if (r && r->count() > 0) s.max_retry = *r;
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

caf::actor Runtime::controller(const GroupKind& gk) const {
  std::lock_guard lk(kinds_mu_);
  auto it = kinds_.find(gk);
  return it == kinds_.end() ? caf::actor{} : it->second->controller;
}

caf::actor Runtime::gc() const {
  std::lock_guard lk(kinds_mu_);
  return gc_;
}

caf::actor Runtime::event_log() const {
  std::lock_guard lk(kinds_mu_);
  return event_log_;
}

scheduler_actor Runtime::scheduler() const {
  std::lock_guard lk(kinds_mu_);
  return caf::actor_cast<scheduler_actor>(scheduler_);
}

void Runtime::requeue(const GroupKind& gk, ObjectID id, bool reset_backoff) {
  std::lock_guard lk(kinds_mu_);
  auto it = kinds_.find(gk);
  if (it == kinds_.end()) throw Error(errc::no_controller, to_string(gk) + " has no controller");
  // Before start the request has nowhere to go: start reconciles everything anyway.
  if (it->second->controller)
    caf::anon_send(it->second->controller, requeue_request{id, reset_backoff});
}

std::shared_ptr<KindEntry> Runtime::kind(const GroupKind& gk) const {
  std::lock_guard lk(kinds_mu_);
  auto it = kinds_.find(gk);
  return it == kinds_.end() ? nullptr : it->second;
}

FlightPtr Runtime::begin_flight() {
  {
    std::lock_guard lk(flight_mu_);
    ++in_flight_;
  }
  return std::make_shared<Flight>(weak_from_this());
}

Flight::~Flight() {
  if (auto r = rt.lock()) {
    {
      std::lock_guard lk(r->flight_mu_);
      --r->in_flight_;
    }
    r->flight_cv_.notify_all();
  }
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
  std::lock_guard lk(mu_);
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
  spawn_controllers();
  if (ctx.done()) {  // a start cancelled half-way leaves nothing running
    drain_reconciles(std::nullopt);
    kill_controllers();
    std::lock_guard c(claims_mu);
    claims.erase(claimed_);
    claimed_.clear();
    run_claim_.reset();
    ctx.throw_if_done();
  }
  state_ = State::running;
  std::weak_ptr<Runtime> weak = shared_from_this();
  return [weak](const Context& stop_ctx) {
    if (auto rt = weak.lock()) rt->stop(stop_ctx);
  };
}

void Runtime::spawn_controllers() {
  {
    auto sched = sys_->spawn(detail::scheduler, timers_);
    caf::anon_send(supervisor_, caf::actor_cast<caf::actor>(sched));
    std::lock_guard k(kinds_mu_);
    scheduler_ = sched;
  }
  if (auto* manual = dynamic_cast<ManualClock*>(clock_.get())) {
    caf::actor_addr addr = caf::actor_cast<caf::actor_addr>(scheduler_);
    clock_token_ = manual->subscribe([addr] {
      if (auto s = caf::actor_cast<caf::actor>(addr)) caf::anon_send(s, tick_atom::value);
    });
  }
  for (auto& [gk, entry] : kinds_) spawn_controller(entry);
  spawn_gc();
  spawn_event_log();
}

void Runtime::spawn_controller(const std::shared_ptr<KindEntry>& entry) {
  auto c = caf::actor_cast<caf::actor>(sys_->spawn(detail::controller, entry, this, scheduler_));
  caf::anon_send(writer_, subscribe_atom::value, c, controller_filter(entry->gk));
  caf::anon_send(supervisor_, c);
  {
    std::lock_guard k(kinds_mu_);
    entry->controller = c;
  }
  // Once the writer has the subscription, every commit after it reaches the controller,
  // and its start lists everything before.
  sync_with_writer();
  caf::anon_send(c, start_atom::value);
}

Periodic Runtime::periodic() const {
  return {writer_public_, scheduler_, timers_,
          settings_.resync_interval.value_or(KindSettings{}.resync), logger_};
}

void Runtime::spawn_gc() {
  auto g = caf::actor_cast<caf::actor>(sys_->spawn(detail::gc, periodic()));
  adopt(g, RecordFilter{gc_wants}, gc_);
}

void Runtime::spawn_event_log() {
  trim_events_request policy;
  auto retention = [](const std::pair<int, std::chrono::milliseconds>& r) {
    return event_retention{r.first, r.second};
  };
  if (settings_.event_retention) policy.fallback = retention(*settings_.event_retention);
  for (auto& [gk, entry] : kinds_)
    if (entry->event_retention)
      policy.retention.emplace_back(gk, retention(*entry->event_retention));
  auto e =
      caf::actor_cast<caf::actor>(sys_->spawn(detail::event_log, periodic(), std::move(policy)));
  adopt(e, RecordFilter{has_event_runs}, event_log_);
}

void Runtime::adopt(const caf::actor& a, RecordFilter wants, caf::actor& slot) {
  caf::anon_send(writer_, subscribe_atom::value, a, std::move(wants));
  sync_with_writer();
  caf::anon_send(supervisor_, a);
  {
    std::lock_guard k(kinds_mu_);
    slot = a;
  }
  caf::anon_send(a, start_atom::value);
}

void Runtime::kill_controllers() {
  for (auto& [gk, entry] : kinds_) {
    caf::actor c;
    {
      std::lock_guard k(kinds_mu_);
      c.swap(entry->controller);
    }
    if (!c) continue;
    caf::anon_send(writer_, unsubscribe_atom::value, c);
    caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  }
  for (auto* slot : {&gc_, &event_log_}) {
    if (!*slot) continue;
    caf::anon_send(writer_, unsubscribe_atom::value, *slot);
    caf::anon_send_exit(*slot, caf::exit_reason::user_shutdown);
    std::lock_guard k(kinds_mu_);
    *slot = nullptr;
  }
  if (auto* manual = dynamic_cast<ManualClock*>(clock_.get()); manual && clock_token_)
    manual->unsubscribe(clock_token_);
  clock_token_ = 0;
  if (scheduler_) caf::anon_send_exit(scheduler_, caf::exit_reason::user_shutdown);
  std::lock_guard k(kinds_mu_);
  scheduler_ = nullptr;
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
  if (state_ == State::created) {  // never started: nothing to drain
    stop_writer(ctx.deadline());
    for (auto& [gk, entry] : kinds_) entry->board->finish_all(errc::stopped);
  }
  if (state_ != State::running) return;
  state_ = State::draining;
  cancel_reconciles_();  // reconciles in flight see their context end now
  bool drained = drain_reconciles(ctx.deadline());
  if (drained && gc_) {
    // What the gc has queued (a pass triggered by the last commits) finishes first; a
    // pass asked for now runs after it in the writer's order.
    caf::scoped_actor self{*sys_, true};
    auto d = ctx.deadline();
    auto left = d ? std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 *d - std::chrono::steady_clock::now()),
                             std::chrono::milliseconds(1))
                  : std::chrono::milliseconds(std::chrono::hours(24));
    self->request(caf::actor_cast<gc_actor>(gc_), left, collect_atom::value)
        .receive([](int) {}, [](caf::error&) {});
  }
  kill_controllers();
  state_ = State::stopped;
  bool closed = stop_writer(ctx.deadline());
  for (auto& [gk, entry] : kinds_) entry->board->finish_all(errc::stopped);
  {
    std::lock_guard c(claims_mu);
    claims.erase(claimed_);
  }
  claimed_.clear();
  run_claim_.reset();
  if (!drained)
    throw Error(errc::deadline_exceeded, "reconciles still running when the stop deadline passed");
  if (!closed)
    throw Error(errc::deadline_exceeded,
                "a within block was still open when the stop deadline passed; rolled back");
}

bool Runtime::drain_reconciles(std::optional<Context::Deadline> deadline) {
  {
    caf::scoped_actor self{*sys_, true};
    for (auto& [gk, entry] : kinds_)
      self->request(entry->controller, caf::infinite, drain_atom::value)
          .receive([](bool) {}, [](caf::error&) {});
  }
  std::unique_lock f(flight_mu_);
  auto idle = [&] { return in_flight_ == 0; };
  if (deadline) return flight_cv_.wait_until(f, *deadline, idle);
  flight_cv_.wait(f, idle);
  return true;
}

bool Runtime::stop_writer(std::optional<Context::Deadline> deadline) {
  if (!writer_) return true;
  state_ = State::stopped;
  bool in_time = true;
  caf::anon_send(writer_, shutdown_atom::value);
  {
    caf::scoped_actor self{*sys_, true};
    // The writer quits once the within block it serves, if any, has ended; at the
    // deadline that block is rolled back instead, and its later steps fail with stopped.
    if (deadline) {
      self->monitor(writer_);
      auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                               *deadline - std::chrono::steady_clock::now()),
                           std::chrono::milliseconds(0));
      bool down = false;
      self->receive([&](const caf::down_msg&) { down = true; }, caf::after(left) >> [] {});
      if (!down) {
        in_time = false;
        caf::anon_send(writer_, abort_session_atom::value);
      }
    }
    // The writer forwards its shutdown to the hub after the last commit record; the
    // hub ends every watch and quits.
    self->wait_for(writer_, hub());
  }
  std::lock_guard k(kinds_mu_);
  writer_ = nullptr;
  writer_public_ = nullptr;
  hub_ = nullptr;
  return in_time;
}

}  // namespace beehive::detail
