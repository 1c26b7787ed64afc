#include "actors/controller.hpp"

#include <algorithm>
#include <tuple>

#include <beehive/detail/saturate.hpp>

#include "runtime.hpp"

namespace beehive::detail {

Schedule ScheduleBoard::get(ObjectID id) const {
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  return it == next_.end() ? Schedule{} : Schedule{it->second};
}

void ScheduleBoard::set(ObjectID id, Time t) {
  std::lock_guard lk(mu_);
  auto& slot = next_[id];
  if (slot == t) return;
  slot = t;
  publish_locked(id, {t});
}

void ScheduleBoard::clear(ObjectID id) {
  std::lock_guard lk(mu_);
  if (next_.erase(id)) publish_locked(id, {});
}

void ScheduleBoard::watch_actor(ObjectID id, caf::actor subscriber) {
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  caf::anon_send(subscriber,
                 schedule_change{id, it == next_.end() ? Schedule{} : Schedule{it->second}});
  actor_watches_.emplace(id, std::move(subscriber));
}

void ScheduleBoard::publish_locked(ObjectID id, Schedule s) {
  auto [a, b] = actor_watches_.equal_range(id);
  for (auto it = a; it != b; ++it) caf::anon_send(it->second, schedule_change{id, s});
  auto [first, last] = watches_.equal_range(id);
  for (auto it = first; it != last;) {
    auto core = it->second.lock();
    if (core && core->push(id, s))
      ++it;
    else
      it = watches_.erase(it);
  }
}

void ScheduleBoard::watch(ObjectID id, const std::shared_ptr<StreamCore<Schedule>>& core) {
  std::lock_guard lk(mu_);
  auto it = next_.find(id);
  core->push(id, it == next_.end() ? Schedule{} : Schedule{it->second});
  watches_.emplace(id, core);
}

void ScheduleBoard::finish_all(std::error_code why) {
  std::unordered_multimap<ObjectID, std::weak_ptr<StreamCore<Schedule>>> watches;
  std::unordered_multimap<ObjectID, caf::actor> actors;
  {
    std::lock_guard lk(mu_);
    watches.swap(watches_);
    actors.swap(actor_watches_);
  }
  for (auto& [id, a] : actors) caf::anon_send(a, watch_ended{0});
  for (auto& [id, weak] : watches)
    if (auto core = weak.lock()) core->finish(why);
}

namespace {

using Self = controller_impl::stateful_pointer<ControllerState>;

caf::behavior worker(caf::event_based_actor* self, const caf::actor& controller,
                     const std::shared_ptr<KindEntry>& kind, Runtime* rt) {
  return {
      [=](reconcile_atom, ObjectID id, const FlightPtr& flight) {
        Outcome outcome;
        if (auto* m = kind->metrics.get()) {
          auto began = std::chrono::steady_clock::now();  // real time, not the Beehive's clock
          outcome = rt->reconcile_once(*kind, id);
          m->reconciled(outcome, std::chrono::steady_clock::now() - began);
        } else {
          outcome = rt->reconcile_once(*kind, id);
        }
        (void)flight;  // released with the message, after the pass
        self->send(controller, done_atom::value, id, std::move(outcome),
                   caf::actor_cast<caf::actor>(self));
      },
  };
}

/// Now on the timers' time line (see TimerClock): every due time here is on it.
Time now(Self self) { return self->state.rt->timers().now(); }

/// Every change of the queue or of the ids in flight ends in dispatch, which reports them.
void report_gauges(ControllerState& st, const KindMetrics& m) {
  if (st.queue.size() != st.reported_depth) {
    st.reported_depth = st.queue.size();
    m.queue_depth(st.reported_depth);
  }
  if (st.in_flight.size() != st.reported_active) {
    st.reported_active = st.in_flight.size();
    m.active_workers(st.reported_active);
  }
}

void dispatch(Self self) {
  auto& st = self->state;
  // Sent after the gauges are reported: a running reconcile is always counted in them.
  std::vector<std::tuple<caf::actor, ObjectID, FlightPtr>> jobs;
  while (st.dispatching && !st.idle.empty() && !st.queue.empty()) {
    auto id = st.queue.front();
    st.queue.pop_front();
    st.queued.erase(id);
    st.in_flight.insert(id);
    st.kind->board->clear(id);
    if (auto* m = st.kind->metrics.get()) {
      auto it = st.enqueued_at.find(id);
      if (it != st.enqueued_at.end()) {
        m->dequeued(now(self) - it->second);
        st.enqueued_at.erase(it);
      }
    }
    // Counted from dispatch, so that a drain also waits for jobs not yet started.
    auto flight = st.rt->begin_flight();
    jobs.emplace_back(st.idle.back(), id, std::move(flight));
    st.idle.pop_back();
  }
  if (auto* m = st.kind->metrics.get()) report_gauges(st, *m);
  for (auto& [w, id, flight] : jobs)
    caf::anon_send(w, reconcile_atom::value, id, std::move(flight));
}

void enqueue(Self self, ObjectID id) {
  auto& st = self->state;
  if (st.in_flight.count(id)) {
    st.dirty.insert(id);
    return;
  }
  if (st.queued.insert(id).second) {
    st.queue.push_back(id);
    st.kind->board->set(id, st.rt->timers().wall_now());
    if (st.kind->metrics) st.enqueued_at[id] = now(self);
  }
}

/// Asks the scheduler to wake us at the earliest pending time, if that moved.
void rearm(Self self) {
  auto& st = self->state;
  Time earliest = st.next_resync;
  for (auto& [id, due] : st.timers) earliest = std::min(earliest, due);
  if (earliest == Time::max() || earliest == st.requested_wake) return;
  st.requested_wake = earliest;
  self->send(st.scheduler, timer_at_atom::value, caf::actor_cast<caf::actor>(self), earliest);
}

void arm_timer(Self self, ObjectID id, Time due) {
  self->state.timers[id] = due;
  self->state.kind->board->set(id, self->state.rt->timers().to_wall(due));
}

void resync(Self self) {
  auto& st = self->state;
  for (auto [id, rv] : st.rt->backend().reader()->list_ids(st.kind->gk, true)) enqueue(self, id);
}

void on_wake(Self self) {
  auto& st = self->state;
  st.requested_wake = Time::max();
  auto t = now(self);
  std::vector<ObjectID> due;
  for (auto& [id, at] : st.timers)
    if (at <= t) due.push_back(id);
  for (auto id : due) {
    st.timers.erase(id);
    enqueue(self, id);
  }
  if (st.next_resync <= t) {
    st.next_resync = saturating_add(t, st.kind->settings.resync);
    resync(self);
  }
  dispatch(self);
  rearm(self);
}

void on_done(Self self, ObjectID id, const Outcome& o, const caf::actor& w) {
  auto& st = self->state;
  st.in_flight.erase(id);
  st.idle.push_back(w);
  st.timers.erase(id);
  const auto& cfg = st.kind->settings;
  switch (o.kind) {
    case Outcome::error: {
      auto& d = st.backoff[id];
      d = d.count() == 0 ? cfg.base_retry : std::min(d * 2, cfg.max_retry);
      d = std::min(d, cfg.max_retry);
      arm_timer(self, id, saturating_add(now(self), d));
      if (auto* m = st.kind->metrics.get()) m->retried();
      st.rt->log(LogLevel::warning, "reconcile failed; retrying with backoff",
                 {{"kind", to_string(st.kind->gk)},
                  {"id", std::to_string(id)},
                  {"reason", o.message},
                  {"retry_in_ms", std::to_string(d.count())}});
      break;
    }
    case Outcome::success:
    case Outcome::quarantined:
      st.backoff.erase(id);
      if (o.requeue_after.count() > 0) arm_timer(self, id, saturating_add(now(self), o.requeue_after));
      break;
    case Outcome::gone:
    case Outcome::cancelled:  // stop cancelled it: start reconciles it again
      st.backoff.erase(id);
      break;
  }
  if (!st.timers.count(id)) st.kind->board->clear(id);
  if (st.dirty.erase(id)) enqueue(self, id);
  dispatch(self);
  rearm(self);
}

}  // namespace

bool wakes_controller(const GroupKind& gk, const object_change& c) {
  constexpr unsigned wakes = object_change::created | object_change::spec | object_change::deletion;
  return (c.parts & wakes) && c.row.meta.group == gk.group && c.row.meta.kind == gk.kind;
}

bool controller_wants(const GroupKind& gk, const commit_record& rec) {
  return std::any_of(rec.changes.begin(), rec.changes.end(),
                     [&](const object_change& c) { return wakes_controller(gk, c); }) ||
         std::any_of(rec.wakes.begin(), rec.wakes.end(),
                     [&](const Ref& r) { return r.group == gk.group && r.kind == gk.kind; });
}

controller_impl::behavior_type controller(Self self, std::shared_ptr<KindEntry> kind, Runtime* rt,
                                          scheduler_impl scheduler) {
  auto& st = self->state;
  st.kind = std::move(kind);
  st.rt = rt;
  st.scheduler = std::move(scheduler);
  auto me = caf::actor_cast<caf::actor>(self);
  for (int i = 0; i < st.kind->settings.concurrency; ++i) {
    // Detached: reconcile may block. Linked: workers end with their controller.
    auto w = self->spawn<caf::detached + caf::linked>(worker, me, st.kind, rt);
    st.workers.push_back(w);
    st.idle.push_back(w);
  }
  return {
      [self](start_atom) {
        auto& st = self->state;
        for (auto [id, rv] : st.rt->backend().reader()->list_ids(st.kind->gk, false)) {
          enqueue(self, id);
          st.listed_rv = std::max(st.listed_rv, rv);
        }
        st.dispatching = true;
        if (st.kind->settings.resync.count() > 0)
          st.next_resync = saturating_add(now(self), st.kind->settings.resync);
        dispatch(self);
        rearm(self);
      },
      [self](const commit_record& rec) {
        auto& st = self->state;
        auto& gk = st.kind->gk;
        for (auto& c : rec.changes)
          // Rows at or below the start listing's versions were reconciled from it.
          if (wakes_controller(gk, c) && c.row.meta.resource_version > st.listed_rv)
            enqueue(self, c.row.meta.id);
        for (auto& ref : rec.wakes)  // dependents of targets whose conditions changed
          if (ref.group == gk.group && ref.kind == gk.kind) enqueue(self, ref.id);
        dispatch(self);
      },
      [self](wake_atom) { on_wake(self); },
      [self](done_atom, ObjectID id, const Outcome& o, const caf::actor& w) {
        on_done(self, id, o, w);
      },
      [self](const requeue_request& r) -> caf::result<bool> {
        auto& st = self->state;
        auto row = st.rt->backend().reader()->get(r.id);
        if (!row || row->meta.group != st.kind->gk.group || row->meta.kind != st.kind->gk.kind)
          return make_error(errc::not_found,
                            "no " + to_string(st.kind->gk) + " with id " + std::to_string(r.id));
        if (r.reset_backoff) st.backoff.erase(r.id);
        st.timers.erase(r.id);
        enqueue(self, r.id);
        dispatch(self);
        return true;
      },
      [self](schedule_atom, ObjectID id) { return self->state.kind->board->get(id); },
      [self](const schedule_watch_request& r) {
        self->state.kind->board->watch_actor(r.id, r.subscriber);
        return true;
      },
      [self](inspect_atom) {
        auto& st = self->state;
        controller_state out;
        out.gk = st.kind->gk;
        out.queue_length = st.queue.size();
        out.in_flight.assign(st.in_flight.begin(), st.in_flight.end());
        std::sort(out.in_flight.begin(), out.in_flight.end());
        out.backoff.assign(st.backoff.begin(), st.backoff.end());
        std::sort(out.backoff.begin(), out.backoff.end());
        for (auto& [id, due] : st.timers) out.timers.emplace_back(id, st.rt->timers().to_wall(due));
        std::sort(out.timers.begin(), out.timers.end());
        out.dispatching = st.dispatching;
        out.workers = static_cast<int>(st.workers.size());
        out.restarts = st.kind->restarts;
        return out;
      },
      [](shutdown_atom) {},  // the writer's last word; stop ends us
      [self](drain_atom) {
        self->state.dispatching = false;
        return true;  // acknowledged: nothing more will be dispatched
      },
  };
}

}  // namespace beehive::detail
