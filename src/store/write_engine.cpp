// The write engine (see write_engine.hpp): transactions, sessions, savepoints and group
// commit over the backend's write connection. Run only by the store_writer actor's
// thread; no locks, no CAF.

#include "store/write_engine.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <beehive/detail/codec.hpp>
#include <beehive/detail/saturate.hpp>

#include "metrics/store_metrics.hpp"
#include "store/age_cutoff.hpp"
#include "store/change_order.hpp"
#include "store/commit_note.hpp"
#include "store/request_checks.hpp"
#include "store/write_ops.hpp"

namespace beehive::store {

void put_reply(WriteReply& out, ObjectRow&& row) { out.row = std::move(row); }
void put_reply(WriteReply& out, get_or_create_reply&& r) {
  out.row = std::move(r.row);
  out.flag = r.created;
}
void put_reply(WriteReply& out, bool flag) { out.flag = flag; }
void put_reply(WriteReply& out, int count) { out.count = count; }
void put_reply(WriteReply& out, Event&& event) { out.event = std::move(event); }

namespace {

/// Session numbers are unique in the process, not per engine: a block opened on a
/// writer that then crashed must not find its number on the restarted writer's new
/// session and join (and commit) another caller's block.
std::uint64_t next_session_number() {
  static std::atomic<std::uint64_t> last{0};
  return ++last;
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
  LockWait(Writer& w, std::function<bool()> keep_waiting) : w_(w) {
    w_.set_lock_wait(std::move(keep_waiting));
  }
  ~LockWait() { w_.set_lock_wait({}); }
  LockWait(const LockWait&) = delete;
  LockWait& operator=(const LockWait&) = delete;

 private:
  Writer& w_;
};

/// A create without an owner fails, when it does, at its INSERT (its slug is looked up
/// before, or left to the unique constraint in a batched group; its spec was decoded by
/// its caller), and SQLite undoes a failing statement by itself: in a group it first runs
/// without a savepoint of its own, whose copies of the pages it touches are a sizeable
/// part of its cost. Its labels and change-log entry are statements of their own, so a
/// store failure runs the group again with savepoints (see run_group).
bool mostly_one_statement(const WriteOp& op) {
  auto* c = std::get_if<create_request>(&op);
  return c && !c->owner;
}

/// The object a write reads first, when it names one: the backend may read it along
/// with the transaction's BEGIN (Writer::prefetch).
std::optional<ObjectID> first_read(const WriteOp& op) {
  return std::visit(
      [](const auto& r) -> std::optional<ObjectID> {
        if constexpr (requires { r.id; }) return r.id;
        return std::nullopt;
      },
      op);
}

}  // namespace

WriteEngine::WriteEngine(WriteEngineConfig cfg) : cfg_(std::move(cfg)) {
  if (!cfg_.cursor) cfg_.cursor = std::make_shared<ForeignCursor>();
  cursor_ = cfg_.cursor.get();
  if (!cfg_.watch_foreign_commits) return;
  try {
    data_version_ = cfg_.writer->data_version();
    if (cursor_->set) {
      // A writer before this one stood here (and crashed): what other processes committed
      // since is read at the first look, whatever data_version says.
      cursor_->unpublished_commit = true;
      return;
    }
    cursor_->seen_rv =
        cfg_.writer->changes_since(std::numeric_limits<std::int64_t>::max(), {}, {}).head;
    cursor_->runs_seen = cursor_->known_rv = cursor_->seen_rv;
    cursor_->set = true;
  } catch (const std::exception&) {  // the first look publishes from the start then
  }
}

WriteEngine::SteadyTime WriteEngine::began() const {
  return cfg_.metrics ? std::chrono::steady_clock::now() : SteadyTime{};
}

void WriteEngine::committed(SteadyTime since, std::size_t requests) {
  if (auto* m = cfg_.metrics.get())
    detail::report_commit(*m, std::chrono::steady_clock::now() - since, requests);
}

void WriteEngine::publish(const commit_record& rec, bool own) {
  if (own) ++transactions_;
  if (rec.empty()) return;
  if (own && cfg_.watch_foreign_commits) {
    auto lowest = std::numeric_limits<std::int64_t>::max(), highest = std::int64_t{0};
    auto note = [&](std::int64_t rv) {
      cursor_->own_rvs.push_back(rv);
      lowest = std::min(lowest, rv);
      highest = std::max(highest, rv);
    };
    for (auto& c : rec.changes) note(c.row.meta.resource_version);
    for (auto& e : rec.events) note(e.resource_version);
    for (auto rv : rec.logged_versions) note(rv);
    // Versions below this commit's that this engine has not published were taken by
    // another process (or by a write rolled back to its savepoint): its commit, too
    // recent to have been read yet, goes out first. Otherwise a watcher would take this
    // commit's version for its position while an earlier change had still to come, and a
    // resume from there would skip it. (A gap, not data_version: no statement per commit.)
    bool gap = lowest != std::numeric_limits<std::int64_t>::max() && lowest > cursor_->known_rv + 1;
    cursor_->known_rv = std::max(cursor_->known_rv, highest);
    if (gap || cursor_->unpublished_commit) {
      bool published = false;
      try {
        publish_foreign_commits(&rec, &published);
      } catch (const std::exception&) {
        // The write committed, above a commit that could not be read. Published now, it
        // would reach watches before that one (and move their positions past it): it
        // goes out with it instead, from the log, at the next look that succeeds. (No
        // note may be published over the gap meanwhile.)
        cursor_->unpublished_commit = true;
        std::unordered_set<std::int64_t> mine;
        for (auto& c : rec.changes) mine.insert(c.row.meta.resource_version);
        for (auto& e : rec.events) mine.insert(e.resource_version);
        for (auto rv : rec.logged_versions) mine.insert(rv);
        std::erase_if(cursor_->own_rvs, [&](std::int64_t rv) { return mine.count(rv) > 0; });
        return;
      }
      if (published) return;
    }
  }
  if (cfg_.publish) cfg_.publish(rec);
}

std::int64_t WriteEngine::trim_limit() const {
  return cfg_.watch_foreign_commits ? cursor_->seen_rv : std::numeric_limits<std::int64_t>::max();
}

void WriteEngine::publish_foreign_commits(const commit_record* own, bool* own_published) {
  auto& w = *cfg_.writer;
  if (session_) {  // its transaction would hide them: once it ends (catch_up_after_session)
    foreign_pending_ = true;
    return;
  }
  std::int64_t own_max = 0;
  for (auto rv : cursor_->own_rvs) own_max = std::max(own_max, rv);
  auto dv = w.data_version();
  if (dv == data_version_ && !cursor_->unpublished_commit) {
    // Nobody else committed, and every commit of this engine's was published. (Event
    // runs a failed read left unread keep their own cursor back.)
    if (cursor_->runs_seen >= cursor_->seen_rv)
      cursor_->runs_seen = std::max(cursor_->seen_rv, own_max);
    cursor_->seen_rv = std::max(cursor_->seen_rv, own_max);
    cursor_->own_rvs.clear();
    return;
  }
  // Through the change log: what changed, removals with their final bodies, and the
  // requeues asked for by tools (beehive-ctl requeue), each object once. (A read that
  // fails leaves data_version_ as it was: the next look reads again.)
  std::sort(cursor_->own_rvs.begin(), cursor_->own_rvs.end());
  auto log = w.changes_since(cursor_->seen_rv, {}, {}, cursor_->own_rvs);
  // Trimmed past what was published: the others' notes may still carry what it lost.
  auto from = cursor_->seen_rv;
  std::vector<commit_record> carried;
  if (log.horizon > from) {
    from = fill_from_notes(log.horizon, carried);
    if (from > cursor_->seen_rv) log = w.changes_since(from, {}, {}, cursor_->own_rvs);
  }
  // Event runs are not logged: the ones other processes wrote since they were last read.
  // Read before anything moves (a failed read leaves all of it for the next look), and
  // published in the same record, in version order with this engine's own.
  auto runs = w.event_runs_between(cursor_->runs_seen, log.head);
  std::erase_if(runs, [&](const event_run& run) {
    return std::binary_search(cursor_->own_rvs.begin(), cursor_->own_rvs.end(),
                              run.resource_version);
  });
  commit_record rec;
  rec.events = std::move(runs);
  if (log.horizon > from) rec.lost_through = log.horizon;
  // Everything up to the head is in this record: watches' positions move to it, past
  // commits that only wrote the log too (folded into an object's entry, or alone).
  if (log.head > from) rec.logged_versions.push_back(log.head);
  for (auto& c : log.changes) {
    if (c.parts & kLoggedRequeue) rec.requeues.push_back(c.ref);
    if (c.parts & kLoggedBackoffReset) rec.backoff_resets.push_back(c.ref);
    if (c.parts & kLoggedRelease) {
      rec.wakes.push_back(c.ref);
      rec.edges_removed = true;
    }
    if (c.parts & kLoggedWake) rec.wakes.push_back(c.ref);
    if (!c.row) continue;
    object_change change{c.type, std::move(*c.row), c.parts & kObjectParts};
    if (c.first_version < c.resource_version) change.first_version = c.first_version;
    // Controllers that own the row's kind wake on it (with_owns), as on this process's.
    if (c.owner_read)
      change.owner = std::move(c.owner);
    else if (auto owner = w.related(c.ref.id, LoadOption::owner); !owner.empty())
      change.owner = owner.front();
    if (c.type == ChangeType::Deleted) rec.edges_removed = true;
    // Dependents wake on their targets' conditions and deletion requests, whichever
    // process made them (a deletion's wakes lift a terminal mark, as in WriteOps).
    if (c.type != ChangeType::Deleted &&
        (c.parts & (object_change::conditions | object_change::deletion)))
      for (auto& dependent : w.related(c.ref.id, LoadOption::dependents))
        (c.parts & object_change::deletion ? rec.requeues : rec.wakes)
            .push_back(std::move(dependent));
    rec.changes.push_back(std::move(change));
  }
  if (!carried.empty()) {  // below everything read from the log
    commit_record all;
    for (auto& r : carried) all.append(std::move(r));
    all.append(std::move(rec));
    rec = std::move(all);
  }
  cursor_->own_rvs.clear();
  data_version_ = dv;
  cursor_->seen_rv = std::max({from, log.head, own_max});
  cursor_->known_rv = std::max(cursor_->known_rv, cursor_->seen_rv);
  cursor_->unpublished_commit = false;
  if (own) {
    // One record with this engine's commit: a watcher's position never passes a change
    // of either still to be delivered (the log's entries are folded per object, some may
    // be newer than the commit).
    rec.append(commit_record(*own));
    std::stable_sort(rec.events.begin(), rec.events.end(),
                     [](auto& a, auto& b) { return a.resource_version < b.resource_version; });
    *own_published = true;
  }
  order_for_watches(rec.changes);  // the log reads them in latest-version order
  cursor_->runs_seen = log.head;
  publish(rec, false);
}

std::int64_t WriteEngine::fill_from_notes(std::int64_t horizon,
                                          std::vector<commit_record>& carried) {
  auto& c = *cursor_;
  // Every note sent before the log was read is queued once this returns.
  for (auto& text : cfg_.writer->commit_notes(true)) notes_.push_back(std::move(text));
  std::vector<CommitNote> read(notes_.size());
  std::unordered_map<std::int64_t, std::size_t> by_after;
  for (std::size_t i = 0; i < notes_.size(); ++i) {
    if (notes_[i].empty()) continue;
    read[i] = read_commit_note(notes_[i]);
    if (read[i].after >= 0 && read[i].record) by_after.emplace(read[i].after, i);
  }
  // From the last version published to the horizon, each version is this engine's own
  // or taken by a commit whose note carries it.
  auto at = c.seen_rv;
  std::vector<std::size_t> used;
  for (;;) {
    while (std::binary_search(c.own_rvs.begin(), c.own_rvs.end(), at + 1)) ++at;
    if (at >= horizon) break;
    auto it = by_after.find(at);
    if (it == by_after.end()) return c.seen_rv;  // lost indeed
    used.push_back(it->second);
    at = read[it->second].through;
  }
  // (The notes stay queued: once this is published, they are known to be.)
  for (auto i : used) carried.push_back(std::move(*read[i].record));
  return at;
}

void WriteEngine::publish_noted_commits() {
  if (!cfg_.watch_foreign_commits) return;
  for (auto& text : cfg_.writer->commit_notes(false)) notes_.push_back(std::move(text));
  while (!notes_.empty()) {
    auto text = std::move(notes_.front());
    notes_.pop_front();
    try {
      publish_note(text);
    } catch (...) {  // published by the next look that succeeds
      notes_.push_front(std::move(text));
      throw;
    }
  }
}

void WriteEngine::publish_note(const std::string& text) {
  if (text.empty()) return publish_foreign_commits();  // some may be missing
  auto note = read_commit_note(text);
  auto& c = *cursor_;
  bool known = note.after >= 0 && !c.unpublished_commit;
  if (known && note.through <= c.known_rv) return;  // a look at the log published it
  // The record follows what was published; event runs have no unread ones before them.
  if (known && note.record && note.after == c.known_rv && c.runs_seen == c.seen_rv) {
    // Every version up to known_rv was published, own ones included: none is left to
    // skip in the log.
    c.seen_rv = c.known_rv = c.runs_seen = note.through;
    c.own_rvs.clear();
    // The commit's versions end at `through`, whatever it changed (a requeue alone):
    // watches' positions move past it.
    note.record->logged_versions.push_back(note.through);
    publish(*note.record, false);
    return;
  }
  publish_foreign_commits();  // reads up to this note and past it: the rest are skipped
}

void WriteEngine::undo_savepoint(int sp, const std::string& why) {
  auto& w = *cfg_.writer;
  if (!w.in_transaction()) {
    broken_ = why;
    return;
  }
  try {
    w.rollback_to(sp);
  } catch (const std::exception& e) {
    broken_ = why + " (" + message_of(e) + ")";
  }
}

void WriteEngine::note_session_failure(const std::string& why) {
  if (session_ && broken_.empty() && !cfg_.writer->in_transaction()) broken_ = why;
}

Error WriteEngine::broken_session() const {
  return Error(errc::store, "the transaction was rolled back after a failure: " + broken_);
}

void WriteEngine::timed_commit(const commit_record& rec) {
  auto start = std::chrono::steady_clock::now();
  commit_transaction(rec);
  last_commit_ = std::chrono::steady_clock::now() - start;
}

void WriteEngine::commit_transaction(const commit_record& rec) {
  try {
    cfg_.writer->describe_commit(rec);
    cfg_.writer->commit();
  } catch (const OutcomeUnknown&) {
    cursor_->unpublished_commit = true;
    throw;
  }
}

/// Refuses a write whose spec, status, labels, condition or event is larger than the
/// bounds (nothing of it is written): one place for the blocking and the actor surface.
void WriteEngine::check_size(const WriteOp& op) const {
  auto limit = cfg_.max_object_bytes;
  auto require = [](std::size_t size, std::size_t max, const char* what) {
    if (size > max)
      throw Error(errc::invalid_argument, std::string(what) + " of " + std::to_string(size) +
                                              " bytes is over the limit of " + std::to_string(max));
  };
  std::visit(
      [&](const auto& r) {
        // By field, so that a new request carrying a spec, status or event is bounded too.
        if constexpr (requires { r.spec; }) require(r.spec.size(), limit, "a spec");
        if constexpr (requires { r.status; }) require(r.status.size(), limit, "a status");
        if constexpr (requires { r.finalizers; }) check_finalizers_bytes(r.finalizers);
        if constexpr (requires { r.labels; }) check_labels_bytes(r.labels, limit);
        if constexpr (requires { r.condition; }) {
          require(r.condition.reason.size(), max_reason_bytes, "a condition reason");
          require(r.condition.message.size(), max_event_message_bytes, "a condition message");
        }
        if constexpr (requires { r.event; }) {
          require(r.event.reason.size(), max_reason_bytes, "an event reason");
          require(r.event.message.size(), max_event_message_bytes, "an event message");
          if (!r.event.detail.is_null())
            require(detail::dump_json(r.event.detail).size(), max_event_detail_bytes,
                    "an event detail");
        }
      },
      op);
}

/// Runs one write and its check (a create's before its INSERT); throws, leaving the
/// caller to undo what the write did.
WriteReply WriteEngine::apply(const WriteOp& op, const RowCheck& check, commit_record& rec,
                              const WaitingCaller* caller) {
  check_size(op);
  // The leader's writes (the collector's, the sweeps', a reconcile's) are fenced: they
  // fail unless this process still leads, checked in this transaction.
  if (std::holds_alternative<collect_request>(op) ||
      std::holds_alternative<trim_events_request>(op) ||
      std::holds_alternative<trim_change_log_request>(op) || (caller && caller->leader_work()))
    cfg_.writer->fence(caller ? caller->leader_term() : 0);
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
  auto now = cfg_.clock->now();
  note_time(now);
  WriteOps ops(*cfg_.writer, now, rec, check ? &checked : nullptr);
  if (batching_) ops.leave_slugs_to_the_database();
  ops.limit_change_log_trim(trim_limit());
  ops.correct_clock_steps(clock_steps_);
  if (auto* t = std::get_if<trim_events_request>(&op); t && !session_) {
    if (!sweep_ || !same_policy(sweep_->policy, *t)) {
      sweep_.emplace();
      sweep_->policy = *t;
      sweep_->since = continues(sweep_mark_, *t) ? sweep_mark_.high_water : -1;
    }
    page_ = *sweep_;  // kept only if the page commits
    ops.sweep_in_pages(page_, event_sweep_page_runs.load(std::memory_order_relaxed));
  }
  WriteReply reply;
  std::visit(
      [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, SessionCmd> || std::is_same_v<R, ReadOp>)
          throw Error(errc::store, "a session step or read is not a write");
        else
          put_reply(reply, ops.apply(r));
      },
      op);
  if (check && !ops.checked()) {
    checked(reply.row);
  } else if (!check && cfg_.schema_versions &&
             (std::holds_alternative<update_request>(op) ||
              std::holds_alternative<create_or_update_request>(op) ||
              std::holds_alternative<set_labels_request>(op))) {
    auto current = cfg_.schema_versions(reply.row.meta.group_kind(), 0);
    detail::require_readable_version(reply.row.spec_version, current.spec, true);
    if (reply.row.status)
      detail::require_readable_version(reply.row.status_version, current.status, false);
  }
  return reply;
}

