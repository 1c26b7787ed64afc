#include "actors/store_writer.hpp"

#include <sched.h>

#include <algorithm>
#include <limits>
#include <thread>
#include <type_traits>
#include <utility>

#include <beehive/detail/codec.hpp>

#include "options_internal.hpp"
#include "store/write_ops.hpp"

namespace beehive::detail {

namespace {

using store::WriteOps;
using Self = store_writer_impl::stateful_pointer<StoreWriterState>;

WriteReply run_op(WriteOps& ops, const create_request& r) {
  return {ops.create(r.gk, r.spec, r.slug, r.finalizers, r.owner, r.spec_version)};
}
WriteReply run_op(WriteOps& ops, const update_request& r) {
  return {ops.update(r.gk, r.id, r.spec, r.spec_version)};
}
WriteReply run_op(WriteOps& ops, const create_or_update_request& r) {
  return {ops.create_or_update(r.gk, r.slug, r.spec, r.spec_version)};
}
WriteReply run_op(WriteOps& ops, const get_or_create_request& r) {
  auto [row, created] =
      ops.get_or_create(r.gk, r.slug, r.spec, r.finalizers, r.owner, r.spec_version);
  return {std::move(row), created};
}
WriteReply run_op(WriteOps& ops, const remove_request& r) { return {ops.remove(r.gk, r.id)}; }
WriteReply run_op(WriteOps& ops, const remove_by_slug_request& r) {
  return {{}, ops.remove_by_slug(r.gk, r.slug)};
}
WriteReply run_op(WriteOps& ops, const update_status_request& r) {
  return {ops.update_status(r.gk, r.id, r.observed_generation, r.status, r.status_version)};
}
WriteReply run_op(WriteOps& ops, const set_condition_request& r) {
  return {ops.set_condition(r.gk, r.id, r.condition)};
}
WriteReply run_op(WriteOps& ops, const remove_condition_request& r) {
  return {ops.remove_condition(r.gk, r.id, r.type)};
}
WriteReply run_op(WriteOps& ops, const remove_finalizer_request& r) {
  return {ops.remove_finalizer(r.gk, r.id, r.finalizer)};
}
WriteReply run_op(WriteOps& ops, const add_dependency_request& r) {
  return {{}, ops.add_dependency(r.gk, r.from, r.to)};
}
WriteReply run_op(WriteOps& ops, const remove_dependency_request& r) {
  return {{}, ops.remove_dependency(r.gk, r.from, r.to)};
}
WriteReply run_op(WriteOps& ops, const record_event_request& r) {
  WriteReply reply;
  reply.event = ops.record_event(r.gk, r.id, r.event);
  return reply;
}
WriteReply run_op(WriteOps& ops, const collect_request&) {
  WriteReply reply;
  reply.count = ops.collect_garbage();
  return reply;
}
WriteReply run_op(WriteOps& ops, const trim_events_request& r) {
  WriteReply reply;
  reply.count = ops.trim_events(r);
  return reply;
}
WriteReply run_op(WriteOps&, const SessionCmd&) {
  throw Error(errc::store, "session command outside the session handler");
}
WriteReply run_op(WriteOps&, const ReadOp&) {
  throw Error(errc::store, "read outside the read handler");
}

WriteReply read(store::Writer& w, const ReadOp& r) {
  WriteReply reply;
  switch (r.what) {
    case ReadOp::get:
      if (auto row = w.get(r.id, r.loads)) reply.rows.push_back(std::move(*row));
      break;
    case ReadOp::get_by_slug:
      if (auto row = w.get_by_slug(r.gk, r.slug, r.loads)) reply.rows.push_back(std::move(*row));
      break;
    case ReadOp::list:
      reply.rows = w.list(r.gk, r.loads);
      break;
    case ReadOp::list_owned:
      reply.rows = w.list_owned_objects(r.gk, r.id, r.loads);
      break;
    case ReadOp::related:
      reply.refs = w.related(r.id, r.loads);
      break;
    case ReadOp::incoming:
      reply.flag = w.has_incoming_refs(r.id);
      break;
    case ReadOp::events:
      reply.events = w.list_events(r.id, r.query);
      break;
    case ReadOp::current:
      if (auto run = w.current_run(r.id, r.query.category.value_or("")))
        reply.events.push_back(*run);
      break;
  }
  return reply;
}

using SteadyTime = std::chrono::steady_clock::time_point;

/// When a transaction began, for the write-latency metric: no clock read without a sink.
SteadyTime began(const StoreWriterState& st) {
  return st.cfg->metrics ? std::chrono::steady_clock::now() : SteadyTime{};
}

/// Reports a transaction right after its COMMIT (before deferred work can run).
void committed(const StoreWriterState& st, SteadyTime since) {
  if (auto* m = st.cfg->metrics.get()) {
    static const MetricLabels none;
    auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - since);
    m->counter_add(metric::store_transactions_total, none, 1);
    m->histogram_observe(metric::store_write_duration, none, took.count());
  }
}

/// Sends a commit's record on; `own`: this writer's commit (else another process's,
/// found by poll_foreign, which counts as no transaction of this writer).
void publish(StoreWriterState& st, const commit_record& rec, bool own = true) {
  if (own) ++st.transactions;
  if (rec.empty()) return;
  if (own && st.cfg->foreign_poll.count() > 0)
    for (auto& c : rec.changes) st.own_rvs.push_back(c.row.meta.resource_version);
  for (auto& s : st.subscribers)
    if (!s.wants || s.wants(rec)) caf::anon_send(s.actor, rec);
  if (st.hub) {
    // A read-modify-write: a full barrier between the commit and the read of the count
    // (a fence would do too, but ThreadSanitizer does not model fences). The inbox, not
    // the hub's mailbox: it holds one change per object however far the hub lags.
    if (st.cfg->hub_gate->watches.fetch_add(0) > 0) st.cfg->hub_gate->inbox.post(rec);
  }
}

/// The commit record of rows another process changed: a create when the row is as
/// created, else a change of every part (level-triggered readers sort it out).
object_change foreign_change(ObjectRow row) {
  object_change c;
  bool created = row.meta.generation == 1 && row.meta.created_at == row.meta.updated_at;
  c.type = created ? ChangeType::Added : ChangeType::Modified;
  c.parts = created ? object_change::created
                    : object_change::spec | object_change::status | object_change::conditions |
                          object_change::finalizers;
  if (row.meta.deletion_requested_at) c.parts |= object_change::deletion;
  c.row = std::move(row);
  return c;
}

/// Publishes what other processes committed since the last look (see foreign_poll).
void poll_foreign(StoreWriterState& st) {
  auto& w = *st.cfg->writer;
  if (st.session) return;  // its transaction would hide them: next time
  std::int64_t own_max = 0;
  for (auto rv : st.own_rvs) own_max = std::max(own_max, rv);
  auto dv = w.data_version();
  if (dv == st.data_version) {  // nobody else committed: everything is published
    st.seen_rv = std::max(st.seen_rv, own_max);
    st.own_rvs.clear();
    return;
  }
  st.data_version = dv;
  std::int64_t head = 0;
  auto rows = w.changed_since(st.seen_rv, head);
  std::sort(st.own_rvs.begin(), st.own_rvs.end());
  commit_record rec;
  for (auto& row : rows)
    if (!std::binary_search(st.own_rvs.begin(), st.own_rvs.end(), row.meta.resource_version))
      rec.changes.push_back(foreign_change(std::move(row)));
  st.seen_rv = std::max({st.seen_rv, head, own_max});
  st.own_rvs.clear();
  publish(st, rec, false);
}

/// An exception's explanation without the code name that Error::what() appends.
std::string message_of(const std::exception& e) {
  if (auto* be = dynamic_cast<const Error*>(&e)) return be->message();
  return e.what();
}

/// While `begin` waits for another process's lock, it keeps waiting only as long as
/// `keep_waiting` says (some caller still waits for the outcome); reset afterwards.
class LockWait {
 public:
  LockWait(store::Writer& w, std::function<bool()> keep_waiting) : w_(w) {
    w_.set_lock_wait(std::move(keep_waiting));
  }
  ~LockWait() { w_.set_lock_wait({}); }
  LockWait(const LockWait&) = delete;
  LockWait& operator=(const LockWait&) = delete;

