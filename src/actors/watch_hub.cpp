#include "actors/watch_hub.hpp"

#include <algorithm>
#include <iostream>
#include <optional>

#include <beehive/detail/codec.hpp>
#include <beehive/detail/saturate.hpp>

#include "actors/reader.hpp"
#include "metrics/store_metrics.hpp"
#include "options_internal.hpp"
#include "store/change_order.hpp"
#include "store/label_selector.hpp"
#include "store/request_checks.hpp"

namespace beehive::detail {

namespace {

using Self = watch_hub_impl::stateful_pointer<WatchHubState>;

/// Counts a subscription of actor `a`: the first one monitors it.
void watch_subscriber(WatchHubState& st, const caf::actor& a) {
  if (a && st.monitored[a.address()]++ == 0) st.self->monitor(a);
}

/// Uncounts a subscription of actor `a` that ended while `a` lives: its last one
/// demonitors it.
void release_subscriber(WatchHubState& st, const caf::actor& a) {
  if (!a) return;
  auto it = st.monitored.find(a.address());
  if (it == st.monitored.end() || --it->second > 0) return;
  st.monitored.erase(it);
  st.self->demonitor(a.address());
}

/// Publishes how many watches the hub serves (WatchHubFeed), those whose snapshot is being
/// read included: the writer skips the hub's commit records only while this is 0.
/// Reports it too (beehive_watch_subscribers).
void publish_watch_count(WatchHubState& st) {
  auto watches =
      st.subs.size() + st.event_subs.size() + st.opening.size() + st.opening_events.size();
  st.feed->if_publisher(st.address, [&] {
    st.feed->watches.store(watches);
    if (auto* m = st.services.metrics.get()) report_watch_subscribers(*m, watches);
  });
}

bool matches(const WatchHubState::Sub& s, const ObjectRow& row) {
  // A one-object watch is kind-scoped too: another kind's id is not this kind's object.
  return (!s.id || row.meta.id == *s.id) && row.meta.group == s.gk.group &&
         row.meta.kind == s.gk.kind;
}

/// `c` as a subscriber receives it: without the hub's own mark (kReaderMayHaveIt).
object_change outward(object_change c) {
  c.parts &= ~kReaderMayHaveIt;
  return c;
}

/// What a pulled subscription has not pulled yet, as it receives it.
std::vector<object_change> take_unread(ChangeCore& core) {
  auto out = core.take_all();
  for (auto& c : out) c.parts &= ~kReaderMayHaveIt;
  return out;
}

/// Delivers to one subscriber; false when the subscriber is gone.
bool deliver(const WatchHubState::Sub& s, object_change c) {
  if (s.core) return s.core->push(c.row.meta.id, std::move(c));
  caf::anon_send(s.actor, outward(std::move(c)));
  return true;
}

/// Answers a waiting pull with what is pending.
void answer_pull(WatchHubState::Sub& s) {
  if (!s.waiting || s.core->pending() == 0) return;
  s.waiting->deliver(take_unread(*s.core));
  s.waiting.reset();
}

/// Ends a subscription: its stream, its waiting pull and its actor hear `code`.
void end(std::uint64_t id, WatchHubState::Sub& s, errc code) {
  if (s.core) s.core->finish(code);
  if (s.waiting) s.waiting->deliver(make_error(code, "the watch ended"));
  s.waiting.reset();
  if (s.actor) caf::anon_send(s.actor, watch_ended{id, code});
}

/// A subscription removed on request or with its subscriber: a pull waiting on it, and a
/// blocking stream it served (an actor may name a wrong id), hear that it is gone rather
/// than wait for ever.
void drop(WatchHubState::Sub& s) {
  if (s.core) s.core->finish(errc::not_found);
  if (s.waiting) s.waiting->deliver(make_error(errc::not_found, "the watch ended"));
  s.waiting.reset();
}

void finish_shutdown(Self self);
bool wants(const WatchHubState::Sub& s, const QueuedChange& q);
object_change as_seen(const WatchHubState::Sub& s, const QueuedChange& q);
std::int64_t handled_through(const WatchHubState::Sub& s, const std::vector<QueuedChange>& changes);
std::optional<object_change> view(WatchHubState::Sub& s, object_change c);

/// Answers the opener of a watch that ends before it opened (`finish` ends it). An
/// actor hears its request's reply, the id, before watch_ended (both sent from here, in
/// that order), so that it knows which watch ended; a blocking stream is ended before
/// its caller is released, which then finds it ended.
template <class Sub, class Finish>
void end_unopened(std::uint64_t id, const Sub& sub, const WatchHubState::Ready& ready,
                  Finish&& finish) {
  if (sub.core) {
    finish();
    ready(id);
  } else {
    ready(id);
    finish();
  }
}

/// After a snapshot arrived (or failed): the hub's shutdown waited for the last one.
void after_opening(Self self) {
  auto& st = self->state;
  publish_watch_count(st);
  st.settling.check(st.opening.empty() && st.opening_events.empty());
  if (st.shutdown_pending && st.opening.empty() && st.opening_events.empty()) finish_shutdown(self);
}

/// The store failed to read a new watch's snapshot: the watch ends (`end_watch`, with
/// errc::store) rather than hide a gap, and its opener is released.
template <class Openings, class EndWatch>
void snapshot_failed(Self self, Openings& opening, std::uint64_t id, const caf::error& err,
                     const char* what, EndWatch end_watch) {
  auto it = opening.find(id);
  if (it == opening.end()) return;  // unsubscribed meanwhile
  self->state.services.log(LogLevel::error, what, {{"reason", error_message(err)}});
  auto& o = it->second;
  end_unopened(id, o.sub, o.ready, [&] { end_watch(id, o.sub); });
  opening.erase(it);
  after_opening(self);
}

/// Reads `sub`'s snapshot on the reader (the count includes it first, so that no commit
/// record the snapshot misses is skipped), then delivers it and serves the watch.
void add(Self self, std::uint64_t id, WatchHubState::Sub sub, WatchHubState::Ready ready) {
  auto& st = self->state;
  if (st.stopped || st.draining) {
    end_unopened(id, sub, ready, [&] { end(id, sub, errc::stopped); });
    return;
  }
  // A snapshot (its rows as Added), or the change log above the resume point; with the
  // version the watch goes live above, and whether the log no longer reaches back to it.
  WatchHubState::OpeningSub opening{std::move(sub), {}, {}, std::move(ready)};
  // A watch given up before the reader gets to it (its caller's deadline) costs no read:
  // a caller retrying with short deadlines must not queue read after read of the kind
  // ahead of the controllers' own.
  // A selector watch's snapshot is the rows it selects, selected by the database: the
  // kind's other rows would be read only to be left out.
  ReadJob job = [gk = opening.sub.gk, oid = opening.sub.id, from = opening.sub.resume_from,
                 selector = opening.sub.selector, abandoned = opening.abandoned,
                 feed = st.feed](store::Reader& r) {
    std::vector<object_change> changes;
    if (abandoned->load(std::memory_order_relaxed))
      return caf::make_message(std::move(changes), std::int64_t{0}, false);
    feed->snapshot_reads.fetch_add(1, std::memory_order_relaxed);
    if (!from) {
      std::int64_t floor = 0;
      // Marked: the watch hands its snapshot over at open, whether the reader has read
      // it yet or not. One of its objects removed before the reader read it arrives as
      // Deleted, never as nothing (which would leave a reader that waits for the
      // removal of the object it watches waiting for ever).
      for (auto& row : r.snapshot(gk, oid, selector, floor))
        changes.push_back(
            {ChangeType::Added, std::move(row), object_change::created | kReaderMayHaveIt});
      return caf::make_message(std::move(changes), floor, false);
    }
    auto log = r.changes_since(*from, gk, oid);
    // (Above the head: the facade refused it at once; an actor's request ends here.)
    // 0 is no position: a stream reads it while its snapshot is delivered, and a reader
    // that stopped part-way holds objects whose removal a replay from 0 would fold away
    // (created and removed above it). Too old, then: the reader lists afresh.
    if (*from == 0 || *from < log.horizon || *from > log.head)
      return caf::make_message(std::move(changes), log.head, true);
    for (auto& c : log.changes)
      // An object created and removed above the resume point: the reader never had it.
      if (c.row && !(c.type == ChangeType::Deleted && (c.parts & object_change::created))) {
        changes.push_back({c.type, std::move(*c.row), c.parts & store::kObjectParts});
        // A fold's first commit: the stream's position stays below it while it is
        // pending, as for a live change.
        if (c.first_version < c.resource_version) changes.back().first_version = c.first_version;
      }
    store::order_for_watches(changes);
    // Live changes at or below the head were replayed: the hub drops them.
    return caf::make_message(std::move(changes), log.head, false);
  };
  st.opening.emplace(id, std::move(opening));
  publish_watch_count(st);
  self->request(st.services.reader, caf::infinite, std::move(job))
      .then(
          [self, id](std::vector<object_change>& changes, std::int64_t floor, bool outside) {
            auto& st = self->state;
            auto it = st.opening.find(id);
            if (it == st.opening.end()) return;  // unsubscribed meanwhile
            auto o = std::move(it->second);
            st.opening.erase(it);
            auto& sub = o.sub;
            if (outside || floor < o.lost_through) {
              end_unopened(id, sub, o.ready, [&] {
                end(id, sub,
                    outside && floor < *sub.resume_from ? errc::watch_too_new
                                                        : errc::watch_too_old);
              });
              after_opening(self);
              return;
            }
            sub.floor = floor;
            sub.visible_exact = !sub.resume_from;
            // A resumed stream's position starts at its resume point: the replayed
            // changes are above it.
            if (sub.core) sub.core->set_floor(sub.resume_from.value_or(floor));
            for (auto& c : changes)
              if (auto seen = view(sub, std::move(c))) deliver(sub, *seen);
            // The replay covers everything up to the log's head, what it left out too.
            if (sub.core && sub.resume_from) sub.core->passed(floor);
            for (auto& q : o.held)
              if (wants(sub, q))
                if (auto seen = view(sub, as_seen(sub, q))) deliver(sub, *seen);
            if (sub.core) sub.core->passed(handled_through(sub, o.held));
            watch_subscriber(st, sub.actor);
            st.subs.emplace(id, std::move(sub));
            o.ready(id);
            after_opening(self);
          },
          [self, id](caf::error& err) {
            snapshot_failed(self, self->state.opening, id, err, "watch snapshot failed",
                            [](auto sid, auto& sub) { end(sid, sub, errc::store); });
          });
}

/// The error `check` throws for a request (text that is not UTF-8, a negative event
/// limit, a malformed selector: what the blocking calls refuse too), or nothing.
template <class F>
std::optional<caf::error> refusal(F&& check) {
  try {
    check();
  } catch (const Error& e) {
    return make_error(e.value(), e.message());
  }
  return std::nullopt;
}

const EventFilter& query_of(const event_watch_request& w) { return w.filter; }

bool passes(const event_watch_request& w, const Event& e) {
  auto& f = w.filter;
  // To the millisecond, as runs are stored and as the store's reads compare them.
  return e.object_id == w.id && (!f.category || e.category == *f.category) &&
         (!f.type || e.type == *f.type) && (!f.reason || e.reason == *f.reason) &&
         (!f.since || to_millis(e.last_at) >= to_millis(*f.since));
}

/// Hands run `r` to a blocking stream (`put`), then drops (`drop`) the unread runs of its
/// category that the store no longer keeps, by the retention of the object's kind: those
/// beyond the newest `per_object` handed to the stream, newest by the order the runs
/// started (their ids), as the store counts them whatever the clock did (the store's
/// newest include them, and may include runs the watch's filters leave out); and those
/// that ended more than the age bound before the newest began or was extended (the
/// store's sweep drops what is that old by its clock's now, which is later). A run the
/// reader has taken already is dropped as nothing.
template <class Put, class Drop>
void put_run(WatchHubState::EventSub& s, const event_run& r, Put& put, Drop& drop, Time now) {
  put(r.event.id, r);
  if (!s.retention) return;
  auto [per_object, max_age] = *s.retention;
  auto& runs = s.runs[r.event.category];
  const bool aged = max_age.count() > 0;
  auto [at, fresh] = runs.by_id.try_emplace(r.event.id, r.event.last_at);
  if (aged) {
    if (!fresh) runs.by_time.erase({at->second, at->first});  // an extension
    runs.by_time.emplace(r.event.last_at, r.event.id);
  }
  at->second = r.event.last_at;
  if (aged) {
    // By age: older than the bound before the newest run's time, or before the clock's
    // now when that is earlier (a clock stepped back left a run in the future, which
    // must not hold every later one). Whatever order the runs' times are in, each old
    // one goes; the newest by id always stays.
    auto newest = runs.by_time.rbegin()->first;
    auto cutoff = detail::saturating_add(std::min(newest, now), -max_age);
    const EventID newest_id = runs.by_id.rbegin()->first;
    for (auto it = runs.by_time.begin(); it != runs.by_time.end() && it->first < cutoff;) {
      if (it->second == newest_id) {
        ++it;
        continue;
      }
      drop(it->second);
      runs.by_id.erase(it->second);
      it = runs.by_time.erase(it);
    }
  }
  while (per_object > 0 && runs.by_id.size() > static_cast<std::size_t>(per_object)) {
    auto oldest = runs.by_id.begin();
    drop(oldest->first);
    if (aged) runs.by_time.erase({oldest->second, oldest->first});
    runs.by_id.erase(oldest);
  }
}

/// Hands `runs` to subscriber `s`; false when its stream has ended.
bool deliver(WatchHubState::EventSub& s, const std::vector<event_run>& runs, Time now) {
  if (!s.core) {
    for (auto& r : runs) caf::anon_send(s.filter.subscriber, r);
    return true;
  }
  return s.core->push_batch([&](auto& put, auto& drop) {
    for (auto& r : runs) put_run(s, r, put, drop, now);
  });
}

/// Learns the retention of the kind of `s`'s object (once the object exists).
void learn_kind(const WatchHubState& st, WatchHubState::EventSub& s, const GroupKind& gk) {
  s.kind_known = true;
  if (s.core && st.services.event_retention) s.retention = st.services.event_retention(gk);
}

void end_events(std::uint64_t id, WatchHubState::EventSub& s, errc code) {
  if (s.core) s.core->finish(code);
  if (s.filter.subscriber) caf::anon_send(s.filter.subscriber, watch_ended{id, code});
}

void add_events(Self self, std::uint64_t id, WatchHubState::EventSub sub,
                WatchHubState::Ready ready) {
  auto& st = self->state;
  if (st.stopped || st.draining) {
    end_unopened(id, sub, ready, [&] { end_events(id, sub, errc::stopped); });
    return;
  }
  WatchHubState::OpeningEventSub opening{std::move(sub), {}, {}, std::move(ready)};
  ReadJob job = [oid = opening.sub.filter.id, q = query_of(opening.sub.filter),
                 abandoned = opening.abandoned, feed = st.feed](store::Reader& r) {
    std::int64_t floor = 0;
    std::vector<event_run> runs;
    std::vector<GroupKind> kind;                     // the object's, if it exists
    if (abandoned->load(std::memory_order_relaxed))  // as for an object watch
      return caf::make_message(std::move(runs), floor, std::move(kind));
    feed->snapshot_reads.fetch_add(1, std::memory_order_relaxed);
    runs = r.event_snapshot(oid, q, floor);
    if (auto row = r.get(oid)) kind.push_back({row->meta.group, row->meta.kind});
    return caf::make_message(std::move(runs), floor, std::move(kind));
  };
  st.opening_events.emplace(id, std::move(opening));
  publish_watch_count(st);
  self->request(st.services.reader, caf::infinite, std::move(job))
      .then(
          [self, id](std::vector<event_run>& runs, std::int64_t floor,
                     std::vector<GroupKind>& kind) {
            auto& st = self->state;
            auto it = st.opening_events.find(id);
            if (it == st.opening_events.end()) return;
            auto o = std::move(it->second);
            st.opening_events.erase(it);
            auto& sub = o.sub;
            sub.floor = floor;
            if (!kind.empty())
              learn_kind(st, sub, kind.front());
            else if (o.kind)
              learn_kind(st, sub, *o.kind);
            for (auto& r : o.held)
              if (r.resource_version > floor && passes(sub.filter, r.event)) runs.push_back(r);
            deliver(sub, runs, st.services.timers->wall_now());
            if (o.removed) {  // as in fan_out
              o.ready(id);
              end_events(id, sub, errc::not_found);
              after_opening(self);
              return;
            }
            watch_subscriber(st, sub.filter.subscriber);
            st.event_subs.emplace(id, std::move(sub));
            o.ready(id);
            after_opening(self);
          },
          [self, id](caf::error& err) {
            snapshot_failed(self, self->state.opening_events, id, err,
                            "event watch snapshot failed",
                            [](auto sid, auto& sub) { end_events(sid, sub, errc::store); });
          });
}

/// Whether subscriber `s` is to hear of `q`: its kind (and id), not all of it in the
/// subscriber's snapshot, and not an object created and removed since then (folded into
/// one `Deleted`), which the subscriber never had.
bool wants(const WatchHubState::Sub& s, const QueuedChange& q) {
  const auto& c = q.change;
  if (c.type == ChangeType::Deleted && (c.parts & object_change::created) &&
      q.first_version > s.floor)
    return false;
  return c.row.meta.resource_version > s.floor && matches(s, c.row);
}

/// The highest version among `changes` that concerns `s` (its kind, and id), whether
/// `s` hears of it or not; 0 when none does.
std::int64_t handled_through(const WatchHubState::Sub& s,
                             const std::vector<QueuedChange>& changes) {
  std::int64_t through = 0;
  for (auto& q : changes)
    if (matches(s, q.change.row)) through = std::max(through, q.change.row.meta.resource_version);
  return through;
}

/// `q` as `s` is to hear of it. When the changes folded into `q` straddle the snapshot
/// (its creation was in the snapshot, later writes were not), the subscriber already has
/// the object: an `Added` is a modification of it.
object_change as_seen(const WatchHubState::Sub& s, const QueuedChange& q) {
  object_change c = q.change;
  // Folded from several commits: the reader's position must stay below the first (a
  // watch resumed from between them would miss the earlier ones).
  // The subscriber's snapshot (or replay) covers everything up to its floor, so the
  // position never has to stay below it: a first commit at or below the floor counts as
  // just above it (else the position would read 0, "snapshot not all delivered").
  if (q.first_version > 0 && q.first_version < c.row.meta.resource_version)
    c.first_version =
        std::min(c.first_version > 0 ? c.first_version : q.first_version, q.first_version);
  if (c.first_version > 0 && c.first_version <= s.floor)
    c.first_version = s.floor + 1 < c.row.meta.resource_version ? s.floor + 1 : 0;
  if (c.type == ChangeType::Added && q.first_version <= s.floor) {
    c.type = ChangeType::Modified;
    c.parts &= ~static_cast<unsigned>(object_change::created);
  }
  return c;
}

/// What subscriber `s` is to hear of `c`, or nothing: with a selector, an object that
/// starts matching arrives as `Added`, one that stops as `Deleted`, others not at all.
/// Keeps what the subscriber holds (`visible`, and after a resume `gone`).
std::optional<object_change> view(WatchHubState::Sub& s, object_change c) {
  if (!s.selector) return c;
  auto id = c.row.meta.id;
  bool match = s.selector->matches(c.row.meta.labels);
  bool labels_changed = c.parts & object_change::labels;
  bool existed = !(c.parts & object_change::created);
  bool was_visible = s.visible.count(id) > 0;
  // After a resume, an object the watch has not heard of since may still be held by the
  // subscriber: it matched at the resume point if it existed then and its labels have
  // not changed. The first change the subscriber hears of it is marked (merge_unread);
  // from then on the watch knows (`visible` or `gone`).
  bool unknown = !s.visible_exact && existed && !was_visible && !s.gone.count(id);
  if (c.type == ChangeType::Deleted) {
    s.visible.erase(id);
    s.gone.erase(id);  // removed: it never comes again
    // Its final labels may differ from the ones it matched with at the resume point.
    if (!was_visible && !(unknown && (match || labels_changed))) return std::nullopt;
    if (unknown) c.parts |= kReaderMayHaveIt;
    return c;
  }
  if (match) {
    if (!was_visible) {
      s.visible.insert(id);
      s.gone.erase(id);
      if (unknown && !labels_changed) {
        c.type = ChangeType::Modified;  // matched at the resume point as it does now
      } else {
        c.type = ChangeType::Added;
        if (unknown) c.parts |= kReaderMayHaveIt;  // perhaps it matched then too
      }
    }
    return c;
  }
  // It does not match: whatever the subscriber held, from now on it does not hold it
  // (unknown with unchanged labels: it did not match at the resume point either).
  bool held = was_visible || (unknown && labels_changed);
  if (!s.visible_exact) s.gone.insert(id);
  if (!held) return std::nullopt;
  s.visible.erase(id);
  if (unknown) c.parts |= kReaderMayHaveIt;
  c.type = ChangeType::Deleted;  // stopped matching: gone from the subscriber's view
  return c;
}

/// Other processes' changes up to `lost_through` were trimmed from the change log before
/// this process read them (commit_record::lost_through): the watches whose state is
/// older end as a resume below the log's horizon does, and a watch still reading its
/// snapshot ends when the snapshot turns out older too.
void end_lost(WatchHubState& st, std::int64_t lost_through) {
  std::size_t ended = 0;
  for (auto it = st.subs.begin(); it != st.subs.end();) {
    if (it->second.floor >= lost_through) {
      ++it;
      continue;
    }
    end(it->first, it->second, errc::watch_too_old);
    release_subscriber(st, it->second.actor);
    it = st.subs.erase(it);
    ++ended;
  }
  for (auto& [id, o] : st.opening) o.lost_through = std::max(o.lost_through, lost_through);
  if (ended > 0)
    st.services.log(
        LogLevel::warning,
        "the change log was trimmed past what this process had read of it "
        "(paused or cut off for longer than its retention): watches that may "
        "have missed a change end with watch_too_old",
        {{"watches", std::to_string(ended)}, {"lost_through", std::to_string(lost_through)}});
}

/// Hands what the inbox held to every subscriber: each blocking or pulled one under one
/// lock of its stream, with one wake-up. Ends the subscriptions whose streams ended.
void fan_out(WatchHubState& st, const HubBatch& batch) {
  if (batch.lost_through > 0) end_lost(st, batch.lost_through);
  // The batch's change of each object (one each), for the event watches: a change of
  // their object teaches its kind, its removal ends them.
  std::unordered_map<ObjectID, const QueuedChange*> by_id;
  if (!st.event_subs.empty() || !st.opening_events.empty())
    for (auto& q : batch.changes) by_id.emplace(q.change.row.meta.id, &q);
  auto change_of = [&](ObjectID id) -> const QueuedChange* {
    auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : it->second;
  };
  for (auto& [id, o] : st.opening)
    for (auto& q : batch.changes)
      if (matches(o.sub, q.change.row)) o.hold(q);
  for (auto& [id, o] : st.opening_events) {
    for (auto& r : batch.events)
      if (passes(o.sub.filter, r.event)) o.hold(r);
    if (auto* q = change_of(o.sub.filter.id)) {
      o.kind = GroupKind{q->change.row.meta.group, q->change.row.meta.kind};
      o.removed = o.removed || q->change.type == ChangeType::Deleted;
    }
  }
  for (auto it = st.subs.begin(); it != st.subs.end();) {
    auto& s = it->second;
    bool alive = true;
    if (s.core) {
      alive = s.core->push_batch([&](auto&& put) {
        for (auto& q : batch.changes)
          if (wants(s, q))
            if (auto seen = view(s, as_seen(s, q))) put(q.change.row.meta.id, std::move(*seen));
      });
      // What was left out (an object created and removed since the last take, another
      // kind's or object's change) counts as delivered: the position moves past it, so
      // that a quiet watch's position follows the store's and stays resumable.
      if (alive) s.core->passed(batch.through);
    } else {
      for (auto& q : batch.changes)
        if (wants(s, q))
          if (auto seen = view(s, as_seen(s, q)))
            caf::anon_send(s.actor, outward(std::move(*seen)));
    }
    answer_pull(s);
    if (alive) {
      ++it;
      continue;
    }
    release_subscriber(st, s.actor);
    it = st.subs.erase(it);
  }
  for (auto it = st.event_subs.begin(); it != st.event_subs.end();) {
    auto& s = it->second;
    auto wanted = [&](const event_run& r) {
      return r.resource_version > s.floor && passes(s.filter, r.event);
    };
    const auto* own = change_of(s.filter.id);
    if (own && !s.kind_known && s.core)  // the object did not exist when the watch opened
      learn_kind(st, s, {own->change.row.meta.group, own->change.row.meta.kind});
    bool alive = true;
    if (s.core) {
      auto now = st.services.timers->wall_now();
      alive = s.core->push_batch([&](auto& put, auto& drop) {
        for (auto& r : batch.events)
          if (wanted(r)) put_run(s, r, put, drop, now);
      });
    } else {
      for (auto& r : batch.events)
        if (wanted(r)) caf::anon_send(s.filter.subscriber, r);
    }
    if (alive && own && own->change.type == ChangeType::Deleted) {
      // Its events went with it, and none can come (ids are never reused): what is
      // pending is delivered, then the watch ends rather than wait for ever.
      end_events(it->first, s, errc::not_found);
      alive = false;
    }
    if (alive) {
      ++it;
      continue;
    }
    release_subscriber(st, s.filter.subscriber);
    it = st.event_subs.erase(it);
  }
  publish_watch_count(st);
}

/// Ends every watch with stopped and quits: the writer's shutdown has come and every
/// snapshot has been delivered.
void finish_shutdown(Self self) {
  auto& st = self->state;
  st.stopped = true;
  st.shutdown_pending = false;
  for (auto& [id, s] : st.subs) {
    // What was committed before the stop reaches a pulled subscriber too: the
    // waiting pull's reply, or pushed messages ahead of `watch_ended`.
    answer_pull(s);
    if (s.actor && s.core)
      for (auto& c : take_unread(*s.core)) caf::anon_send(s.actor, std::move(c));
    end(id, s, errc::stopped);
  }
  st.subs.clear();
  for (auto& [id, s] : st.event_subs) end_events(id, s, errc::stopped);
  st.event_subs.clear();
  publish_watch_count(st);
  self->quit();
}

/// A stop began: the watches still waiting for their snapshots end as stopped now, their
/// reads skipped, rather than hold the stop up while the reader reads the kinds (a
/// reconnecting crowd of watchers of a large kind would, for seconds).
void end_openings(Self self) {
  auto& st = self->state;
  for (auto& [id, o] : st.opening) {
    o.abandoned->store(true, std::memory_order_relaxed);
    end_unopened(id, o.sub, o.ready, [&, id = id] { end(id, o.sub, errc::stopped); });
  }
  st.opening.clear();
  for (auto& [id, o] : st.opening_events) {
    o.abandoned->store(true, std::memory_order_relaxed);
    end_unopened(id, o.sub, o.ready, [&, id = id] { end_events(id, o.sub, errc::stopped); });
  }
  st.opening_events.clear();
  after_opening(self);
}

/// Ends subscription `id`, open or opening, as `unsubscribe_atom` asks.
void unsubscribe(Self self, std::uint64_t id) {
  auto& st = self->state;
  if (auto it = st.subs.find(id); it != st.subs.end()) {
    drop(it->second);
    release_subscriber(st, it->second.actor);
    st.subs.erase(it);
  }
  // A blocking stream hears that its subscription is gone rather than wait for
  // ever (an actor may name a wrong id), whether it was open or opening.
  if (auto it = st.event_subs.find(id); it != st.event_subs.end()) {
    if (it->second.core) it->second.core->finish(errc::not_found);
    release_subscriber(st, it->second.filter.subscriber);
    st.event_subs.erase(it);
  }
  if (auto it = st.opening.find(id); it != st.opening.end()) {
    it->second.abandoned->store(true, std::memory_order_relaxed);
    drop(it->second.sub);
    it->second.ready(id);
    st.opening.erase(it);
  }
  if (auto it = st.opening_events.find(id); it != st.opening_events.end()) {
    it->second.abandoned->store(true, std::memory_order_relaxed);
    if (it->second.sub.core) it->second.sub.core->finish(errc::not_found);
    it->second.ready(id);
    st.opening_events.erase(it);
  }
}

/// Ends every subscription of `subscriber`, open or opening: what a watch request's
/// reply named when the requester had given up waiting for it (CAF dropped it).
void unsubscribe_all(Self self, const caf::actor& subscriber) {
  if (!subscriber) return;  // the blocking streams' "subscriber"
  auto& st = self->state;
  auto of = subscriber.address();
  std::vector<std::uint64_t> ids;
  for (auto& [id, s] : st.subs)
    if (s.actor.address() == of) ids.push_back(id);
  for (auto& [id, s] : st.event_subs)
    if (s.filter.subscriber.address() == of) ids.push_back(id);
  for (auto& [id, o] : st.opening)
    if (o.sub.actor.address() == of) ids.push_back(id);
  for (auto& [id, o] : st.opening_events)
    if (o.sub.filter.subscriber.address() == of) ids.push_back(id);
  for (auto id : ids) unsubscribe(self, id);
}

}  // namespace

WatchHubState::~WatchHubState() {
  for (auto& [id, o] : opening)
    end_unopened(id, o.sub, o.ready, [&, id = id] { end(id, o.sub, errc::store); });
  for (auto& [id, o] : opening_events)
    end_unopened(id, o.sub, o.ready, [&, id = id] { end_events(id, o.sub, errc::store); });
  for (auto& [id, s] : subs) end(id, s, errc::store);
  for (auto& [id, s] : event_subs) end_events(id, s, errc::store);
  // Ended, every one: a hub that crashed (or was restarted with the reader) must not
  // leave its count behind for a gauge nothing else would set (unless its successor has).
  if (auto* m = services.metrics.get())
    feed->if_publisher(address, [m] { report_watch_subscribers(*m, 0); });
}

watch_hub_impl::behavior_type watch_hub(Self self, Services services,
                                        std::shared_ptr<WatchHubFeed> feed) {
  self->state.services = std::move(services);
  self->state.feed = std::move(feed);
  self->state.address = self->address();
  self->state.feed->inbox.attach(self->state.address);
  self->state.self = self;
  self->set_down_handler([self](caf::down_msg& m) {
    self->state.monitored.erase(m.source);
    auto& subs = self->state.subs;
    for (auto it = subs.begin(); it != subs.end();) {
      if (it->second.actor.address() != m.source) {
        ++it;
        continue;
      }
      drop(it->second);
      it = subs.erase(it);
    }
    std::erase_if(self->state.event_subs,
                  [&](auto& kv) { return kv.second.filter.subscriber.address() == m.source; });
    publish_watch_count(self->state);
  });
  // An actor subscriber is monitored once its snapshot is delivered; one that went down
  // meanwhile is found then (messages to it are dropped) and removed by its down message.
  return {
      [self](const watch_request& r) -> caf::result<std::uint64_t> {
        if (self->state.draining) return make_error(errc::stopped, "beehive stopped");
        WatchHubState::Sub sub{r.gk, r.id, nullptr, r.subscriber, 0};
        if (auto err = refusal([&] {
              if (!r.subscriber) throw Error(errc::invalid_argument, "a watch needs a subscriber");
              store::check_kind(r.gk);
              if (r.resume_from && *r.resume_from < 0)
                throw Error(errc::invalid_argument, "resume_from takes a resource version, not " +
                                                        std::to_string(*r.resume_from));
              sub.selector = store::parse_selector(r.selector);
            }))
          return *err;
        if (r.pull) sub.core = std::make_shared<ChangeCore>(Context{}, merge_unread);
        sub.resume_from = r.resume_from;
        auto rp = self->make_response_promise<std::uint64_t>();
        add(self, self->state.services.next_subscription(), std::move(sub),
            [rp](std::uint64_t id) mutable { rp.deliver(id); });
        return rp;
      },
      [self](pull_atom, std::uint64_t id) -> caf::result<std::vector<object_change>> {
        auto it = self->state.subs.find(id);
        if (it == self->state.subs.end() || !it->second.actor || !it->second.core)
          return make_error(errc::not_found, "no pulled subscription " + std::to_string(id));
        auto& s = it->second;
        if (s.core->pending() > 0) return take_unread(*s.core);
        // A pull still parked is one whose requester gave up (its timeout passed): the
        // new one takes its place, and it hears of nothing.
        if (s.waiting) s.waiting->deliver(std::vector<object_change>{});
        s.waiting = self->make_response_promise<std::vector<object_change>>();
        return *s.waiting;
      },
      [self](const StreamWatchPtr& w) {
        // Served once its snapshot is in: if the hub dies first, the watch's last
        // reference goes and releases the caller as stopped.
        WatchHubState::Sub sub{w->gk, w->id, w->core, nullptr, 0};
        sub.selector = w->selector;
        sub.resume_from = w->resume_from;
        add(self, w->subscription, std::move(sub), [w](std::uint64_t) {
          w->served = true;
          w->ready->deliver(true);
        });
      },
      [self](const event_watch_request& r) -> caf::result<std::uint64_t> {
        if (self->state.draining) return make_error(errc::stopped, "beehive stopped");
        if (auto err = refusal([&] {
              if (!r.subscriber)
                throw Error(errc::invalid_argument, "an event watch needs a subscriber");
              store::check_filter(r.filter);
            }))
          return *err;
        auto rp = self->make_response_promise<std::uint64_t>();
        add_events(self, self->state.services.next_subscription(), {r, nullptr, 0},
                   [rp](std::uint64_t id) mutable { rp.deliver(id); });
        return rp;
      },
      [self](const EventStreamWatchPtr& w) {
        add_events(self, w->subscription, {w->filter, w->core, 0}, [w](std::uint64_t) {
          w->served = true;
          w->ready->deliver(true);
        });
      },
      [self](inspect_atom) {
        auto& st = self->state;
        auto& inbox = st.feed->inbox;
        watch_hub_state out{st.subs.size(), st.event_subs.size(), 0,
                            inbox.size(),   inbox.peak(),         st.monitored.size()};
        for (auto& [id, s] : st.subs)
          if (s.core) out.pending += s.core->pending();
        for (auto& [id, s] : st.event_subs)
          if (s.core) out.pending += s.core->pending();
        return out;
      },
      [self](unsubscribe_atom, std::uint64_t id) {
        unsubscribe(self, id);
        after_opening(self);
      },
      [self](unsubscribe_atom, const caf::actor& subscriber) {
        unsubscribe_all(self, subscriber);
        after_opening(self);
      },
      [self](settle_atom) {
        // Every commit the writer posted before the root asked is handed out now.
        auto& st = self->state;
        fan_out(st, st.feed->inbox.take());
        return st.settling.ask(self, st.opening.empty() && st.opening_events.empty());
      },
      [self](hub_wake_atom) { fan_out(self->state, self->state.feed->inbox.take()); },
      [self](drain_atom) {
        self->state.draining = true;
        end_openings(self);
      },
      [self](shutdown_atom) {
        auto& st = self->state;
        // The writer posted its last commit before it sent this.
        fan_out(st, st.feed->inbox.take());
        st.shutdown_pending = true;
        if (st.opening.empty() && st.opening_events.empty()) finish_shutdown(self);
      },
  };
}

}  // namespace beehive::detail