namespace {
/// Steps back smaller than this are not worth a pass over the change log: they keep
/// entries longer by no more than the step.
constexpr auto clock_step_tolerance = std::chrono::seconds(1);
}  // namespace

void WriteEngine::note_time(Time now) {
  auto& w = *cfg_.writer;
  if (!latest_stamp_) {  // a clock that stepped back while no process ran counts too
    auto newest = w.newest_change_log_entry();
    latest_stamp_ = newest ? newest->second : now;
  }
  if (detail::saturating_add(now, clock_step_tolerance) >= *latest_stamp_) {
    latest_stamp_ = std::max(*latest_stamp_, now);
    return;
  }
  latest_stamp_ = now;
  if (auto newest = w.newest_change_log_entry()) note_step({newest->first, now});
}

void WriteEngine::note_step(ClockStep step) {
  constexpr std::size_t most_steps = 16;  // a standby never trims
  if (clock_steps_.size() == most_steps) {
    // Merged, the earlier step's entries go back further than they need: they may be
    // trimmed early, never kept late.
    clock_steps_[1].to = std::min(clock_steps_[0].to, clock_steps_[1].to);
    clock_steps_.erase(clock_steps_.begin());
  }
  clock_steps_.push_back(step);
}

/// A GC pass that would find nothing, or a sweep without a retention policy, takes no
/// write transaction: an idle beehive's passes are two index reads each.
bool WriteEngine::nothing_to_do(const WriteOp& op) {
  auto& w = *cfg_.writer;
  if (auto* c = std::get_if<collect_request>(&op))
    return (!c->cascade || w.cascade_candidates(1).empty()) && w.collectible(1).empty();
  if (auto* t = std::get_if<trim_events_request>(&op)) {
    if (!t->fallback && t->retention.empty()) return true;
    if (sweep_ && same_policy(sweep_->policy, *t)) return false;  // pages left to go
    // No run written since the last sweep, and none old enough to go.
    if (!continues(sweep_mark_, *t) || w.events_high_water() > sweep_mark_.high_water) return false;
    auto latest = latest_age_cutoff(*t, cfg_.clock->now());
    return !latest || w.kinds_with_runs_before(*latest).empty();
  }
  if (auto* t = std::get_if<trim_change_log_request>(&op)) {
    if (t->entries <= 0 && t->max_age.count() <= 0) return true;  // no bound: all is kept
    // What other processes committed and this one has not read yet must not go: read it
    // first, then trim no further than that.
    if (cfg_.watch_foreign_commits) {
      try {
        publish_foreign_commits();
      } catch (const std::exception&) {  // trimmed no further than what was read before
      }
    }
    auto now = cfg_.clock->now();
    std::optional<Time> first_young_at;
    bool cut =
        w.change_log_cut(t->entries, age_cutoff(now, t->max_age), trim_limit(), &first_young_at)
            .has_value();
    // Entries ahead of this clock that its own writes did not explain (another process's
    // clock, or one that stepped back before this engine's first write): they would hold
    // every entry after them until the clock caught up. They count as logged now.
    if (first_young_at && *first_young_at > detail::saturating_add(now, clock_step_tolerance))
      note_step({std::numeric_limits<std::int64_t>::max(), now});
    return !cut && clock_steps_.empty();
  }
  return false;
}