 private:
  store::Writer& w_;
};

/// A write of the session failed. Undoes its savepoint, unless the database already
/// rolled the whole transaction back: then the session is broken (see
/// StoreWriterState::broken) rather than carrying on outside a transaction.
void undo_savepoint(StoreWriterState& st, int sp, const std::string& why) {
  auto& w = *st.cfg->writer;
  if (!w.in_transaction()) {
    st.broken = why;
    return;
  }
  try {
    w.rollback_to(sp);
  } catch (const std::exception& e) {
    st.broken = why + " (" + message_of(e) + ")";
  }
}

Error broken_session(const StoreWriterState& st) {
  return Error(errc::store, "the transaction was rolled back after a failure: " + st.broken);
}

/// Commits the writer's transaction and records how long that took (gathering in
/// refill, and whether waiting callers should spin).
void timed_commit(StoreWriterState& st) {
  auto began = std::chrono::steady_clock::now();
  st.cfg->writer->commit();
  st.last_commit = std::chrono::steady_clock::now() - began;
  st.cfg->queue->commit_took(st.last_commit);
}

/// Runs one write and its check (a create's before its INSERT); throws, leaving the
/// caller to undo what the write did (see alone_atomic).
/// Refuses a write whose spec, status or event is larger than the bounds (nothing of it
/// is written): one place for the blocking and the actor surface.
void check_size(const StoreWriterState& st, const WriteOp& op) {
  auto limit = st.cfg->max_object_bytes;
  auto require = [](std::size_t size, std::size_t max, const char* what) {
    if (size > max)
      throw Error(errc::invalid_argument, std::string(what) + " of " + std::to_string(size) +
                                              " bytes is over the limit of " +
                                              std::to_string(max));
  };
  std::visit(
      [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, create_request> || std::is_same_v<R, update_request> ||
                      std::is_same_v<R, create_or_update_request> ||
                      std::is_same_v<R, get_or_create_request>)
          require(r.spec.size(), limit, "a spec");
        else if constexpr (std::is_same_v<R, update_status_request>)
          require(r.status.size(), limit, "a status");
        else if constexpr (std::is_same_v<R, record_event_request>) {
          require(r.event.message.size(), max_event_message_bytes, "an event message");
          if (!r.event.detail.is_null())
            require(dump_json(r.event.detail).size(), max_event_detail_bytes, "an event detail");
        }
      },
      op);
}

