#include "actors/controller.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <beehive/detail/saturate.hpp>

#include "actors/reader.hpp"
#include "actors/thread_name.hpp"
#include "options_internal.hpp"
#include "pass_faults.hpp"

namespace beehive::detail {

/// CAF destroys the state when the actor ends, however it ends (retired with its kind's
/// restart group, killed, or taken down by a worker). The passes it handed out run on,
/// and are reported in flight until they end (PassRegistry).
ControllerState::~ControllerState() {
  for (auto& [n, rp] : requeues) rp.deliver(make_error(errc::stopped, "the controller ended"));
  // Ended during stop's drain (the root's stop would otherwise wait for this answer
  // forever): the root then waits for its workers, whose passes run on, as orphans.
  if (drained) drained->deliver(make_error(errc::stopped, "the controller ended"));
}

namespace {

using Self = controller_impl::stateful_pointer<ControllerState>;

/// Now on the timers' time line (see TimerClock): every due time here is on it.
Time now(Self self) { return self->state.services.timers->now(); }

using IdList = std::vector<std::pair<ObjectID, std::int64_t>>;

bool of_kind(const ObjectMeta& m, const GroupKind& gk) {
  return m.group == gk.group && m.kind == gk.kind;
}

/// The step of the backoff ladder after `d` (0: none yet), doubled without overflowing: a
/// maximum of milliseconds::max() means "never cap".
std::chrono::milliseconds next_step(std::chrono::milliseconds d, const KindSettings& cfg) {
  d = d.count() == 0 ? cfg.base_retry : d > cfg.max_retry / 2 ? cfg.max_retry : d * 2;
  return std::min(d, cfg.max_retry);
}

/// Whether this process leads the ones running on its store: a standby's controller
/// queues and reconciles nothing (the leader does), and lists its kind again when it
/// becomes the leader.
bool leads(Self self) {
  if (self->state.deposed) return false;
  auto* b = self->state.services.backend.get();
  return !b || b->leads();
}

/// Nothing queued, in flight, being read or due at the timers' now (see settle.hpp). A
/// draining controller dispatches nothing more: it is as idle as it will get; nor does
/// a standby's.
bool idle(Self self) {
  auto& st = self->state;
  if (st.draining) return st.in_flight.empty();
  auto t = now(self);
  if (fallen_due(st.recount_at, t)) return false;
  if (!leads(self)) return st.in_flight.empty() && st.pending_reads == 0;
  if (st.pending_reads > 0 || !st.in_flight.empty() || !st.awaiting_release.empty()) return false;
  // Not dispatching yet: listing the kind (not idle), or waiting to list it again after a
  // failure (idle until then, whatever was queued meanwhile).
  if (!st.dispatching) return st.relist_at != Time::max() && st.relist_at > t;
  if (fallen_due(st.relist_at, t)) return false;
  // Queued ids wait for a token of the rate limit that is due later: nothing to do now.
  if (!st.queued.empty() && !(st.rate_wake != Time::max() && st.rate_wake > t)) return false;
  if (fallen_due(st.next_resync, t)) return false;
  return !st.timers.any_due(t);
}

/// Lists the kind's ids on the reader actor, then hands them to `then`. A failed read is
/// logged, and `failed` runs.
template <class Fn, class Failed>
void list_kind(Self self, bool with_deletions, Fn then, Failed failed) {
  auto gk = self->state.kind->gk;
  ReadJob job = [gk, with_deletions](store::Reader& r) {
    auto ids = r.list_ids(gk, with_deletions);
    if (faults::listing_read) faults::listing_read(ids);
    return caf::make_message(std::move(ids));
  };
  ++self->state.pending_reads;
  ++self->state.listings;
  // Removals heard while a listing is out may be of ids it read before they went: not
  // queued again from it (ids are never reused).
  auto ended = [self] {
    auto& st = self->state;
    --st.pending_reads;
    if (--st.listings == 0) st.removed_while_listing.clear();
  };
  self->request(self->state.services.reader, caf::infinite, std::move(job))
      .then(
          [self, then, ended](IdList& ids) mutable {
            auto& st = self->state;
            if (!st.removed_while_listing.empty())
              std::erase_if(ids,
                            [&](const auto& e) { return st.removed_while_listing.count(e.first); });
            ended();
            then(ids);
            st.settling.check(idle(self));
          },
          [self, failed, ended](caf::error& err) mutable {
            auto& st = self->state;
            ended();
            st.services.log(LogLevel::error, "listing a kind failed",
                            {{"kind", to_string(st.kind->gk)}, {"reason", error_message(err)}});
            failed();
            st.settling.check(idle(self));
          });
}

/// Every change of the queue ends in dispatch, which reports its depth. (The passes in
/// flight are reported by the workers, as they start and end: see PassRegistry.)
void report_gauges(ControllerState& st, const KindMetrics& m) {
  // Once stop drains the controller, no id waits for a worker any more: none will get one.
  auto depth = st.draining ? 0 : st.queued.size();
  if (depth != st.reported_depth) {
    st.reported_depth = depth;
    m.queue_depth(depth);
  }
}

/// beehive_objects and beehive_unsettled_objects, when they moved.
void report_objects(ControllerState& st, const KindMetrics& m) {
  // Before its first listing, a tally (a restarted controller's) holds only the changes
  // since: the gauges keep what they said.
  if (!st.tally.counted()) return;
  std::pair counts{st.tally.objects(), st.tally.unsettled()};
  if (counts == st.reported_objects) return;
  st.reported_objects = counts;
  m.objects(counts.first, counts.second);
}

void on_done(Self self, ObjectID id, const Outcome& o, const caf::actor& w);
void rearm(Self self);

/// Takes a token of the kind's rate limit for one pass; without one, notes when the next
/// is due (rearm wakes us then). Always true without a rate limit.
bool take_token(Self self) {
  auto& st = self->state;
  const auto& cfg = st.kind->settings;
  if (cfg.rate <= 0) return true;
  auto t = now(self);
  // At the time line's last second no token can come due any more: a limit could only
  // leave what is queued there queued for ever (a clock advanced to its end, in a test).
  if (Time::max() - t <= std::chrono::seconds(1)) return true;
  if (!st.tokens_at) {
    st.tokens = cfg.burst;  // the bucket starts full
  } else if (t > *st.tokens_at) {
    std::chrono::duration<double> elapsed = t - *st.tokens_at;
    st.tokens = std::min<double>(cfg.burst, st.tokens + elapsed.count() * cfg.rate);
  }
  st.tokens_at = t;
  constexpr double epsilon = 1e-9;  // a token due at t counts at t, whatever the rounding
  if (st.tokens >= 1 - epsilon) {
    st.tokens = std::max(0.0, st.tokens - 1);
    return true;
  }
  std::chrono::duration<double> wait((1 - st.tokens) / cfg.rate);
  // A rate of one pass per ages puts the token past the time line's end, which the
  // conversion would wrap into the past (a spinning queue): it is then due in the line's
  // last second instead (Time::max() itself means "no token awaited").
  const auto room = std::chrono::duration<double>(Time::max() - t) - std::chrono::seconds(1);
  st.rate_wake = wait < room ? t + std::chrono::ceil<Time::duration>(wait)
                             : Time::max() - std::chrono::seconds(1);
  return false;
}

/// The listing of the object counts (metrics only), at start and at every restart: all
/// ids, then the unsettled ones, on the reader; it replaces what was counted, and the
/// commits keep the counts current from then on (ObjectTally).
void count_objects(Self self) {
  auto gk = self->state.kind->gk;
  auto ticket = self->state.tally.listing_started();
  ReadJob job = [gk](store::Reader& r) {
    auto all = r.list_ids(gk, false);
    auto unsettled = r.list_ids(gk, true);
    return caf::make_message(std::move(all), std::move(unsettled));
  };
  ++self->state.pending_reads;
  self->request(self->state.services.reader, caf::infinite, std::move(job))
      .then(
          [self, ticket](IdList& all, IdList& unsettled) {
            auto& st = self->state;
            --st.pending_reads;
            st.tally.listed(ticket, all, unsettled);
            st.recount_step = {};
            if (auto* m = st.kind->metrics.get()) report_objects(st, *m);
            st.settling.check(idle(self));
          },
          [self, ticket](caf::error& err) {
            auto& st = self->state;
            --st.pending_reads;
            st.tally.listing_failed(ticket);
            st.services.log(LogLevel::warning, "counting a kind's objects failed",
                            {{"kind", to_string(st.kind->gk)}, {"reason", error_message(err)}});
            // Counted again after the next step of the kind's backoff ladder: the
            // commits alone would keep what the failed listing was to correct.
            if (!st.draining) {
              st.recount_step = next_step(st.recount_step, st.kind->settings);
              st.recount_at = saturating_add(now(self), st.recount_step);
              rearm(self);
            }
            st.settling.check(idle(self));
          });
}

void dispatch(Self self) {
  auto& st = self->state;
  // Sent after the gauges are reported: a running reconcile is always counted in them.
  std::vector<std::pair<caf::actor, ObjectID>> jobs;
  while (st.dispatching && !st.idle.empty() && !st.queued.empty() && leads(self)) {
    while (!st.queued.count(st.queue.front())) st.queue.pop_front();  // forgotten ids
    if (!take_token(self)) break;
    auto id = st.queue.front();
    st.queue.pop_front();
    st.queued.erase(id);
    st.in_flight.insert(id);
    if (st.resync_listing) st.passed_while_resyncing.insert(id);
    st.awaiting_release.erase(id);  // queued again meanwhile (a commit): this pass decides
    // This pass supersedes the object's pending retry or requeue_after: what it returns
    // schedules the next one (the newest schedule wins).
    st.timers.erase(id);
    st.kind->schedules->clear(id);
    if (auto* m = st.kind->metrics.get()) {
      auto it = st.enqueued_at.find(id);
      if (it != st.enqueued_at.end()) {
        m->dequeued(now(self) - it->second);
        st.enqueued_at.erase(it);
      }
    }
    jobs.emplace_back(st.idle.back(), id);
    st.idle.pop_back();
  }
  if (auto* m = st.kind->metrics.get()) report_gauges(st, *m);
  for (auto& [w, id] : jobs)
    self->request(w, caf::infinite, reconcile_atom::value, id)
        .then([self, id = id, w = w](Outcome& o) { on_done(self, id, o, w); },
              [self, id = id, w = w](caf::error&) {
                // The worker is gone (the controller is being replaced): nothing ran
                // that needs a retry from here.
                on_done(self, id, {Outcome::cancelled, {}, "worker gone"}, w);
              });
  // Before answering a settle: the kit reads the scheduler for the next due time once a
  // settle returns, so the scheduler must hold every timer armed by now.
  rearm(self);
  st.settling.check(idle(self));
}

/// Queues `id`. An id marked by a TerminalError is left alone unless `lift` (a spec
/// change, a deletion request, a requeue by hand), which clears the mark. `readded`: an
/// id marked dirty while its pass ran, queued now that the pass ended (its add was
/// counted, and its wait timed, when it was marked), or one refused as busy, queued again
/// once released (its add and wait were counted before the refused pass): not counted.
void enqueue(Self self, ObjectID id, bool lift = false, bool readded = false) {
  auto& st = self->state;
  // The leader's controller reconciles it; a draining one (stop) queues nothing more.
  if (!leads(self) || st.draining) return;
  auto* m = st.kind->metrics.get();
  if (lift) {
    st.terminal.erase(id);
    if (st.in_flight.count(id)) st.lifted.insert(id);
  } else if (st.terminal.count(id)) {
    return;
  }
  if (st.in_flight.count(id)) {
    // Counted as an add once, as client-go's queue counts an item re-added while processed.
    if (st.dirty.insert(id).second) {
      ++*st.services.work_queued;
      // Queued behind its own pass: its schedule reads now, as a queued object's does.
      st.kind->schedules->set(id, st.services.timers->now());
      if (m && !readded) {
        st.enqueued_at[id] = now(self);
        m->added();
      }
    }
    return;
  }
  if (st.queued.insert(id).second) {
    ++*st.services.work_queued;
    st.queue.push_back(id);
    st.kind->schedules->set(id, st.services.timers->now());
    if (m && !readded) {
      st.enqueued_at[id] = now(self);
      m->added();
    }
  }
}

/// Asks the scheduler to wake us at the earliest pending time, if that moved.
void rearm(Self self) {
  auto& st = self->state;
  Time earliest = std::min({st.next_resync, st.relist_at, st.recount_at});
  earliest = std::min(earliest, st.timers.earliest());
  if (!st.queued.empty()) earliest = std::min(earliest, st.rate_wake);
  if (earliest == Time::max() || earliest == st.requested_wake) return;
  st.requested_wake = earliest;
  self->send(st.scheduler, timer_at_atom::value, caf::actor_cast<caf::actor>(self), earliest);
}

void arm_timer(Self self, ObjectID id, Time due) {
  // The end of time (where a saturated sum lands, on the timers' time line or on the
  // wall clock's) is never: nothing is scheduled.
  auto wall = self->state.services.timers->to_wall(due);
  if (due == Time::max() || wall == Time::max()) {
    self->state.timers.erase(id);
    self->state.kind->schedules->clear(id);
    return;
  }
  self->state.timers.set(id, due);
  self->state.kind->schedules->set(id, due);
}

/// The object was removed (ids are never reused): nothing of it stays queued, timed or
/// on the backoff ladder, and its schedule reads as the zero value. A pass of it still
/// in flight ends without scheduling anything (see on_done).
void forget(Self self, ObjectID id) {
  auto& st = self->state;
  st.timers.erase(id);
  st.backoff.erase(id);
  st.terminal.erase(id);
  st.dirty.erase(id);
  st.awaiting_release.erase(id);
  st.enqueued_at.erase(id);
  // Its place in the queue is skipped when dispatch reaches it; compacted once most of
  // the queue is such places (a standby, say, that removes but never dispatches).
  if (st.queued.erase(id) && st.queue.size() > 2 * st.queued.size() + 64)
    std::erase_if(st.queue, [&](ObjectID q) { return !st.queued.count(q); });
  if (st.in_flight.count(id)) st.collected.insert(id);
  if (st.listings > 0) st.removed_while_listing.insert(id);
  st.kind->schedules->clear(id);
}

/// Lists the kind's unsettled objects and queues them. At most one listing is in flight
/// (the reader runs them one after another, and a listing may outlast the interval):
/// ticks that come meanwhile fold into one more, begun when it ends.
void resync(Self self) {
  auto& st = self->state;
  if (st.resync_listing) {
    st.resync_again = true;
    return;
  }
  st.resync_listing = true;
  ++st.resync_listings;
  auto ended = [self] {
    auto& st = self->state;
    st.resync_listing = false;
    st.passed_while_resyncing.clear();
    if (std::exchange(st.resync_again, false) && !st.draining) resync(self);
  };
  list_kind(
      self, true,
      [self, ended](const IdList& ids) {
        auto& st = self->state;
        for (auto [id, rv] : ids)
          if (!st.passed_while_resyncing.count(id)) enqueue(self, id);
        dispatch(self);
        ended();
      },
      ended);  // a failed listing: the next resync lists again
}

void restart(Self self);

std::vector<ObjectID> map_watched(
    Self self, const GroupKind& other,
    const std::function<std::vector<ObjectID>(const ObjectMeta&)>& map, const ObjectMeta& meta);

/// Wakes what watched object `meta` maps to under `with_watches` entry `i`, and what it
/// mapped to before (a change that moves it from one id to another concerns both);
/// remembers the new mapping.
void wake_watchers(Self self, std::size_t i, const ObjectMeta& meta, bool removed) {
  auto& st = self->state;
  auto& [other, map] = st.kind->settings.watches[i];
  auto targets = map_watched(self, other, map, meta);
  auto& w = st.watched[i];
  if (w.listings > 0) w.seen.insert(meta.id);
  if (auto it = w.known.find(meta.id); it != w.known.end()) {
    for (auto id : it->second) enqueue(self, id);
    w.known.erase(it);
  }
  for (auto id : targets) enqueue(self, id);
  if (!removed && !targets.empty()) w.known.emplace(meta.id, std::move(targets));
}

/// Learns what every object of the watched kinds maps to now: a listing per kind on the
/// reader, which calls `map` there (it must be thread-safe) and hands back only the
/// (object, id) pairs, so that a large kind is never held whole. What a change taught
/// while the listing was out is newer, and kept.
void learn_watched(Self self) {
  auto& st = self->state;
  auto& watches = st.kind->settings.watches;
  for (std::size_t i = 0; i < watches.size(); ++i) {
    ReadJob job = [gk = watches[i].first, map = watches[i].second](store::Reader& r) {
      IdList pairs;  // watched object, id it maps to
      r.list_each(gk, [&](ObjectRow&& row) {
        try {
          for (auto id : map(row.meta)) pairs.emplace_back(row.meta.id, id);
        } catch (...) {  // logged when a change of the object maps it
        }
      });
      return caf::make_message(std::move(pairs));
    };
    ++st.pending_reads;
    ++st.watched[i].listings;
    self->request(st.services.reader, caf::infinite, std::move(job))
        .then(
            [self, i](IdList& pairs) {
              auto& st = self->state;
              --st.pending_reads;
              auto& w = st.watched[i];
              std::unordered_map<ObjectID, std::vector<ObjectID>> fresh;
              for (auto [id, target] : pairs)
                if (!w.seen.count(id)) fresh[id].push_back(target);
              for (auto id : w.seen)
                if (auto it = w.known.find(id); it != w.known.end())
                  fresh.emplace(id, std::move(it->second));
              w.known = std::move(fresh);
              if (--w.listings == 0) w.seen.clear();
              st.settling.check(idle(self));
            },
            [self, i](caf::error& err) {
              auto& st = self->state;
              --st.pending_reads;
              if (--st.watched[i].listings == 0) st.watched[i].seen.clear();
              // A move before the next start wakes only the ids it moves to.
              st.services.log(LogLevel::warning, "listing a watched kind failed",
                              {{"kind", to_string(st.kind->gk)},
                               {"watched", to_string(st.kind->settings.watches[i].first)},
                               {"reason", error_message(err)}});
              st.settling.check(idle(self));
            });
  }
}

/// Lists the kind and queues every object (at start, and when this process takes over
/// as the leader), then dispatches.
void start(Self self) {
  if (self->state.kind->metrics) count_objects(self);
  learn_watched(self);
  self->state.start_listing = true;
  list_kind(
      self, false,
      [self](const IdList& ids) {
        auto& st = self->state;
        st.start_listing = false;
        st.relist_step = {};
        // Lifting: a pass begun since the start (restart cleared the marks) may have read
        // an older spec than the listing, and fail terminally after it; the change to the
        // spec the listing read is not heard again (at or below listed_rv).
        for (auto [id, rv] : ids) {
          enqueue(self, id, true);
          st.listed_rv = std::max(st.listed_rv, rv);
        }
        if (st.draining) return;
        st.dispatching = true;
        if (st.kind->settings.resync.count() > 0)
          st.next_resync = saturating_add(now(self), st.kind->settings.resync);
        // Other processes' changes were lost while it was out: it may have been read
        // before them, and what they created is then in neither.
        if (std::exchange(st.lost_while_listing, false) && leads(self)) restart(self);
        dispatch(self);
        rearm(self);
      },
      [self] {
        // Until a listing succeeds, nothing would reconcile the objects it was to queue
        // (the first one's failure leaves the controller not dispatching at all): it is
        // tried again after the next step of the kind's backoff ladder.
        auto& st = self->state;
        st.start_listing = false;
        st.lost_while_listing = false;  // the next one is read after those changes
        if (st.draining) return;
        st.relist_step = next_step(st.relist_step, st.kind->settings);
        st.relist_at = saturating_add(now(self), st.relist_step);
        rearm(self);
      });
}

/// Starts over as a restart would, when this process takes over as the leader or missed
/// other processes' changes: what it knew of each object's failures may be stale (its
/// spec changed meanwhile, unseen, or another leader reconciled it), so the terminal
/// marks and backoff ladders go, and the kind is listed again.
void restart(Self self) {
  auto& st = self->state;
  st.terminal.clear();
  st.backoff.clear();
  // A pass of the earlier term still running does not mark its object again.
  st.lifted.insert(st.in_flight.begin(), st.in_flight.end());
  start(self);
}

void on_wake(Self self) {
  auto& st = self->state;
  st.requested_wake = Time::max();
  auto t = now(self);
  if (st.rate_wake <= t) st.rate_wake = Time::max();  // dispatch below takes the token
  for (auto id : st.timers.take_due(t)) enqueue(self, id);
  if (fallen_due(st.relist_at, t)) {
    st.relist_at = Time::max();
    if (!st.draining) start(self);
  }
  if (fallen_due(st.recount_at, t)) {
    st.recount_at = Time::max();
    if (!st.draining && st.kind->metrics) count_objects(self);
  }
  if (fallen_due(st.next_resync, t)) {
    // A standby, or a draining controller, would queue nothing of what it lists.
    st.next_resync = st.draining ? Time::max() : saturating_add(t, st.kind->settings.resync);
    if (leads(self) && !st.draining) resync(self);
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
  bool lifted = st.lifted.erase(id) > 0;
  // Removed while its pass ran: whatever the pass asked for (a requeue_after, a retry),
  // there is nothing left to schedule.
  bool collected = st.collected.erase(id) > 0;
  // A retry (or requeue_now) after the next step of the backoff ladder, jittered.
  auto step_ladder = [&] {
    using ms = std::chrono::milliseconds;
    auto& d = st.backoff[id];
    d = next_step(d, cfg);
    auto delay = d;
    if (cfg.jitter > 0 && d.count() > 0) {
      // Near the cap, only as far up as the cap: the draws stay spread (retries of objects
      // that failed together stay apart), none past it.
      const auto step = static_cast<double>(d.count());
      const double room = static_cast<double>(cfg.max_retry.count()) / step - 1;
      std::uniform_real_distribution<double> fraction(-cfg.jitter, std::min(cfg.jitter, room));
      double jittered = step * (1 + fraction(st.random));
      delay = jittered >= static_cast<double>(ms::max().count())
                  ? ms::max()
                  : ms(std::llround(std::max(jittered, 0.0)));
      delay = std::min(delay, cfg.max_retry);
    }
    arm_timer(self, id, saturating_add(now(self), delay));
    return delay;
  };
  switch (collected ? Outcome::gone : o.kind) {
    case Outcome::error: {
      auto d = step_ladder();
      if (auto* m = st.kind->metrics.get()) m->retried();
      st.services.log(LogLevel::warning, "reconcile failed; retrying with backoff",
                      {{"kind", to_string(st.kind->gk)},
                       {"id", std::to_string(id)},
                       {"reason", o.message},
                       {"retry_in_ms", std::to_string(d.count())}});
      break;
    }
    case Outcome::success:
      if (o.requeue_now) {
        step_ladder();  // paced like a retry, but nothing failed: no log
        break;
      }
      [[fallthrough]];
    case Outcome::quarantined:
      st.backoff.erase(id);
      if (o.requeue_after.count() > 0)
        arm_timer(self, id, saturating_add(now(self), o.requeue_after));
      break;
    case Outcome::terminal_error:
      // Not retried: the pass already logged it and recorded its event. Only what lifts
      // the mark (see enqueue) reconciles it again, including a lift during this pass.
      // The ladder stays: a failure after the lift climbs on from it (only a success or
      // a reset clears it).
      if (!lifted) {
        st.terminal.insert(id);
        st.dirty.erase(id);
        st.enqueued_at.erase(id);
      }
      break;
    case Outcome::gone:
      st.terminal.erase(id);
      st.backoff.erase(id);
      break;
    case Outcome::cancelled:  // by stop, or begun deposed: the next start or term redoes it
      st.backoff.erase(id);
      break;
    case Outcome::busy:
      // Not run: the pass that holds it queues it again as it ends (released_atom), unless
      // its end came first and marked it dirty.
      if (!st.dirty.count(id)) st.awaiting_release.insert(id);
      break;
  }
  // A deposed leader's pass (its writes failed the fence) is the new leader's to retry.
  if (!leads(self)) st.timers.erase(id);
  if (!st.timers.contains(id)) st.kind->schedules->clear(id);
  if (st.dirty.erase(id)) {
    enqueue(self, id, false, true);
    if (!st.queued.count(id)) st.enqueued_at.erase(id);  // not queued after all
  }
  dispatch(self);
  rearm(self);
  if (st.drained && st.in_flight.empty()) {
    st.drained->deliver(true);
    st.drained.reset();
  }
}

/// A requeue a standby's controller was asked for: the request goes through the change
/// log to the leader's controller, in whichever process it runs (as Client::requeue's),
/// and is answered once that commits (not_found for a missing id).
template <class Claim, class Answer>
void requeue_through_log(Self self, const requeue_request& r, Claim claim, Answer answer) {
  auto writer = caf::actor_cast<store_writer_actor>(self->state.services.writer());
  if (!writer) {
    answer(make_error(errc::store, "the store writer is restarting; ask again"));
    return;
  }
  if (!claim()) return;
  auto done = [self, answer](caf::error err) mutable {
    --self->state.pending_reads;
    self->state.settling.check(idle(self));
    answer(std::move(err));
  };
  ++self->state.pending_reads;
  self->request(writer, caf::infinite,
                log_requeue_request{self->state.kind->gk, r.id, r.reset_backoff})
      .then([done](bool) mutable { done(caf::error{}); },
            [done](caf::error& err) mutable { done(std::move(err)); });
}

/// A requeue by hand: checks on the reader that `r.id` is an object of this kind, then
/// queues it (lifting a terminal mark) and dispatches, and only then answers: `answer`
/// gets no error once the object is queued, not_found for a missing or another kind's
/// id, or the read's error. `claim` is asked just before the object is queued: false
/// (the caller gave up waiting) leaves the object alone, unanswered.
/// `stopped` once the beehive stops; a standby hands it on (requeue_through_log).
template <class Claim, class Answer>
void requeue_checked(Self self, const requeue_request& r, Claim claim, Answer answer) {
  // Queued now, it would never run (stop dispatches nothing more), nor on a standby.
  auto refused = [self, r, claim, answer]() mutable {
    if (self->state.draining) {
      answer(make_error(errc::stopped, "the beehive is stopping"));
      return true;
    }
    if (leads(self)) return false;
    requeue_through_log(self, r, claim, answer);
    return true;
  };
  if (refused()) return;
  auto gk = self->state.kind->gk;
  ReadJob job = [gk, id = r.id](store::Reader& reader) {
    auto row = reader.get(id);
    return caf::make_message(row && row->meta.group == gk.group && row->meta.kind == gk.kind);
  };
  ++self->state.pending_reads;
  self->request(self->state.services.reader, caf::infinite, std::move(job))
      .then(
          [self, r, claim, answer, refused](bool exists) mutable {
            auto& st = self->state;
            --st.pending_reads;
            if (!exists) {
              st.settling.check(idle(self));
              answer(make_error(errc::not_found, "no " + to_string(st.kind->gk) + " with id " +
                                                     std::to_string(r.id)));
              return;
            }
            if (refused() || !claim()) {  // stopping, or deposed, while it read
              st.settling.check(idle(self));
              return;
            }
            if (r.reset_backoff) st.backoff.erase(r.id);
            st.timers.erase(r.id);
            enqueue(self, r.id, true);  // by hand: lifts a terminal mark
            dispatch(self);
            answer(caf::error{});
          },
          [self, answer](caf::error& err) mutable {
            --self->state.pending_reads;
            self->state.settling.check(idle(self));
            answer(std::move(err));
          });
}

}  // namespace

namespace {

/// The ids `other`'s change maps to, by the user's function; a throw is logged, and
/// maps to nothing.
std::vector<ObjectID> map_watched(
    Self self, const GroupKind& other,
    const std::function<std::vector<ObjectID>(const ObjectMeta&)>& map, const ObjectMeta& meta) {
  try {
    return map(meta);
  } catch (const std::exception& e) {
    self->state.services.log(LogLevel::error, "a with_watches map function threw",
                             {{"kind", to_string(self->state.kind->gk)},
                              {"watched", to_string(other)},
                              {"id", std::to_string(meta.id)},
                              {"reason", e.what()}});
  } catch (...) {
    self->state.services.log(LogLevel::error, "a with_watches map function threw",
                             {{"kind", to_string(self->state.kind->gk)},
                              {"watched", to_string(other)},
                              {"id", std::to_string(meta.id)},
                              {"reason", "unknown exception"}});
  }
  return {};
}

}  // namespace

caf::behavior worker(caf::event_based_actor*, std::shared_ptr<KindEntry> kind, Services services) {
  name_this_thread("bh.reconcile");
  return {
      [kind, services](reconcile_atom, ObjectID id) {
        PassRegistry::Hold hold(*kind->passes, id, kind->metrics.get());
        if (!hold.held()) return Outcome{Outcome::busy, {}, "a pass before this one still runs"};
        if (auto* m = kind->metrics.get()) {
          auto began = std::chrono::steady_clock::now();  // real time, not the Beehive's clock
          auto outcome = services.reconcile(*kind, id);
          m->reconciled(outcome, std::chrono::steady_clock::now() - began);
          return outcome;
        }
        return services.reconcile(*kind, id);
      },
  };
}

/// Queues what a commit record (or several, folded by the inbox) names for this kind:
/// its own objects created, respecified or being deleted, the owners and watchers of
/// the objects changed, dependents woken, requeues; forgets the objects removed.
void on_records(Self self, const commit_record& rec) {
  auto& st = self->state;
  auto& gk = st.kind->gk;
  const auto& cfg = st.kind->settings;
  // Other processes' changes this process will never hear of (the change log was
  // trimmed past what it had read): everything, as a takeover does.
  if (rec.lost_through > 0 && !st.draining) {
    // Not restarting a standby (it lists when it takes over), nor while the start
    // listing is out: that one may have been read before those changes, and is
    // followed by another once it ends. The counts missed them all the same.
    if (st.dispatching && leads(self)) {
      restart(self);
    } else {
      if (st.start_listing) st.lost_while_listing = true;
      if (st.kind->metrics) count_objects(self);
    }
  }
  for (auto& c : rec.changes) {
    // Rows at or below the start listing's versions were reconciled from it.
    if (wakes_controller(gk, c) && c.row.meta.resource_version > st.listed_rv)
      enqueue(self, c.row.meta.id, true);  // a new spec, or a deletion: lifts a terminal mark
    if (wakes_owner(gk, cfg, c)) enqueue(self, c.owner->id);
    for (std::size_t i = 0; i < cfg.watches.size(); ++i)
      if (of_kind(c.row.meta, cfg.watches[i].first))
        wake_watchers(self, i, c.row.meta, c.parts & object_change::removed);
  }
  for (auto& ref : rec.wakes)  // dependents of targets whose conditions changed
    if (ref.group == gk.group && ref.kind == gk.kind) enqueue(self, ref.id);
  for (auto& ref : rec.backoff_resets)  // before their requeues below
    if (ref.group == gk.group && ref.kind == gk.kind) st.backoff.erase(ref.id);
  // By hand (through the change log too), and dependents of targets whose deletion was
  // requested, which must drop their edges.
  for (auto& ref : rec.requeues)
    if (ref.group == gk.group && ref.kind == gk.kind) {
      st.timers.erase(ref.id);
      enqueue(self, ref.id, true);  // lifts a terminal mark
    }
  // Last: a removed object the same commit also woke (a dependency's wake, its
  // child's removal in the same cascade, a requeue) is not queued again.
  for (auto& c : rec.changes)
    if ((c.parts & object_change::removed) && of_kind(c.row.meta, gk)) forget(self, c.row.meta.id);
  if (auto* m = st.kind->metrics.get()) {
    for (auto& c : rec.changes)
      if (c.row.meta.group == gk.group && c.row.meta.kind == gk.kind)
        st.tally.changed(c.row.meta, c.parts & object_change::removed);
    report_objects(st, *m);
  }
  dispatch(self);
}

controller_impl::behavior_type controller(Self self, std::shared_ptr<KindEntry> kind,
                                          Services services, scheduler_impl scheduler,
                                          std::vector<caf::actor> workers, RecordInboxPtr inbox) {
  auto& st = self->state;
  st.kind = std::move(kind);
  st.watched.resize(st.kind->settings.watches.size());
  st.inbox = std::move(inbox);  // attached by the root, before it subscribes
  st.services = std::move(services);
  st.scheduler = std::move(scheduler);
  st.kind->schedules->use(st.services.timers);
  for (auto& w : workers) {
    self->link_to(w);  // workers end with their controller, and it with any of them
    st.idle.push_back(w);
  }
  st.workers = std::move(workers);
  // A controller starts with no timers: one it replaces (it crashed) may have left
  // entries that nothing would ever clear, such as of an object removed meanwhile.
  st.kind->schedules->clear_all();
  // The passes it left running hand their ids to this one as they end.
  st.kind->passes->on_release([addr = self->address()](ObjectID id) {
    if (auto c = caf::actor_cast<caf::actor>(addr)) caf::anon_send(c, released_atom::value, id);
  });
  return {
      [self](start_atom) { start(self); },
      [self](leadership_atom, bool leads) {
        // Taking over: everything, as a restart would (the old leader's queue and
        // timers died with its leadership). Stepping down: the passes in flight end
        // (their contexts are cancelled, their writes fail the fence), nothing more is
        // dispatched, and nothing is scheduled any more (the new leader's schedules are
        // its own process's).
        auto& st = self->state;
        st.deposed = !leads;
        if (leads && st.dispatching && !st.draining)
          restart(self);
        else if (leads && st.start_listing)
          // Taking over while the start listing is out: it may have been read before
          // what was created while this process did not lead (and so was not queued); it
          // lists again once that listing ends.
          st.lost_while_listing = true;
        else if (leads && !st.dispatching && !st.draining && st.relist_at != Time::max()) {
          // Taking over while the start listing waits for its retry: now, as a restart.
          st.relist_at = Time::max();
          st.relist_step = {};
          restart(self);
        }
        if (!leads) {
          st.queue.clear();
          st.queued.clear();
          st.awaiting_release.clear();
          st.timers.clear();
          st.enqueued_at.clear();
          st.kind->schedules->clear_all();
          if (auto* m = st.kind->metrics.get()) report_gauges(st, *m);  // nothing waits
          st.settling.check(idle(self));
        }
      },
      [self](const commit_record& rec) { on_records(self, rec); },
      [self](records_atom) { on_records(self, self->state.inbox->take()); },
      [self](wake_atom) { on_wake(self); },
      [self](const requeue_request& r) -> caf::result<bool> {
        auto rp = self->make_response_promise<bool>();
        auto n = ++self->state.requeues_made;
        self->state.requeues.emplace(n, rp);
        requeue_checked(
            self, r, [] { return true; },
            [self, n](caf::error err) {
              auto it = self->state.requeues.find(n);
              if (it == self->state.requeues.end()) return;
              auto rp = std::move(it->second);
              self->state.requeues.erase(it);
              if (err)
                rp.deliver(std::move(err));
              else
                rp.deliver(true);
            });
        return rp;
      },
      [self](const BlockingRequeuePtr& p) {
        requeue_checked(
            self, p->request, [p] { return p->reply->claim(); },
            [p](caf::error err) {
              if (err)
                p->reply->fail(to_errc(err).value_or(errc::store), error_message(err));
              else
                p->reply->deliver(true);
            });
      },
      [self](released_atom, ObjectID id) {
        auto& st = self->state;
        // In flight: its busy answer is on the way, and runs it again (dirty). Otherwise
        // only an id this controller was refused: one forgotten meanwhile stays so. Not a
        // new add (metrics): the refused pass ran nothing, and the add that led to it
        // was counted.
        if (st.in_flight.count(id) || st.awaiting_release.erase(id))
          enqueue(self, id, false, /*readded=*/true);
        dispatch(self);
        rearm(self);
        st.settling.check(idle(self));
      },
      [self](schedule_atom, ObjectID id) { return self->state.kind->schedules->get(id); },
      [self](const schedule_watch_request& r) {
        self->state.kind->schedules->watch_actor(r.id, r.subscriber);
        return true;
      },
      [self](unsubscribe_atom, ObjectID id, const caf::actor& subscriber) {
        self->state.kind->schedules->unwatch_actor(id, subscriber.address());
      },
      [self](inspect_atom) {
        auto& st = self->state;
        controller_state out;
        out.gk = st.kind->gk;
        out.queue_length = st.queued.size();
        out.in_flight.assign(st.in_flight.begin(), st.in_flight.end());
        std::sort(out.in_flight.begin(), out.in_flight.end());
        out.backoff.assign(st.backoff.begin(), st.backoff.end());
        std::sort(out.backoff.begin(), out.backoff.end());
        for (auto& [id, due] : st.timers.all())
          out.timers.emplace_back(id, st.services.timers->to_wall(due));
        std::sort(out.timers.begin(), out.timers.end());
        out.dispatching = st.dispatching;
        out.workers = static_cast<int>(st.workers.size());
        out.restarts = st.kind->restarts;
        out.schedule_watches = st.kind->schedules->watch_count();
        out.resync_listings = st.resync_listings;
        out.settle_waiting = st.settling.waiting();
        return out;
      },
      [](shutdown_atom) {},  // the writer's last word; stop ends us
      [self](settle_atom) { return self->state.settling.ask(self, idle(self)); },
      [self](drain_atom) -> caf::result<bool> {
        // Nothing more is dispatched; answered once the passes in flight have ended.
        auto& st = self->state;
        st.dispatching = false;
        st.draining = true;
        if (auto* m = st.kind->metrics.get()) report_gauges(st, *m);
        if (st.in_flight.empty()) return true;
        if (!st.drained) st.drained = self->make_response_promise<bool>();
        return *st.drained;
      },
  };
}

}  // namespace beehive::detail