WriteReply WriteEngine::execute(const WriteOp& op, const RowCheck& check, WaitingCaller* caller) {
  auto& w = *cfg_.writer;
  auto not_applied = [] { return Error(errc::cancelled, "the caller stopped waiting"); };
  if (session_) {
    if (!broken_.empty()) throw broken_session();
    if (caller && !caller->claim()) throw not_applied();
    // Inside a session: a savepoint per write, so that a failing one rolls back alone.
    int sp = depth_ + 1;
    commit_record rec;
    w.savepoint(sp);
    try {
      auto reply = apply(op, check, rec, caller);
      w.release(sp);
      session_rec_.append(std::move(rec));
      return reply;
    } catch (const std::exception& e) {
      undo_savepoint(sp, message_of(e));
      throw;
    } catch (...) {
      undo_savepoint(sp, "a write failed");
      throw;
    }
  }
  if (nothing_to_do(op)) return {};
  // A sweep whose page fails, however, starts again from the last finished sweep's mark.
  struct SweepRestart {
    std::optional<store::EventSweep>* sweep;
    ~SweepRestart() {
      if (sweep) sweep->reset();
    }
  } restart{std::holds_alternative<trim_events_request>(op) ? &sweep_ : nullptr};
  commit_record rec;
  auto since = began();
  {
    LockWait wait(w, [caller] { return !caller || !caller->abandoned(); });
    if (auto id = first_read(op)) w.prefetch(*id);
    w.begin();
  }
  // From here on the caller waits for the real outcome (see WaitingCaller::claim).
  if (caller && !caller->claim()) {
    w.rollback();
    throw not_applied();
  }
  WriteReply reply;
  try {
    reply = apply(op, check, rec, caller);
    timed_commit(rec);
  } catch (...) {
    w.rollback();
    throw;
  }
  committed(since);
  if (restart.sweep) {
    restart.sweep = nullptr;
    if (!page_.done) {
      sweep_ = std::move(page_);
    } else {
      sweep_mark_ = EventSweepMark{std::move(page_.policy), page_.high_water.value_or(-1)};
      sweep_.reset();
    }
  }
  if (std::holds_alternative<trim_change_log_request>(op)) clock_steps_.clear();
  publish(rec);
  return reply;
}