WriteReply apply(StoreWriterState& st, const WriteOp& op, const RowCheck& check,
                 commit_record& rec) {
  check_size(st, op);
  WriteOps::RowCheck checked;
  if (check)
    checked = [&check](const ObjectRow& row) {
      try {
        check(row);
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        throw Error(errc::decode, e.what());
      } catch (...) {  // a migrator may throw anything
        throw Error(errc::decode, "decoding the written row threw a non-standard exception");
      }
    };
  WriteOps ops(*st.cfg->writer, st.cfg->clock->now(), rec, check ? &checked : nullptr);
  auto reply = std::visit([&](const auto& r) { return run_op(ops, r); }, op);
  if (check && !ops.checked()) checked(reply.row);
  return reply;
}

/// A create without an owner is one INSERT (its slug is looked up before, its spec was
/// decoded by its caller): SQLite undoes a failing statement by itself, so in a group it
/// needs no savepoint of its own, whose copies of the pages it touches are a sizeable
/// part of its cost.
bool alone_atomic(const WriteOp& op) {
  auto* c = std::get_if<create_request>(&op);
  return c && !c->owner;
}

/// A GC pass that would find nothing, or a sweep without a retention policy, takes no
/// write transaction: an idle beehive's passes are two index reads each.
bool nothing_to_do(store::Writer& w, const WriteOp& op) {
  if (std::holds_alternative<collect_request>(op))
    return w.cascade_candidates().empty() && w.collectible().empty();
  if (auto* t = std::get_if<trim_events_request>(&op)) return !t->fallback && t->retention.empty();
  return false;
}

/// Runs one write: in the open session, or as a transaction of its own. `caller`, when
/// given, is the blocked caller waiting for it: a lock held by another process is waited
/// for only while the caller waits, and a caller that gave up meanwhile is not written.
WriteReply execute(StoreWriterState& st, const WriteOp& op, const RowCheck& check,
                   RendezvousBase* caller = nullptr) {
  auto& w = *st.cfg->writer;
  auto not_applied = [] { return Error(errc::cancelled, "the caller stopped waiting"); };
  if (st.session) {
    if (!st.broken.empty()) throw broken_session(st);
    if (caller && !caller->claim()) throw not_applied();
    // Inside a session: a savepoint per write, so that a failing one rolls back alone.
    int sp = st.depth + 1;
    commit_record rec;
    w.savepoint(sp);
    try {
      auto reply = apply(st, op, check, rec);
      w.release(sp);
      st.session_rec.append(std::move(rec));
      return reply;
    } catch (const std::exception& e) {
      undo_savepoint(st, sp, message_of(e));
      throw;
    } catch (...) {
      undo_savepoint(st, sp, "a write failed");
      throw;
    }
  }
  if (nothing_to_do(w, op)) return {};
  commit_record rec;
  auto since = began(st);
  {
    LockWait wait(w, [caller] { return !caller || !caller->abandoned(); });
    w.begin();
  }
  // From here on the caller waits for the real outcome (see Rendezvous::claim).
  if (caller && !caller->claim()) {
    w.rollback();
    throw not_applied();
  }
  WriteReply reply;
  try {
    reply = apply(st, op, check, rec);
    timed_commit(st);
  } catch (...) {
    w.rollback();
    throw;
  }
  committed(st, since);
  publish(st, rec);
  return reply;
}

