#include "actors/root.hpp"

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>

#include <beehive/detail/saturate.hpp>

#include "actors/event_log.hpp"
#include "actors/gc.hpp"
#include "actors/reader.hpp"
#include "actors/scheduler.hpp"
#include "actors/spawn_faults.hpp"
#include "metrics/store_metrics.hpp"

namespace beehive::detail {

namespace {

using Self = root_actor::stateful_pointer<RootState>;
using Phase = RootState::Phase;

/// How often a stop looks whether its caller's context ended (see StopRequest::ended).
constexpr std::chrono::milliseconds stop_poll{10};

/// `fn`, run by the first of several calls only (a stage ends once, whether its answers
/// came or it gave up waiting for them).
std::function<void()> once(std::function<void()> fn) {
  auto left = std::make_shared<std::function<void()>>(std::move(fn));
  return [left] {
    if (auto f = std::exchange(*left, nullptr)) f();
  };
}

/// A controller's writer subscription: only the commits that concern its kind (its own
/// objects, and those it owns or watches; with metrics, every change that moves its
/// object counts too).
RecordFilter controller_filter(const RootState& st, const GroupKind& gk) {
  bool counts = st.cfg->services.metrics != nullptr;
  for (auto& k : st.kinds)
    if (k->gk == gk)
      return [k, counts](const commit_record& rec) {
        return controller_wants(k->gk, k->settings, rec, counts);
      };
  return [gk, counts](const commit_record& rec) { return controller_wants(gk, {}, rec, counts); };
}

/// What is left of the stop deadline (which is set), at most a century: CAF adds it to
/// its clock's now, which a deadline at the clock's end (Deadline::max()) would overflow
/// into the past, giving up at once.
std::chrono::milliseconds ms_left(const RootState& st) {
  // Rounded up: giving up a little late is fine, early is not.
  auto left =
      std::chrono::ceil<std::chrono::milliseconds>(*st.deadline - std::chrono::steady_clock::now());
  return std::clamp(left, std::chrono::milliseconds(0),
                    std::chrono::milliseconds(std::chrono::hours(24 * 36525)));
}

/// What is left of the stop deadline, as a request timeout.
caf::duration time_left(const RootState& st) {
  return st.deadline ? caf::duration{ms_left(st)} : caf::infinite;
}

void log_restart(Self self, const std::string& what, const caf::error& reason) {
  self->state.cfg->services.log(LogLevel::error, what + " failed; restarted from the store",
                                {{"reason", caf::to_string(reason)}});
}

/// Runs `then` once the writer has handled every message sent to it before (its
/// mailbox is in order): subscriptions above all, so that no commit after them escapes
/// the new subscriber.
template <class Fn>
void after_writer_caught_up(Self self, Fn then) {
  self->request(self->state.writer, caf::infinite, inspect_atom::value)
      .then([then](const store_writer_state&) mutable { then(); },
            [then](caf::error&) mutable { then(); });  // the writer died: its restart resubscribes
}

void spawn_writer(Self self, std::unique_ptr<store::Writer> connection) {
  auto& st = self->state;
  auto& cfg = *st.cfg;
  auto wc = std::make_shared<StoreWriterConfig>();
  // The subscribers come with the writer, not in later messages: a caller's write can
  // reach a new writer before anything sent to it afterwards.
  for (auto& [gk, c] : st.controllers)
    wc->subscribers.push_back({c.actor, controller_filter(st, gk), false, c.inbox});
  wc->hub = caf::actor_cast<caf::actor>(st.hub);
  wc->hub_feed = cfg.hub_feed;
  wc->foreign_cursor = cfg.foreign_cursor;
  wc->crashed_sessions = cfg.crashed_sessions;
  wc->app_subscribers = cfg.app_subscribers;
  wc->writer = std::move(connection);
  wc->backend = cfg.backend;
  wc->schema_versions = cfg.schema_versions;
  wc->clock = cfg.clock;
  wc->queue = cfg.queue;
  wc->metrics = cfg.services.metrics;
  wc->max_object_bytes = cfg.max_object_bytes;
  // Detached: the writer blocks on disk, and a dedicated thread makes the blocking
  // hand-off one wake each way.
  auto w = self->spawn<caf::detached>(detail::store_writer, std::move(wc));
  self->monitor(w);
  st.writer = w;
  cfg.directory->set_writer(w);
  cfg.queue->set_wake([w] { caf::anon_send(w, serve_queue_atom::value); });
  caf::anon_send(w, serve_queue_atom::value);  // what callers queued meanwhile
}

void spawn_hub(Self self) {
  auto& st = self->state;
  auto h = self->spawn(detail::watch_hub, st.cfg->services, st.cfg->hub_feed);
  // A new hub starts without watches; the gauge says so at once (the hub it replaces,
  // ending after this, publishes nothing).
  st.cfg->hub_feed->start_publisher(h.address(), [m = st.cfg->services.metrics.get()] {
    if (m) report_watch_subscribers(*m, 0);
  });
  self->monitor(h);
  st.hub = h;
  self->send(st.writer, hub_atom::value, caf::actor_cast<caf::actor>(h));
  // Published once the writer knows it: no commit escapes a watch the hub serves.
  after_writer_caught_up(self, [self, h] {
    if (self->state.hub == h) self->state.cfg->directory->set_hub(h);
  });
}

void spawn_reader(Self self) {
  auto r = self->spawn<caf::detached>(detail::reader, self->state.cfg->services.backend);
  self->monitor(r);
  self->state.cfg->services.reader = r;
  self->state.cfg->directory->set_reader(r);
}

void arm_retry(Self self);

void spawn_scheduler(Self self) {
  auto& st = self->state;
  auto s = self->spawn(detail::scheduler, st.cfg->services.timers);
  self->monitor(s);
  st.scheduler = s;
  st.cfg->directory->set_scheduler(s);
  if (!st.retries.empty()) arm_retry(self);  // the wake asked of its predecessor is lost
  if (auto* manual = dynamic_cast<ManualClock*>(st.cfg->clock.get())) {
    if (st.clock_token) manual->unsubscribe(st.clock_token);
    auto addr = caf::actor_cast<caf::actor_addr>(s);
    st.clock_token = manual->subscribe([addr] {
      if (auto a = caf::actor_cast<caf::actor>(addr)) caf::anon_send(a, tick_atom::value);
    });
  }
}

/// Spawns the kind's controller and its workers and subscribes it to the writer; it
/// starts once sent start_atom.
caf::actor spawn_controller(Self self, const std::shared_ptr<KindEntry>& entry) {
  auto& st = self->state;
  std::vector<caf::actor> workers;
  for (int i = 0; i < entry->settings.concurrency; ++i) {
    auto& fault = detail::faults::worker_spawns_before_failure;
    if (fault.load() >= 0 && fault.fetch_sub(1) == 0)
      throw std::system_error(EAGAIN, std::generic_category(), "worker thread (injected)");
    // Detached: reconcile may block. Should the system refuse its thread, those spawned
    // before end as their handles go (nothing else holds them yet).
    auto w = self->spawn<caf::detached>(detail::worker, entry, st.cfg->services);
    self->monitor(w);
    workers.push_back(w);
  }
  auto inbox = std::make_shared<RecordInbox>();
  auto c = caf::actor_cast<caf::actor>(
      self->spawn(detail::controller, entry, st.cfg->services, st.scheduler, workers, inbox));
  // Now, not in the controller's init (its first activation, later): a commit the
  // writer posts meanwhile must find someone to wake.
  inbox->attach(c.address());
  for (auto& w : workers) st.workers[w.address()] = c;
  self->monitor(c);
  st.controllers[entry->gk] = {c, inbox};
  st.cfg->directory->set_controller(entry->gk, c);
  self->send(st.writer, subscribe_atom::value, c, controller_filter(st, entry->gk), inbox);
  return c;
}

Periodic periodic(Self self) {
  auto& st = self->state;
  return {caf::actor_cast<store_writer_actor>(st.writer),
          st.scheduler,
          st.cfg->services.timers,
          st.cfg->cadence,
          st.cfg->services.logger,
          st.cfg->services.backend};
}

caf::actor spawn_gc(Self self) {
  auto g = caf::actor_cast<caf::actor>(
      self->spawn(detail::gc, periodic(self), self->state.cfg->change_log_retention));
  self->monitor(g);
  self->state.gc = g;
  self->state.cfg->directory->set_gc(g);
  self->send(self->state.writer, subscribe_atom::value, g, RecordFilter{gc_wants});
  return g;
}

caf::actor spawn_event_log(Self self) {
  auto e = caf::actor_cast<caf::actor>(
      self->spawn(detail::event_log, periodic(self), self->state.retention));
  self->monitor(e);
  self->state.event_log = e;
  self->state.cfg->directory->set_event_log(e);
  self->send(self->state.writer, subscribe_atom::value, e, RecordFilter{has_event_runs});
  return e;
}

/// Starts `actors` once the writer has their subscriptions: a controller's start lists
/// its kind, and every commit after the listing reaches it.
void start_once_subscribed(Self self, std::vector<caf::actor> actors) {
  after_writer_caught_up(self, [actors] {
    for (auto& a : actors) caf::anon_send(a, start_atom::value);
  });
}

/// Ends `a` on purpose (no restart) and drops its writer subscription.
void retire(Self self, caf::actor& a) {
  if (!a) return;
  if (self->state.writer) self->send(self->state.writer, retire_atom::value, a);
  self->send_exit(a, caf::exit_reason::user_shutdown);
  a = nullptr;
}

/// The gc and the event_log hold the writer's and the scheduler's handles: they
/// restart with either.
std::vector<caf::actor> respawn_periodic(Self self) {
  auto& st = self->state;
  retire(self, st.gc);
  retire(self, st.event_log);
  return {spawn_gc(self), spawn_event_log(self)};
}

void retire_controllers(Self self) {
  auto& st = self->state;
  for (auto& [gk, c] : st.controllers) {
    retire(self, c.actor);
    st.cfg->directory->set_controller(gk, nullptr);
  }
  st.controllers.clear();
}

void retire_scheduler(Self self) {
  auto& st = self->state;
  if (auto* manual = dynamic_cast<ManualClock*>(st.cfg->clock.get()); manual && st.clock_token)
    manual->unsubscribe(st.clock_token);
  st.clock_token = 0;
  if (st.scheduler) self->send_exit(st.scheduler, caf::exit_reason::user_shutdown);
  st.scheduler = scheduler_impl{};
  st.cfg->directory->set_scheduler(scheduler_impl{});
}

/// The scheduler's restart group: the scheduler, the controllers, the gc and the
/// event_log (each holds the scheduler's handle).
void spawn_scheduler_group(Self self) {
  auto& st = self->state;
  spawn_scheduler(self);
  // First (they need no thread): should a worker's spawn fail below, the gc and the
  // event log still run on the new scheduler meanwhile.
  start_once_subscribed(self, respawn_periodic(self));
  retire_controllers(self);  // those a failed attempt spawned
  std::vector<caf::actor> started;
  for (auto& entry : st.kinds) started.push_back(spawn_controller(self, entry));
  start_once_subscribed(self, std::move(started));
}

/// Spawns one of the actors a beehive opens with (see faults::open_spawns_before_failure).
template <class Spawn>
void spawn_opened(Self, Spawn spawn) {
  auto& fault = detail::faults::open_spawns_before_failure;
  if (fault.load() >= 0 && fault.fetch_sub(1) == 0)
    throw std::system_error(EAGAIN, std::generic_category(), "actor thread (injected)");
  spawn();
}

/// An open that failed half-way: what did spawn ends now, unwatched (nothing restarts
/// it), or the actor system's end would wait for it for ever.
void end_opened(Self self);

/// No writer will serve the queue again: closes it (a later write throws `stopped`)
/// and fails what it holds, so that no caller waits for ever. Closing also drops the
/// wake-up's handle on the dead writer, which the actor system's end waits for.
void refuse_queued_writes(RootState& st, errc code, const std::string& why) {
  for (auto& w : st.cfg->queue->close(code, why)) w->reply->fail(code, why);
}

/// Tells the application's commit subscribers that nothing more will come, as a writer
/// that quits does (one that died at stop cannot).
void end_app_subscriptions(RootState& st) {
  std::lock_guard lk(st.cfg->app_subscribers->mu);
  for (auto& a : st.cfg->app_subscribers->actors) caf::anon_send(a, watch_ended{0});
}

/// A stop with no writer to quit (it died, or its successor was not open yet) does what
/// the writer's shutdown would: refuses the writes waiting, tells the application's
/// commit subscribers that nothing more will come, and has the hub deliver what it was
/// handed and end every watch as stopped.
void end_without_writer(Self self) {
  auto& st = self->state;
  refuse_queued_writes(st, errc::stopped, "beehive stopped");
  if (std::exchange(st.ended_without_writer, true)) return;
  end_app_subscriptions(st);
  if (st.hub) self->send(st.hub, shutdown_atom::value);
}

void end_opened(Self self) {
  auto& st = self->state;
  refuse_queued_writes(st, errc::stopped, "beehive stopped");
  auto end = [self](const caf::actor_addr& a) {
    if (!a) return;
    self->demonitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
  };
  end(st.cfg->services.reader.address());
  end(st.writer.address());
  end(st.hub.address());
  st.cfg->services.reader = nullptr;
  st.writer = store_writer_impl{};
  st.hub = watch_hub_impl{};
  st.cfg->directory->set_reader(nullptr);
  st.cfg->directory->set_writer(store_writer_impl{});
  st.cfg->directory->set_hub(watch_hub_impl{});
}

/// Retires the controllers and starts one for each kind afresh.
void respawn_controllers(Self self) {
  auto& st = self->state;
  retire_controllers(self);
  std::vector<caf::actor> started;
  for (auto& entry : st.kinds) started.push_back(spawn_controller(self, entry));
  start_once_subscribed(self, std::move(started));
}

/// Asks for a wake when the failed restarts are due again: from the scheduler, on the
/// timers' time line (a ManualClock moves it), or before start from the steady clock.
void arm_retry(Self self) {
  auto& st = self->state;
  auto me = caf::actor_cast<caf::actor>(self);
  if (st.scheduler)
    self->send(st.scheduler, timer_at_atom::value, me,
               saturating_add(st.cfg->services.timers->now(), restart_retry));
  else
    self->delayed_send(self, restart_retry, wake_atom::value);
}

/// Logs a restart that failed and has `redo` run again after `restart_retry`.
void retry_later(Self self, const std::string& what, std::function<void()> redo,
                 const std::string& reason) {
  auto& st = self->state;
  st.cfg->services.log(LogLevel::error, what + " cannot be restarted; tried again later",
                       {{"reason", reason}});
  bool armed = !st.retries.empty();
  st.retries.push_back({what, std::move(redo)});
  if (!armed) arm_retry(self);
}

/// Runs one restart. Should it throw (a thread the system refused: the reader and each
/// reconcile worker is one), the root stays up: it logs the failure and tries again
/// after `restart_retry`, for as long as it runs.
void attempt(Self self, const std::string& what, std::function<void()> redo) {
  try {
    redo();
  } catch (const std::exception& e) {
    retry_later(self, what, std::move(redo), e.what());
  }
}

void retry_restarts(Self self) {
  auto& st = self->state;
  auto due = std::exchange(st.retries, {});
  if (st.phase == Phase::stopping || st.phase == Phase::stopped) return;
  for (auto& r : due) attempt(self, r.what, std::move(r.redo));
}

/// Opens a connection for a writer in place of one that died, on a thread of its own:
/// the root stays responsive however long the store takes to answer. Meanwhile writes
/// queue; the answer (WriterOpened) spawns the writer, or refuses them until a retry.
void restart_writer(Self self) {
  auto& st = self->state;
  if (st.opening_writer) return;
  auto root = caf::actor_cast<root_actor>(self);
  // Should the system refuse the thread, the writes waiting fail at once (as when the
  // connection does not open) rather than at their deadlines; the restart is retried.
  try {
    self->spawn<caf::detached>([open = st.cfg->open_writer, backend = st.cfg->backend, root] {
      WriterOpened out;
      out.backend = backend;
      while (faults::hold_writer_reopen.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      try {
        out.connection = std::make_shared<std::unique_ptr<store::Writer>>(open());
      } catch (const std::exception& e) {
        out.error = e.what();
      } catch (...) {  // the root must hear back whatever happened
        out.error = "opening the connection threw a non-standard exception";
      }
      caf::anon_send(root, std::move(out));
    });
  } catch (const std::exception& e) {
    refuse_queued_writes(st, errc::store,
                         std::string("the store writer cannot be restarted: ") + e.what());
    throw;
  }
  st.opening_writer = true;
}

void settle(Self self, const std::shared_ptr<Rendezvous<bool>>& done, int retries = 0);
void settle_again(Self self, const std::shared_ptr<Rendezvous<bool>>& done, int retries,
                  const caf::error& err);
void answer(const std::shared_ptr<Rendezvous<bool>>& reply, const caf::error& err);

/// The answer of restart_writer: the writer spawned on the new connection, or, failing
/// that, the writes waiting refused (errc::store, at once rather than at their deadlines)
/// and another connection opened after `restart_retry`.
void writer_opened(Self self, WriterOpened& opened) {
  auto& st = self->state;
  st.opening_writer = false;
  // Asked again once this answer is handled: of the new writer, or settled (a retry is
  // a timer) if there is none.
  for (auto& done : std::exchange(st.settles_waiting_for_writer, {}))
    self->send(self, SettleRequest{done});
  if (st.phase == Phase::stopping || st.phase == Phase::stopped) return;  // stop refused them
  try {
    if (!opened.connection) throw std::runtime_error(opened.error);
    st.cfg->queue->reopen();  // before the writer is published: a write that finds it queues
    spawn_writer(self, std::move(*opened.connection));
  } catch (const std::exception& e) {
    retry_later(
        self, "the store writer", [self] { restart_writer(self); }, e.what());
    refuse_queued_writes(st, errc::store,
                         std::string("the store writer cannot be restarted: ") + e.what());
    return;
  }
  if (st.phase == Phase::running) start_once_subscribed(self, respawn_periodic(self));
}

void restart(Self self, const caf::down_msg& m) {
  auto& st = self->state;
  if (st.writer && m.source == st.writer.address()) {
    // Its transaction, if any, died with its connection (SQLite rolls it back); what
    // callers queued is served by the new writer.
    log_restart(self, "the store writer", m.reason);
    // Gone from view until its successor opens: a stop meanwhile has no writer to close.
    st.writer = store_writer_impl{};
    st.cfg->directory->set_writer(store_writer_impl{});
    attempt(self, "the store writer", [self] { restart_writer(self); });
    return;
  }
  if (st.hub && m.source == st.hub.address()) {
    log_restart(self, "the watch hub", m.reason);
    spawn_hub(self);
    return;
  }
  if (st.cfg->services.reader && m.source == st.cfg->services.reader.address()) {
    log_restart(self, "the reader", m.reason);
    attempt(self, "the reader", [self] {
      // Actors spawned from now on get the new reader; those holding the old one are
      // respawned with it.
      spawn_reader(self);
      auto& st = self->state;
      // The hub holds the old reader too. Left running, it would keep its watches open
      // with nothing reaching them (the new hub takes the inbox): they end with
      // errc::store instead, and resume on the new one.
      if (st.hub) self->send_exit(st.hub, caf::exit_reason::user_shutdown);
      spawn_hub(self);
      if (st.phase == Phase::running)
        attempt(self, "the controllers", [self] { respawn_controllers(self); });
    });
    return;
  }
  if (st.phase != Phase::running) return;
  if (st.scheduler && m.source == st.scheduler.address()) {
    log_restart(self, "the scheduler", m.reason);
    st.scheduler = scheduler_impl{};
    attempt(self, "the scheduler", [self] {
      retire_scheduler(self);  // one a failed attempt spawned
      spawn_scheduler_group(self);
    });
    return;
  }
  for (auto& entry : st.kinds) {
    auto it = st.controllers.find(entry->gk);
    if (it != st.controllers.end() && it->second.actor.address() == m.source) {
      auto what = "the controller of " + to_string(entry->gk);
      log_restart(self, what, m.reason);
      ++entry->restarts;
      // No longer current: should its successor not spawn, its workers' passes are
      // waited for at stop as orphans', and the kind has no controller meanwhile.
      st.controllers.erase(it);
      st.cfg->directory->set_controller(entry->gk, nullptr);
      attempt(self, what, [self, entry] {
        auto& st = self->state;
        // A scheduler group restarted meanwhile spawned one already.
        if (st.controllers.count(entry->gk)) return;
        start_once_subscribed(self, {spawn_controller(self, entry)});
      });
      return;
    }
  }
  if (st.gc && m.source == st.gc.address()) {
    log_restart(self, "the gc", m.reason);
    start_once_subscribed(self, {spawn_gc(self)});
    return;
  }
  if (st.event_log && m.source == st.event_log.address()) {
    log_restart(self, "the event log", m.reason);
    start_once_subscribed(self, {spawn_event_log(self)});
  }
}

// -- stop ---------------------------------------------------------------------------

void finish_stop(Self self) {
  auto& st = self->state;
  if (st.writer || st.hub || !st.stopping || !st.closing_writer) return;
  st.phase = Phase::stopped;
  // Settles that waited for a writer being restarted: none will come.
  for (auto& done : std::exchange(st.settles_waiting_for_writer, {})) answer(done, {});
  st.give_up = nullptr;
  st.stop_ended = nullptr;
  // Handles dropped too: a detached actor's thread lasts as long as its last handle.
  if (auto r = std::exchange(st.cfg->services.reader, nullptr))
    self->send_exit(r, caf::exit_reason::user_shutdown);
  st.cfg->directory->set_reader(nullptr);
  st.stopping->deliver(st.report);
  st.stopping.reset();
}

/// Last: the writer serves what is queued and quits, handing its shutdown to the hub
/// after its last commit record.
void close_writer(Self self) {
  auto& st = self->state;
  st.closing_writer = true;
  if (!st.writer) {  // none restarted yet: nothing else ends what waits for it
    end_without_writer(self);
    finish_stop(self);
    return;
  }
  self->send(st.writer, shutdown_atom::value);
  // The writer still serving a within block: roll it back, so that it can quit.
  st.give_up = [self] {
    auto& st = self->state;
    if (!st.writer) return;
    // Only a block the writer did roll back counts: one that committed first, or none
    // at all, leaves the report saying that every block closed. The reply comes before
    // the writer's down message, which finishes the stop.
    self->request(st.writer, caf::infinite, abort_session_atom::value)
        .then(
            [self](bool rolled_back) {
              if (rolled_back) self->state.report.closed = false;
            },
            [](caf::error&) {});
  };
  if (st.gave_up) std::exchange(st.give_up, nullptr)();
}

void retire_all(Self self) {
  auto& st = self->state;
  retire_controllers(self);
  retire(self, st.gc);
  retire(self, st.event_log);
  st.cfg->directory->set_gc(nullptr);
  st.cfg->directory->set_event_log(nullptr);
  retire_scheduler(self);
  close_writer(self);
}

/// Second: what the gc has queued (a pass triggered by the last commits) finishes.
void let_gc_finish(Self self) {
  auto& st = self->state;
  if (!st.report.drained || !st.gc) {
    retire_all(self);
    return;
  }
  auto next = once([self] { retire_all(self); });
  st.give_up = next;
  self->request(caf::actor_cast<gc_actor>(st.gc), time_left(st), collect_atom::value)
      .then([next](int) { next(); }, [next](caf::error&) { next(); });
}

/// Whether a reconcile runs now, any kind's, whichever controller handed it out. A stop
/// that gives up reports itself undrained only then: one given an ended context gives
/// up before idle controllers have answered.
bool passes_running(const RootState& st) {
  for (auto& k : st.kinds)
    if (k->passes->running()) return true;
  return false;
}

/// Whether a worker of a controller that is no longer current (crashed, or retired with
/// its restart group) is still alive: nothing interrupts a pass, so its pass runs on (a
/// worker ends with its controller once its pass has).
bool orphans_left(const RootState& st) {
  return std::any_of(st.workers.begin(), st.workers.end(), [&](const auto& w) {
    return std::none_of(st.controllers.begin(), st.controllers.end(),
                        [&](const auto& c) { return c.second.actor == w.second; });
  });
}

/// Then: the passes that replaced controllers left running end too (the current
/// controllers know nothing of them).
void await_orphans(Self self) {
  auto& st = self->state;
  if (!orphans_left(st)) {
    let_gc_finish(self);
    return;
  }
  auto next = once([self] { let_gc_finish(self); });
  st.orphans_gone = next;
  st.give_up = [self, next] {
    if (passes_running(self->state)) self->state.report.drained = false;
    self->state.orphans_gone = nullptr;
    next();
  };
  if (st.gave_up) std::exchange(st.give_up, nullptr)();
}

/// First: every controller stops dispatching and answers once its reconciles ended.
void drain_controllers(Self self) {
  auto& st = self->state;
  if (st.controllers.empty()) {
    await_orphans(self);
    return;
  }
  auto next = once([self] { await_orphans(self); });
  st.give_up = [self, next] {
    if (passes_running(self->state)) self->state.report.drained = false;
    next();
  };
  auto pending = std::make_shared<std::size_t>(st.controllers.size());
  auto one_done = [pending, next] {
    if (--*pending == 0) next();
  };
  for (auto& [gk, c] : st.controllers)
    self->request(c.actor, time_left(st), drain_atom::value)
        .then([one_done](bool) { one_done(); },
              [self, one_done, gk = gk](caf::error& err) {
                auto& st = self->state;
                if (err == caf::sec::request_timeout) {
                  if (passes_running(st)) st.report.drained = false;
                } else {
                  // It ended (killed, or an error of ours): no longer current, so that
                  // its workers' passes, which run on, are waited for as orphans.
                  st.controllers.erase(gk);
                  st.cfg->directory->set_controller(gk, nullptr);
                }
                one_done();
              });
}

// -- settle -------------------------------------------------------------------------

using SettleReply = std::shared_ptr<Rendezvous<bool>>;

void answer(const SettleReply& reply, const caf::error& err) {
  if (!err)
    reply->deliver(true);
  else
    reply->fail(to_errc(err).value_or(errc::store), error_message(err));
}

/// One round: every actor that can have work answers once it is idle; then, if the
/// writer committed nothing since `before` and no controller queued anything since the
/// round began (work handed on without a commit: a pass's requeue of another kind's
/// object, answered by a controller that had already answered idle), everything is
/// settled, else another round. An actor that ended while the round waited for it (a
/// crash) may have a successor with work: another round asks it (`died_rounds` of them
/// in a row, a few at most, should no successor come).
void settle_round(Self self, std::uint64_t before, const SettleReply& done, int died_rounds = 0) {
  auto& st = self->state;
  if (done->abandoned()) return;  // its caller's context ended: no more rounds for it
  const auto queued = st.cfg->services.work_queued;
  const auto queued_before = queued->load();
  std::vector<caf::actor> targets;
  for (auto& [gk, c] : st.controllers) targets.push_back(c.actor);
  for (auto* a : {&st.gc, &st.event_log})
    if (*a) targets.push_back(*a);
  if (st.hub) targets.push_back(caf::actor_cast<caf::actor>(st.hub));
  auto died = std::make_shared<bool>(false);
  auto next = [self, before, done, died, died_rounds, queued, queued_before]() mutable {
    auto w = self->state.writer;
    if (!w) {
      settle(self, done);  // waits for a writer being restarted, or is settled
      return;
    }
    self->request(w, caf::infinite, inspect_atom::value)
        .then(
            [self, before, done, died, died_rounds, queued,
             queued_before](const store_writer_state& s) mutable {
              if (*died && died_rounds < 10)
                settle_round(self, s.transactions, done, died_rounds + 1);
              else if (s.transactions == before && queued->load() == queued_before)
                answer(done, {});
              else
                settle_round(self, s.transactions, done);
            },
            [self, done](caf::error&) mutable {
              // The writer died: asked again once the root has heard, of its successor
              // or of none.
              settle_again(self, done, 0, caf::error{});
            });
  };
  if (targets.empty()) {
    next();
    return;
  }
  auto pending = std::make_shared<std::size_t>(targets.size());
  auto one_done = [pending, next]() mutable {
    if (--*pending == 0) next();
  };
  for (auto& a : targets)
    self->request(a, caf::infinite, settle_atom::value)
        .then([one_done](bool) mutable { one_done(); },
              [one_done, died](caf::error&) mutable {  // gone: asked again, or its successor
                *died = true;
                one_done();
              });
}

/// The writer asked had died: settles again a moment later, once the root has heard of
/// it (of its successor or of none); a writer that stays a dead handle (ended by the
/// application, not restarted) fails the settle after a second.
void settle_again(Self self, const SettleReply& done, int retries, const caf::error& err) {
  if (retries >= 1000) {
    answer(done, err ? err : make_error(errc::store, "the store writer ended"));
    return;
  }
  self->delayed_send(self, std::chrono::milliseconds(1), SettleRequest{done, retries + 1});
}

/// Settles once the writer is idle. A writer being restarted (its connection opening)
/// is waited for: writes queue for it meanwhile. With none and no restart under way (a
/// restart that failed is retried at a timer), it is settled.
void settle(Self self, const SettleReply& done, int retries) {
  auto& st = self->state;
  if (done->abandoned()) return;
  auto w = st.writer;
  if (!w) {
    if (st.opening_writer && st.phase != Phase::stopping && st.phase != Phase::stopped)
      st.settles_waiting_for_writer.push_back(done);
    else
      answer(done, {});
    return;
  }
  // The writer first publishes what other processes committed up to now (their wakes
  // reach the controllers before its answer, so the rounds wait for them); what they
  // commit later is not waited for, or a busy neighbour would keep a settle going.
  self->request(w, caf::infinite, settle_atom::value)
      .then([self, done](std::uint64_t transactions) { settle_round(self, transactions, done); },
            [self, done, retries](caf::error& err) mutable {
              settle_again(self, done, retries, err);
            });
}

void on_down(Self self, const caf::down_msg& m) {
  auto& st = self->state;
  if (st.workers.erase(m.source)) {
    if (st.orphans_gone && !orphans_left(st)) std::exchange(st.orphans_gone, nullptr)();
    if (st.workers.empty()) {
      for (auto& rp : st.awaiting_workers) rp.deliver(true);
      st.awaiting_workers.clear();
    }
    return;
  }
  if (st.phase == Phase::stopping || st.phase == Phase::stopped) {
    if (st.writer && m.source == st.writer.address()) {
      st.writer = store_writer_impl{};
      st.cfg->directory->set_writer(store_writer_impl{});
      // A writer that died instead of quitting did not close the queue, nor hand its
      // shutdown on.
      if (m.reason != caf::exit_reason::normal)
        end_without_writer(self);
      else
        refuse_queued_writes(st, errc::stopped, "beehive stopped");
    } else if (st.hub && m.source == st.hub.address()) {
      st.hub = watch_hub_impl{};
      st.cfg->directory->set_hub(watch_hub_impl{});
    } else if (auto& r = st.cfg->services.reader; r && m.source == r.address()) {
      r = nullptr;
    }
    finish_stop(self);
    return;
  }
  // Stopped on purpose (a restart group's old members).
  if (m.reason == caf::exit_reason::normal || m.reason == caf::exit_reason::user_shutdown) return;
  restart(self, m);
}

}  // namespace

root_actor::behavior_type root(Self self, std::shared_ptr<RootConfig> cfg) {
  self->state.cfg = std::move(cfg);
  self->set_down_handler([self](caf::down_msg& m) { on_down(self, m); });
  return {
      [self](leadership_atom, bool leads) {
        // The beehive's store changed this process's leadership: the leader's work
        // (controllers, the gc, the event log's sweeps) is taken up or left.
        auto& st = self->state;
        if (st.phase != RootState::Phase::running) return;
        for (auto& [gk, c] : st.controllers) caf::anon_send(c.actor, leadership_atom::value, leads);
        if (st.gc) caf::anon_send(st.gc, leadership_atom::value, leads);
        if (st.event_log) caf::anon_send(st.event_log, leadership_atom::value, leads);
      },
      [self](open_atom) -> caf::result<bool> {
        auto& st = self->state;
        if (st.writer) return true;
        try {
          spawn_opened(self, [self] { spawn_reader(self); });
          spawn_opened(self,
                       [self] { spawn_writer(self, std::move(self->state.cfg->first_writer)); });
          spawn_opened(self, [self] { spawn_hub(self); });
        } catch (const std::exception& e) {
          end_opened(self);
          return make_error(errc::store, std::string("cannot spawn the actors: ") + e.what());
        }
        auto rp = self->make_response_promise<bool>();
        after_writer_caught_up(self, [rp]() mutable { rp.deliver(true); });
        return rp;
      },
      [self](StartPlan& plan) -> caf::result<bool> {
        auto& st = self->state;
        if (st.phase != Phase::created) return make_error(errc::stopped, "beehive stopped");
        st.phase = Phase::running;
        st.kinds = std::move(plan.kinds);
        st.retention = std::move(plan.retention);
        st.cfg->services.reconcile = std::move(plan.reconcile);
        try {
          spawn_scheduler_group(self);
        } catch (const std::exception& e) {
          // Typically a thread the system refused (each reconcile worker is one): the
          // caller stops what did spawn and fails its start.
          return make_error(errc::stopped, std::string("cannot spawn the actors: ") + e.what());
        }
        auto rp = self->make_response_promise<bool>();
        after_writer_caught_up(self, [rp]() mutable { rp.deliver(true); });
        return rp;
      },
      [self](const StopRequest& req) -> caf::result<StopReport> {
        auto& st = self->state;
        if (st.phase == Phase::stopped) return st.report;
        if (st.stopping) return make_error(errc::stopped, "a stop is already in progress");
        st.phase = Phase::stopping;
        st.deadline = req.deadline;
        st.stop_ended = req.ended;
        st.stopping = self->make_response_promise<StopReport>();
        auto rp = *st.stopping;
        if (st.deadline || st.stop_ended) self->send(self, stop_deadline_atom::value);
        // The application's actor requests are refused from here, as its Client calls are.
        if (st.writer) self->send(st.writer, drain_atom::value);
        if (st.hub) self->send(st.hub, drain_atom::value);
        drain_controllers(self);
        return rp;
      },
      [self](stop_deadline_atom) {
        // Looks whether the stop should give up, and if not, when to look again.
        auto& st = self->state;
        if (st.phase != Phase::stopping || st.gave_up) return;
        auto now = std::chrono::steady_clock::now();
        if ((st.deadline && now >= *st.deadline) || (st.stop_ended && st.stop_ended())) {
          st.gave_up = true;
          st.deadline = now;  // every later stage's wait ends at once
          if (auto f = std::exchange(st.give_up, nullptr)) f();
          return;
        }
        auto next = st.deadline ? ms_left(st) : stop_poll;
        if (st.stop_ended) next = std::min(next, stop_poll);
        self->delayed_send(self, std::max(next, std::chrono::milliseconds(1)),
                           stop_deadline_atom::value);
      },
      [self](const SettleRequest& req) { settle(self, req.reply, req.retries); },
      [self](wake_atom) { retry_restarts(self); },
      [self](WriterOpened& opened) { writer_opened(self, opened); },
      [self](await_workers_atom) -> caf::result<bool> {
        auto& st = self->state;
        if (st.workers.empty()) return true;
        st.awaiting_workers.push_back(self->make_response_promise<bool>());
        return st.awaiting_workers.back();
      },
  };
}

}  // namespace beehive::detail