void WriteEngine::end_session() {
  session_ = 0;
  depth_ = 0;
  broken_.clear();
  marks_.clear();
  session_rec_ = {};
}

void WriteEngine::abort_session(bool stopped) {
  if (!session_) return;
  if (stopped) aborted_session_ = session_;
  cfg_.writer->rollback_keeping_counters();
  end_session();
  catch_up_after_session();
}

void WriteEngine::catch_up_after_session() {
  // Blocks run back to back (the next one deferred behind this) would otherwise hide
  // other processes' commits from every look for as long as they keep coming.
  if (!std::exchange(foreign_pending_, false)) return;
  try {
    publish_noted_commits();
    publish_foreign_commits();
  } catch (const std::exception&) {  // a failed read: the next poll tries again
  }
}

WriteReply WriteEngine::session_step(SessionCmd::Kind kind, const WaitingCaller* caller) {
  auto& w = *cfg_.writer;
  // A broken session has no transaction left: nested blocks only keep their
  // bookkeeping (their writes failed already), and the commit fails.
  bool live = broken_.empty();
  switch (kind) {
    case SessionCmd::begin: {
      session_began_ = began();
      LockWait wait(w, [caller] { return !caller || !caller->abandoned(); });
      w.begin();
      // The block's writes hand their versions and ids to its caller as they go: should
      // it roll back, they are kept from reuse (rollback_keeping_counters).
      try {
        w.session_begun();
      } catch (...) {
        w.rollback();
        throw;
      }
      session_ = next_session_number();
      WriteReply reply;
      reply.session = session_;
      return reply;
    }
    case SessionCmd::savepoint:
      if (live) w.savepoint(depth_ + 1);
      ++depth_;
      marks_.push_back({session_rec_.changes.size(), session_rec_.wakes.size(),
                        session_rec_.requeues.size(), session_rec_.backoff_resets.size(),
                        session_rec_.events.size(), session_rec_.edges_removed});
      break;
    case SessionCmd::release:
      if (live) w.release(depth_);
      --depth_;
      marks_.pop_back();
      break;
    case SessionCmd::rollback_to:
      if (live) undo_savepoint(depth_, "a nested block failed");
      --depth_;
      session_rec_.changes.resize(marks_.back().changes);
      session_rec_.wakes.resize(marks_.back().wakes);
      session_rec_.requeues.resize(marks_.back().requeues);
      session_rec_.backoff_resets.resize(marks_.back().backoff_resets);
      session_rec_.events.resize(marks_.back().events);
      session_rec_.edges_removed = marks_.back().edges_removed;
      marks_.pop_back();
      break;
    case SessionCmd::commit: {
      if (!live) {
        auto err = broken_session();
        w.rollback_keeping_counters();
        end_session();
        throw err;
      }
      auto changes = std::move(session_rec_);
      try {
        commit_transaction(changes);
      } catch (...) {
        w.rollback_keeping_counters();
        end_session();
        throw;
      }
      committed(session_began_);
      // Before the writes deferred behind the session run: their records come after
      // this one, as their versions do. (Ended first: other processes' commits may be
      // read now, see publish.)
      end_session();
      publish(changes);
      catch_up_after_session();
      break;
    }
    case SessionCmd::rollback:
      w.rollback_keeping_counters();
      end_session();
      catch_up_after_session();
      break;
  }
  return {};
}