/// Runs what waited for the session to end, until another session begins.
void run_deferred(StoreWriterState& st) {
  while (!st.session && !st.deferred.empty()) {
    auto job = std::move(st.deferred.front());
    st.deferred.pop_front();
    job();
  }
}

void end_session(StoreWriterState& st) {
  st.session = 0;
  st.depth = 0;
  st.broken.clear();
  st.marks.clear();
  st.session_rec = {};
  run_deferred(st);
}

WriteReply session_step(StoreWriterState& st, SessionCmd::Kind kind,
                        const RendezvousBase* caller = nullptr) {
  auto& w = *st.cfg->writer;
  // A broken session has no transaction left: nested blocks only keep their
  // bookkeeping (their writes failed already), and the commit fails.
  bool live = st.broken.empty();
  switch (kind) {
    case SessionCmd::begin: {
      st.session_began = began(st);
      LockWait wait(w, [caller] { return !caller || !caller->abandoned(); });
      w.begin();
      st.session = ++st.last_session;
      return {{}, false, st.session};
    }
    case SessionCmd::savepoint:
      if (live) w.savepoint(st.depth + 1);
      ++st.depth;
      st.marks.push_back({st.session_rec.changes.size(), st.session_rec.wakes.size(),
                          st.session_rec.edges_removed});
      break;
    case SessionCmd::release:
      if (live) w.release(st.depth);
      --st.depth;
      st.marks.pop_back();
      break;
    case SessionCmd::rollback_to:
      if (live) undo_savepoint(st, st.depth, "a nested block failed");
      --st.depth;
      st.session_rec.changes.resize(st.marks.back().changes);
      st.session_rec.wakes.resize(st.marks.back().wakes);
      st.session_rec.edges_removed = st.marks.back().edges_removed;
      st.marks.pop_back();
      break;
    case SessionCmd::commit: {
      if (!live) {
        auto err = broken_session(st);
        w.rollback();
        end_session(st);
        throw err;
      }
      auto changes = std::move(st.session_rec);
      try {
        w.commit();
      } catch (...) {
        w.rollback();
        end_session(st);
        throw;
      }
      committed(st, st.session_began);
      // Before end_session runs the writes deferred behind the session: their records
      // come after this one, as their versions do.
      publish(st, changes);
      end_session(st);
      break;
    }
    case SessionCmd::rollback:
      w.rollback();
      end_session(st);
      break;
  }
  return {};
}

void serve_blocking(StoreWriterState& st, const BlockingWritePtr& w) {
  if (st.session && w->session != st.session && w->session == 0) {
    st.deferred.push_back([&st, w] { serve_blocking(st, w); });
    return;
  }
  auto& reply = *w->reply;
  if (w->session != st.session) {
    if (w->session == st.aborted_session)
      reply.fail(errc::stopped, "beehive stopped; the within block was rolled back");
    else
      reply.fail(errc::invalid_argument, "the within block this context belongs to has ended");
    return;
  }
  auto* cmd = std::get_if<SessionCmd>(&w->op);
  bool begins = cmd && cmd->kind == SessionCmd::begin;
  if ((!cmd || begins) && reply.abandoned()) {
    reply.fail(errc::cancelled, "the caller stopped waiting");
    return;
  }
  auto& writer = *st.cfg->writer;
  try {
    if (auto* r = std::get_if<ReadOp>(&w->op)) {
      if (st.session && !st.broken.empty()) throw broken_session(st);
      reply.deliver(read(writer, *r));
    } else if (begins) {
      // A caller that gave up while the session began (waiting for another process's
      // lock) will never end it: end it here, or the writer would serve nobody else.
      if (!reply.deliver(session_step(st, cmd->kind, &reply))) {
        writer.rollback();
        end_session(st);
      }
    } else {
      reply.deliver(cmd ? session_step(st, cmd->kind) : execute(st, w->op, w->check, &reply));
    }
  } catch (const std::exception& e) {
    // A failed read can take the session's transaction with it too.
    if (st.session && st.broken.empty() && !writer.in_transaction()) st.broken = message_of(e);
    auto* be = dynamic_cast<const Error*>(&e);
    reply.fail(be ? be->value() : errc::store, message_of(e));
  }
}