WriteReply WriteEngine::read(const ReadOp& r) {
  auto& w = *cfg_.writer;
  if (session_ && !broken_.empty()) throw broken_session();
  // Where a failed statement aborts the whole transaction (PostgreSQL), a session's read
  // runs in a savepoint, as its writes do, so that it fails alone (as on SQLite). The
  // savepoint goes with the read's round trip, its release with the next one.
  bool guarded = session_ && w.failed_statements_abort();
  int sp = depth_ + 1;
  if (guarded) w.savepoint(sp);
  WriteReply reply;
  try {
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
      case ReadOp::list_where:
        reply.rows = w.list_where(r.gk, r.where, r.loads);
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
    if (guarded) w.release_later(sp);
  } catch (const std::exception& e) {
    if (guarded)
      undo_savepoint(sp, message_of(e));
    else
      note_session_failure(message_of(e));  // a failed read can take the transaction along
    throw;
  }
  return reply;
}

void WriteEngine::commit_group(std::vector<GroupedWrite>& writes, const MoreWrites& more) {
  // A backend that batches (PostgreSQL) sends the group's statements with its commit, one
  // round trip for all; should the database refuse one of them there, nobody can tell
  // whose it was, so the group runs again with each write's outcome learnt before the
  // next one runs (a round trip each). A write run without a savepoint that fails after
  // its first statement (a full disk, a trigger) may have left part of itself behind:
  // the group runs again too, every write in a savepoint.
  if (!run_group(writes, more, true)) run_group(writes, more, false);
}