bool groupable(const StoreWriterState& st, const BlockingWrite& w) {
  return !st.session && w.session == 0 && !std::holds_alternative<SessionCmd>(w.op) &&
         !std::holds_alternative<ReadOp>(w.op);
}

/// Writes that arrived while a group was being applied, for the same transaction. After
/// a group commit the callers it answered usually come back within a few tens of
/// microseconds: waiting for them (at most half the last COMMIT, and only while that
/// pays) lets them join this transaction instead of waiting out a whole commit of their
/// own; callers that write back to back otherwise split into two groups taking turns.
/// The wait overlaps the callers' turnaround with this group's apply phase.
/// A bound on a group, should writes keep arriving faster than they are applied.
constexpr std::size_t kMaxGroup = 256;

std::vector<BlockingWritePtr> refill(StoreWriterState& st, std::size_t have) {
  auto& q = *st.cfg->queue;
  auto expected = st.queued_at_commit + st.last_group;
  if (st.last_group >= 2 && have + q.size() < expected &&
      (st.gather_credit > 0 || ++st.gather_probe % 16 == 0)) {
    auto until =
        std::chrono::steady_clock::now() + std::min<std::chrono::steady_clock::duration>(
                                               st.last_commit / 2, std::chrono::microseconds(500));
    while (have + q.size() < expected && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();  // the callers need the CPU more than this thread
    bool caught = have + q.size() >= expected;
    st.gather_credit =
        caught ? std::min(st.gather_credit + 1, 16) : std::max(st.gather_credit - 2, 0);
  }
  return q.take();
}

/// Answers a committed group, callers that last ran on another CPU than this thread's
/// first. Waking an idle CPU takes longest (tens of microseconds in a VM): woken first,
/// those callers come back while this thread wakes the others, whose wake-up usually
/// runs them on this CPU at once, in its place.
template <class Reply>
void reply_group(const std::vector<BlockingWritePtr>& group, Reply reply) {
  const int here = sched_getcpu();
  for (std::size_t i = 0; i < group.size(); ++i)
    if (group[i]->cpu != here) reply(i);
  for (std::size_t i = 0; i < group.size(); ++i)
    if (group[i]->cpu == here) reply(i);
}

/// Applies plain writes in one transaction, each in a savepoint (or atomic alone) so that
/// a failing one rolls back alone; replies and publishes only after the commit. Plain writes that
/// arrive meanwhile join the group; anything else arriving is left in `rest`, in order.
void commit_group(StoreWriterState& st, std::vector<BlockingWritePtr>& group,
                  std::vector<BlockingWritePtr>& rest) {
  if (group.size() == 1 && st.last_group < 2 && !st.cfg->queue->maybe_nonempty()) {
    serve_blocking(st, group.front());  // a lone write: no savepoint, no waiting
    group.clear();
    return;
  }
  auto& w = *st.cfg->writer;
  struct Outcome {
    std::optional<WriteReply> reply;
    errc code = errc::store;
    std::string what;
  };
  std::vector<Outcome> outcomes;
  commit_record rec;
  auto since = began(st);
  try {
    {
      // Another process's lock is waited for while any caller of the group still waits.
      LockWait wait(w, [&group] {
        return std::any_of(group.begin(), group.end(),
                           [](const BlockingWritePtr& b) { return !b->reply->abandoned(); });
      });
      w.begin();
    }
    for (std::size_t i = 0;; ++i) {
      if (i == group.size()) {
        if (!rest.empty() || group.size() >= kMaxGroup) break;
        for (auto& more : refill(st, group.size()))
          (rest.empty() && groupable(st, *more) ? group : rest).push_back(std::move(more));
        if (i == group.size()) break;
      }
      outcomes.emplace_back();
      auto& item = *group[i];
      if (!item.reply->claim()) {  // gave up before its turn: not applied
        outcomes[i] = {std::nullopt, errc::cancelled, "the caller stopped waiting"};
        continue;
      }
      commit_record one;
      bool savepoint = !alone_atomic(item.op);
      if (savepoint) w.savepoint(1);
      try {
        outcomes[i].reply = apply(st, item.op, item.check, one);
        if (savepoint) w.release(1);
        rec.append(std::move(one));
      } catch (const Error& e) {
        // The database may have rolled the whole transaction back (an I/O error, a
        // full disk): then the group fails as one, below, rather than the writes after
        // this one committing on their own.
        if (!w.in_transaction()) throw;
        if (savepoint) w.rollback_to(1);
        outcomes[i] = {std::nullopt, e.value(), e.message()};
      } catch (const std::exception& e) {
        if (!w.in_transaction()) throw;
        if (savepoint) w.rollback_to(1);
        outcomes[i] = {std::nullopt, errc::store, e.what()};
      }
    }
    timed_commit(st);
    st.last_group = group.size();
    st.queued_at_commit = st.cfg->queue->size();
  } catch (const std::exception& e) {  // the transaction itself failed: nothing landed
    w.rollback();
    // No caller is told that its write landed: every reply of the group fails.
    for (auto& item : group) item->reply->fail(errc::store, message_of(e));
    group.clear();
    return;
  }
  committed(st, since);
  publish(st, rec);
  reply_group(group, [&](std::size_t i) {
    if (outcomes[i].reply)
      group[i]->reply->deliver(std::move(*outcomes[i].reply));
    else
      group[i]->reply->fail(outcomes[i].code, outcomes[i].what);
  });
  group.clear();
}

/// Serves one drain of the queue, in arrival order (what arrives while a group is
/// applied is served too).
void serve_batch(StoreWriterState& st, std::vector<BlockingWritePtr> batch) {
  std::vector<BlockingWritePtr> group;
  std::vector<BlockingWritePtr> rest;
  while (!batch.empty()) {
    for (auto& w : batch) {
      if (groupable(st, *w)) {
        group.push_back(std::move(w));
        continue;
      }
      if (!group.empty()) commit_group(st, group, rest);
      // What arrived during that group comes after this write.
      serve_blocking(st, w);
    }
    batch.clear();
    if (!group.empty()) commit_group(st, group, rest);
    batch.swap(rest);
  }
}

/// Drains the queue until it stays empty for `linger`, then lets the writer sleep.
void drain_queue(StoreWriterState& st) {
  auto& q = *st.cfg->queue;
  for (;;) {
    auto batch = q.take();
    if (!batch.empty()) {
      serve_batch(st, std::move(batch));
      continue;
    }
    // Lingering pays while callers come back within it; after a run of misses the writer
    // sleeps at once, lingering again now and then to notice when it pays again.
    if (st.linger_credit > 0 || ++st.linger_probe % 16 == 0) {
      auto until = std::chrono::steady_clock::now() + st.cfg->linger;
      while (!q.maybe_nonempty() && std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      bool caught = q.maybe_nonempty();
      st.linger_credit =
          caught ? std::min(st.linger_credit + 1, 16) : std::max(st.linger_credit - 4, 0);
      if (caught) continue;
    }
    batch = q.take_or_idle();
    if (batch.empty()) return;
    serve_batch(st, std::move(batch));
  }
}

/// The write a message holds, as a WriteOp.
std::optional<WriteOp> write_of(const caf::message& m) {
  std::optional<WriteOp> op;
  auto take = [&](auto tag) {
    using T = decltype(tag);
    if (!op && m.match_elements<T>()) op = m.get_as<T>(0);
  };
  take(create_request{});
  take(update_request{});
  take(create_or_update_request{});
  take(get_or_create_request{});
  take(remove_request{});
  take(remove_by_slug_request{});
  take(update_status_request{});
  take(set_condition_request{});
  take(remove_condition_request{});
  take(remove_finalizer_request{});
  take(add_dependency_request{});
  take(remove_dependency_request{});
  take(record_event_request{});
  return op;
}

/// The reply message of one write, as its request's interface names it.
caf::message reply_of(const WriteOp& op, WriteReply&& r) {
  if (std::holds_alternative<get_or_create_request>(op))
    return caf::make_message(get_or_create_reply{std::move(r.row), r.flag});
  if (std::holds_alternative<remove_by_slug_request>(op) ||
      std::holds_alternative<add_dependency_request>(op) ||
      std::holds_alternative<remove_dependency_request>(op))
    return caf::make_message(r.flag);
  if (std::holds_alternative<record_event_request>(op))
    return caf::make_message(std::move(r.event));
  return caf::make_message(std::move(r.row));
}

/// All the writes in one transaction, or none.
std::vector<caf::message> execute_all(StoreWriterState& st, const transaction_request& t) {
  std::vector<WriteOp> ops;
  for (std::size_t i = 0; i < t.writes.size(); ++i) {
    auto op = write_of(t.writes[i]);
    if (!op)
      throw Error(errc::invalid_argument,
                  "write " + std::to_string(i) + " of the transaction is not a write request");
    ops.push_back(std::move(*op));
  }
  auto& w = *st.cfg->writer;
  commit_record rec;
  std::vector<caf::message> replies;
  auto since = began(st);
  w.begin();
  try {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      try {
        check_request(ops[i]);
        replies.push_back(reply_of(ops[i], apply(st, ops[i], {}, rec)));
      } catch (const Error& e) {
        throw Error(e.value(), "write " + std::to_string(i) + ": " + e.message());
      }
    }
    w.commit();
  } catch (...) {
    w.rollback();
    throw;
  }
  committed(st, since);
  publish(st, rec);
  return replies;
}

/// Answers an actor's request with `work`'s result or error: now, or after the open
/// session ends (a read then sees the session's outcome, not its uncommitted writes).
template <class Reply, class Work>
caf::typed_response_promise<Reply> answer(Self self, Work work) {
  auto& st = self->state;
  auto rp = self->template make_response_promise<Reply>();
  auto job = [work = std::move(work), rp]() mutable {
    try {
      rp.deliver(work());
    } catch (const Error& e) {
      rp.deliver(make_error(e.value(), e.message()));
    } catch (const std::exception& e) {
      rp.deliver(make_error(errc::store, e.what()));
    }
  };
  if (st.session)
    st.deferred.push_back(std::move(job));
  else
    job();
  return rp;
}

/// A write from an actor.
template <class Reply, class Request>
caf::typed_response_promise<Reply> serve(Self self, const Request& r, Reply (*pick)(WriteReply&&)) {
  return answer<Reply>(self, [&st = self->state, r, pick] {
    WriteOp op{r};
    check_request(op);  // an actor's request has not passed the facade's checks
    return pick(execute(st, op, {}));
  });
}

/// A read from an actor, on the writer's connection.
template <class Reply, class Request, class Fn>
caf::typed_response_promise<Reply> serve_read(Self self, const Request& r, Fn fn) {
  return answer<Reply>(self, [&st = self->state, r, fn] { return fn(*st.cfg->writer, r); });
}

ObjectRow require_kind(std::optional<ObjectRow> row, const GroupKind& gk, const std::string& what) {
  if (!row || row->meta.group != gk.group || row->meta.kind != gk.kind)
    throw Error(errc::not_found, "no " + to_string(gk) + " " + what);
  return std::move(*row);
}

ObjectRow pick_row(WriteReply&& r) { return std::move(r.row); }
bool pick_flag(WriteReply&& r) { return r.flag; }
int pick_count(WriteReply&& r) { return r.count; }
Event pick_event(WriteReply&& r) { return std::move(r.event); }
get_or_create_reply pick_goc(WriteReply&& r) { return {std::move(r.row), r.flag}; }

}  // namespace