bool WriteEngine::run_group(std::vector<GroupedWrite>& writes, const MoreWrites& more, bool batch) {
  auto& w = *cfg_.writer;
  commit_record rec;
  auto since = began();
  const bool first = batch;
  batch = batch && w.defers_statements();
  batching_ = batch;
  struct Batching {
    bool& flag;
    ~Batching() { flag = false; }
  } batching{batching_};
  bool pending = false;  // some applied write's statements may still fail
  struct Redo {};
  auto fail_all = [&writes](const std::exception& e) {
    // No caller is told that its write landed: every write of the group fails.
    for (auto& item : writes) {
      item.reply.reset();
      item.code = errc::store;
      item.what = message_of(e);
    }
  };
  try {
    {
      // Another process's lock is waited for while any caller of the group still waits.
      LockWait wait(w, [&writes] {
        return std::any_of(writes.begin(), writes.end(), [](const GroupedWrite& g) {
          return !g.caller || !g.caller->abandoned();
        });
      });
      if (!writes.empty()) {
        if (auto id = first_read(*writes.front().op)) w.prefetch(*id);
      }
      w.begin();
    }
    for (std::size_t i = 0;; ++i) {
      if (i == writes.size()) {
        if (more) more(writes);
        if (i == writes.size()) break;
      }
      auto& item = writes[i];
      item.reply.reset();
      if (item.turn == GroupedWrite::waiting) {
        bool mine = !item.caller || item.caller->claim();
        item.turn = mine ? GroupedWrite::claimed : GroupedWrite::gave_up;
      }
      if (item.turn == GroupedWrite::gave_up) {  // gave up before its turn: not applied
        item.code = errc::cancelled;
        item.what = "the caller stopped waiting";
        continue;
      }
      static const RowCheck no_check;
      commit_record one;
      // A write whose first statement fails undoes itself, unless the database aborts
      // the whole transaction on any failed statement (PostgreSQL): then only a batched
      // attempt may leave it out, since a refusal there runs the group again anyway. A
      // failure after its first statement runs the group again as well (below).
      bool savepoint =
          !first || !mostly_one_statement(*item.op) || (w.failed_statements_abort() && !batch);
      if (savepoint) w.savepoint(1);
      auto undo = [&](errc code, std::string what) {
        item.reply.reset();
        // The transaction is gone (the connection was lost, or the database rolled it
        // back by itself: an I/O error, a full disk), and nothing of it committed. A
        // batched attempt runs again; otherwise the group fails as one, below, rather
        // than the writes after this one committing on their own.
        if (!w.in_transaction()) {
          if (batch) throw Redo{};
          return false;
        }
        // A refused statement may be an earlier write's, sent in the same round trip.
        if (pending && w.transaction_failed()) throw Redo{};
        // Without a savepoint, what the write did before it failed is unknown: a store
        // failure may have come after its row was inserted (its labels, its log entry).
        if (!savepoint && code == errc::store) throw Redo{};
        if (savepoint) w.rollback_to(1);
        item.code = code;
        item.what = std::move(what);
        return true;
      };
      try {
        item.reply = apply(*item.op, item.check ? *item.check : no_check, one, item.caller);
        if (savepoint && batch)
          w.release_later(1);
        else if (savepoint)
          w.release(1);
        pending = batch;
        rec.append(std::move(one));
      } catch (const Error& e) {
        if (!undo(e.value(), e.message())) throw;
      } catch (const std::exception& e) {
        if (!undo(errc::store, e.what())) throw;
      }
    }
    timed_commit(rec);
  } catch (const Redo&) {
    w.rollback();
    return false;
  } catch (const NotCommitted& e) {
    w.rollback();
    if (pending) return false;
    fail_all(e);
    return true;
  } catch (const std::exception& e) {
    // The transaction itself failed: nothing landed; or its commit's outcome could not
    // be learnt (OutcomeUnknown, which says so), and should it have landed, the change
    // log brings it to the watches (publish_foreign_commits).
    w.rollback();
    fail_all(e);
    return true;
  }
  // The requests this commit answers: not those whose callers gave up before their turn.
  committed(since, static_cast<std::size_t>(std::count_if(
                       writes.begin(), writes.end(),
                       [](const GroupedWrite& g) { return g.turn != GroupedWrite::gave_up; })));
  publish(rec);
  return true;
}

std::vector<WriteReply> WriteEngine::execute_all(const std::vector<WriteOp>& ops) {
  auto& w = *cfg_.writer;
  commit_record rec;
  std::vector<WriteReply> replies;
  auto since = began();
  w.begin();
  try {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      try {
        replies.push_back(apply(ops[i], {}, rec));
      } catch (const Error& e) {
        throw Error(e.value(), "write " + std::to_string(i) + ": " + e.message());
      }
    }
    commit_transaction(rec);
  } catch (...) {
    w.rollback();
    throw;
  }
  committed(since, 1);  // one request, however many writes it holds
  publish(rec);
  return replies;
}

}  // namespace beehive::store