store_writer_impl::behavior_type store_writer(Self self, std::shared_ptr<StoreWriterConfig> cfg) {
  auto& st = self->state;
  st.subscribers = std::move(cfg->subscribers);
  st.hub = std::move(cfg->hub);
  st.cfg = std::move(cfg);
  if (st.cfg->foreign_poll.count() > 0) {
    try {
      st.data_version = st.cfg->writer->data_version();
      st.cfg->writer->changed_since(std::numeric_limits<std::int64_t>::max(), st.seen_rv);
    } catch (const std::exception&) {  // the first poll publishes from the start then
    }
    self->delayed_send(self, st.cfg->foreign_poll, poll_foreign_atom::value);
  }
  return {
      [self](const create_request& r) { return serve(self, r, pick_row); },
      [self](const update_request& r) { return serve(self, r, pick_row); },
      [self](const create_or_update_request& r) { return serve(self, r, pick_row); },
      [self](const get_or_create_request& r) { return serve(self, r, pick_goc); },
      [self](const remove_request& r) { return serve(self, r, pick_row); },
      [self](const remove_by_slug_request& r) { return serve(self, r, pick_flag); },
      [self](const update_status_request& r) { return serve(self, r, pick_row); },
      [self](const set_condition_request& r) { return serve(self, r, pick_row); },
      [self](const remove_condition_request& r) { return serve(self, r, pick_row); },
      [self](const remove_finalizer_request& r) { return serve(self, r, pick_row); },
      [self](const add_dependency_request& r) { return serve(self, r, pick_flag); },
      [self](const remove_dependency_request& r) { return serve(self, r, pick_flag); },
      [self](const record_event_request& r) { return serve(self, r, pick_event); },
      [self](const collect_request& r) { return serve(self, r, pick_count); },
      [self](const trim_events_request& r) { return serve(self, r, pick_count); },
      [self](const transaction_request& t) {
        return answer<std::vector<caf::message>>(
            self, [&st = self->state, t] { return execute_all(st, t); });
      },
      [self](const get_request& r) {
        return serve_read<ObjectRow>(self, r, [](store::Writer& w, const get_request& r) {
          return require_kind(w.get(r.id, r.loads), r.gk, "with id " + std::to_string(r.id));
        });
      },
      [self](const get_by_slug_request& r) {
        return serve_read<ObjectRow>(self, r, [](store::Writer& w, const get_by_slug_request& r) {
          check_request(r);
          return require_kind(w.get_by_slug(r.gk, r.slug, r.loads), r.gk,
                              "with slug \"" + r.slug + "\"");
        });
      },
      [self](const list_request& r) {
        return serve_read<std::vector<ObjectRow>>(
            self, r, [](store::Writer& w, const list_request& r) {
              return r.owner ? w.list_owned_objects(r.gk, *r.owner, r.loads)
                             : w.list(r.gk, r.loads);
            });
      },
      [self](const relation_request& r) {
        return serve_read<std::vector<Ref>>(self, r,
                                            [](store::Writer& w, const relation_request& r) {
                                              return w.related(r.id, r.relation);
                                            });
      },
      [self](const has_incoming_refs_request& r) {
        return serve_read<bool>(self, r, [](store::Writer& w, const has_incoming_refs_request& r) {
          return w.has_incoming_refs(r.id);
        });
      },
      [self](const list_events_request& r) {
        return serve_read<std::vector<Event>>(
            self, r, [](store::Writer& w, const list_events_request& r) {
              check_request(r);
              return w.list_events(r.id, {r.category, r.type, r.reason, r.limit, r.since});
            });
      },
      [self](inspect_atom) {
        auto& s = self->state;
        return store_writer_state{s.transactions, s.session, s.deferred.size(),
                                  s.subscribers.size() + (s.hub ? 1 : 0)};
      },
      [&st](subscribe_atom, const caf::actor& a) {
        st.subscribers.push_back({a, {}});
      },
      [&st](subscribe_atom, const caf::actor& a, const RecordFilter& wants) {
        st.subscribers.push_back({a, wants});
      },
      [&st](unsubscribe_atom, const caf::actor& a) {
        std::erase_if(st.subscribers, [&](const Subscriber& s) { return s.actor == a; });
      },
      [&st](hub_atom, const caf::actor& hub) {
        st.hub = hub;
      },
      [&st](drain_queue_atom) {
        drain_queue(st);
      },
      [self](poll_foreign_atom) {
        auto& st = self->state;
        {
          try {
            poll_foreign(st);
          } catch (const std::exception&) {  // a failed read: the next poll tries again
          }
        }
        self->delayed_send(self, st.cfg->foreign_poll, poll_foreign_atom::value);
      },
      [&st](abort_session_atom) {
        if (!st.session) return;
        st.aborted_session = st.session;
        st.cfg->writer->rollback();
        end_session(st);  // serves what waited for the block: the shutdown above all
      },
      [self](shutdown_atom) {
        // After the last commit: subscribers learn that nothing more will come.
        auto quit = [self] {
          // Serve what callers queued before the shutdown; refuse the rest.
          serve_batch(self->state, self->state.cfg->queue->close());
          for (auto& s : self->state.subscribers) caf::anon_send(s.actor, shutdown_atom::value);
          if (self->state.hub) caf::anon_send(self->state.hub, shutdown_atom::value);
          self->quit();
        };
        if (self->state.session)
          self->state.deferred.push_back(quit);
        else
          quit();
      },
  };
}

}  // namespace beehive::detail
