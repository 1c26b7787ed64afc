// The PostgreSQL writer's transactions. Each one begins by locking the store's counters
// (resource version, object id), which serialises write transactions across every
// process, so that versions become visible in the order they were given out; versions
// and ids are then counted in memory and stored at commit, in the same round trip as
// the write token, the notification to other processes and the COMMIT itself. While
// writes keep coming, that round trip begins the next transaction too (begin_ahead).
//
// Runs on the thread running the writer (owned by the store_writer actor), one call at
// a time; not thread-safe.

#include "store/postgres/pg_writer.hpp"

#include <cctype>
#include <random>
#include <thread>
#include <utility>

#include "store/commit_note.hpp"
#include "store/postgres/pg_faults.hpp"
#include "store/postgres/pg_listener.hpp"
#include "store/postgres/pg_queries.hpp"
#include "store/postgres/pg_schema.hpp"

namespace beehive::store::pg {

namespace {

/// Where a writer's write tokens start: at random, so that a writer made again under the
/// same session (a second beehive on the store, a restarted writer) never counts up to a
/// token an earlier one left, which it would take for its own commit.
std::int64_t first_token() {
  std::random_device rd;
  std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  return static_cast<std::int64_t>(v >> 2);  // room to count up
}

}  // namespace

PgWriter::PgWriter(std::string conninfo, std::string schema, std::chrono::milliseconds timeout,
                   std::int64_t session, std::shared_ptr<SharedState> shared,
                   std::chrono::milliseconds stall_limit)
    : Reading(std::move(conninfo), schema, timeout, session, stall_limit),
      session_(session),
      shared_(std::move(shared)),
      channel_(pg_schema::notify_channel(schema)),
      connect_timeout_(timeout),
      token_(first_token()),
      note_key_(shared_->note_key) {}

void PgWriter::begin() {
  leader_work_ = false;
  note_.clear();
  fenced_term_ = 0;
  if (conn_.lost()) conn_.reconnect();  // a transaction lost with it is over anyway
  owners_.clear();
  prefetched_.reset();
  auto prefetch = std::exchange(prefetch_, std::nullopt);
  ++token_;
  // Locked before begin returns, waiting only while the caller does (set_lock_wait):
  // a caller that gave up meanwhile is never written (the engine claims its write
  // after begin), as on SQLite. The first write's row comes in the same round trip,
  // read under the lock.
  const auto& keep_waiting = keep_waiting_ ? keep_waiting_ : [] { return true; };
  std::vector<Result> r;
  if (std::exchange(begun_ahead_, false)) {
    // Begun with the last commit: its results are in, or on their way.
    try {
      r = conn_.take_after(keep_waiting);
      // Usable when its lock was free (else another process asked first: it waits its
      // turn below), nothing run since (a read that failed) ended it, and the server
      // has not ended its session meanwhile (an operator, its idle timeout).
      if (r.size() != 3 || r[1].rows() != 2 || !conn_.in_transaction() ||
          conn_.transaction_failed() || conn_.hung_up())
        throw Error(errc::store, "postgres: the transaction begun ahead is not usable");
      prefetch.reset();  // read by the first write itself
    } catch (const Error&) {
      r.clear();
      rollback();
      if (conn_.lost()) conn_.reconnect();  // nothing of this write was sent on it
    }
  }
  for (int attempt = 0; r.empty(); ++attempt) {
    std::vector<Statement> s = begin_statements();
    if (prefetch) s.push_back(statement(Q::get_with_owner, Params().add(*prefetch)));
    const auto connects = conn_.connects();
    try {
      r = conn_.pipeline(std::move(s), keep_waiting);
    } catch (...) {
      rollback();  // the BEGIN went through: an aborted transaction would refuse what follows
      // The server ended the idle session as the BEGIN went (an idle_session_timeout,
      // pg_terminate_backend; its goodbye not read yet): nothing of the write was sent,
      // so once more on a new session rather than fail the write for it. Not when the
      // pipeline made its session itself (a server out of reach: the wait would double).
      if (attempt > 0 || !conn_.lost() || conn_.connects() != connects || !keep_waiting()) throw;
      conn_.reconnect();
    }
  }
  if (auto version = r[2].i64(0, 0); version > pg_schema::latest_version()) {
    // A newer build migrated the schema while this process ran: what this one would
    // write may no longer be what the schema means.
    rollback();
    throw Error(errc::store, "postgres: the database schema was migrated to version " +
                                 std::to_string(version) + " by a newer build (this build's is " +
                                 std::to_string(pg_schema::latest_version()) +
                                 "): this process can no longer write; upgrade it");
  }
  for (int i = 0; i < r[1].rows(); ++i) {
    if (r[1].text(i, 0) == "resource_version")
      rv_ = r[1].i64(i, 1);
    else
      last_id_ = r[1].i64(i, 1);
  }
  // The counters moved since this writer last knew them: another process committed,
  // maybe too recently for its notification to have arrived. Counted now, so that this
  // transaction's versions are never taken for all there is up to them.
  if (rv_ != known_rv_) ++counted_commits_;
  known_rv_ = rv_;
  locked_id_ = last_id_;
  // Never below what this writer handed out before (rollback_keeping_counters stores
  // them; when it could not, this commit does).
  rv_ = std::max(rv_, rv_floor_);
  last_id_ = std::max(last_id_, id_floor_);
  if (prefetch) prefetched_ = Prefetched{*prefetch, row_with_owner(*prefetch, r[3])};
}

std::vector<Statement> PgWriter::begin_statements() {
  std::vector<Statement> s;
  s.push_back({"bh_begin", "BEGIN", {}});
  s.push_back(statement(Q::lock_counters));
  s.push_back(statement(Q::schema_version));
  return s;
}

void PgWriter::idle() {
  begin_ahead_ = false;
  if (begun_ahead_) rollback();
}

std::optional<ObjectRow> PgWriter::row_with_owner(ObjectID id, const Result& r) {
  owners_[id] = std::nullopt;
  if (r.rows() == 0) return std::nullopt;
  if (!r.null(0, 0)) owners_[id] = Ref{r.i64(0, 0), r.str(0, 1), r.str(0, 2)};
  return read_object_row(r, 0, session_, 3);
}

std::optional<ObjectRow> PgWriter::get(ObjectID id, unsigned loads) {
  if (loads) return Reading::get(id, loads);
  if (prefetched_ && prefetched_->id == id) {
    auto row = std::move(prefetched_->row);
    prefetched_.reset();
    return row;
  }
  return row_with_owner(id, run(conn_, Q::get_with_owner, Params().add(id)));
}

std::vector<Ref> PgWriter::related(ObjectID id, unsigned relation) {
  if (relation == LoadOption::owner) {
    if (auto it = owners_.find(id); it != owners_.end()) {
      if (!it->second) return {};
      return {*it->second};
    }
  }
  return Reading::related(id, relation);
}

void PgWriter::describe_commit(const commit_record& rec) {
  note_ = write_commit_note(session_, known_rv_, rv_, &rec, note_key_);
}

void PgWriter::commit() {
  // known_rv_ is still the version begin() locked. The server sends the note without its
  // record when it cannot take the whole (Q::close_transaction).
  auto bare = write_commit_note(session_, known_rv_, rv_, nullptr, NoteKey());
  auto note = note_.empty() ? bare : std::exchange(note_, {});
  std::vector<Statement> s;
  Params p;
  p.add(rv_).add(last_id_).add(session_).add(token_).add(channel_).add(note).add(bare);
  s.push_back(statement(Q::close_transaction, std::move(p)));
  s.push_back({"bh_commit", "COMMIT", {}});
  // The next transaction begins in the same round trip, its results read by begin().
  // It takes the store's lock only if that is free, so that it never waits: a process
  // that asked for it meanwhile has it first, and what runs on this connection before
  // the next begin (the reads publish makes, a rollback when idle) is not held up.
  if (std::exchange(begin_ahead_, false)) {
    std::vector<Statement> ahead;
    ahead.push_back({"bh_begin", "BEGIN", {}});
    ahead.push_back(statement(Q::try_lock_counters));
    ahead.push_back(statement(Q::schema_version));
    conn_.send_after(std::move(ahead));
  }
  if (faults::take(faults::drop_before_commit)) conn_.drop();
  if (auto ms = faults::cut_commit_after_ms.exchange(0); ms > 0) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    conn_.set_keep_waiting([until] { return std::chrono::steady_clock::now() < until; });
  }
  try {
    conn_.pipeline(std::move(s));
    begun_ahead_ = conn_.in_transaction();
    if (begun_ahead_ && faults::take(faults::drop_after_begin_ahead)) conn_.drop();
    conn_.set_keep_waiting({});
    if (faults::take(faults::drop_after_commit)) {
      conn_.drop();
      throw Error(errc::store, "postgres: connection lost (injected after the commit)");
    }
  } catch (const Error& e) {
    conn_.set_keep_waiting({});
    if (!conn_.lost()) {  // the database refused it: nothing committed
      rollback();
      throw NotCommitted(e.value(), e.message());
    }
    resolve_lost_commit(e);
  }
  known_rv_ = rv_;
}

void PgWriter::resolve_lost_commit(const Error& why) {
  // The COMMIT may have reached the server before the connection went. The token this
  // transaction wrote is in the database exactly when it committed: keep reconnecting
  // (each attempt bounded by the connect timeout) until it can be read, for at most
  // six connect timeouts.
  //
  // Until the transaction is over on the server, the token read is the one before it: a
  // COMMIT still being flushed or waiting for a synchronous replica has not happened
  // yet, and may yet. Its server process holds the counters until then, so the read
  // waits for them (a transaction whose COMMIT never arrived is ended by the server's
  // idle_in_transaction_session_timeout; a wait longer than lock_timeout is retried).
  auto deadline = std::chrono::steady_clock::now() + 6 * connect_timeout_;
  std::string last = why.what();
  for (;;) {
    std::optional<bool> committed;
    try {
      conn_.reconnect();
      std::vector<Statement> s;
      s.push_back({"bh_begin", "BEGIN", {}});
      s.push_back(statement(Q::lock_counters));  // in turn with the other processes
      s.push_back(statement(Q::read_token, Params().add(session_)));
      s.push_back({"bh_rollback", "ROLLBACK", {}});
      auto r = conn_.pipeline(std::move(s));
      committed = r[2].rows() && r[2].i64(0, 0) == token_;
    } catch (const Error& e) {
      last = e.what();
      rollback();
    }
    if (committed && *committed) return;
    if (committed)
      throw NotCommitted(
          errc::store,
          std::string("postgres: the connection was lost before the commit: ") + why.what());
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw OutcomeUnknown(
      errc::store,
      "postgres: the outcome of this write is unknown: the connection was lost after "
      "its COMMIT was sent, and the database could not be reached to read it back "
      "within six connect timeouts; read the object to learn whether it was written (" +
          last + ")");
}

void PgWriter::session_begun() { savepoint(0); }  // sent with the block's first statement

void PgWriter::rollback_keeping_counters() {
  bool handed_out = rv_ != known_rv_ || last_id_ != locked_id_;
  if (handed_out && !conn_.lost() && conn_.in_transaction()) {
    // In the block's own transaction, still holding the counters: no other process can
    // take them in between.
    try {
      rollback_to(0);
      commit_counters();
      return;
    } catch (const Error&) {
    }
  }
  rollback();
  // Past saving (a failed commit): raised in a transaction of their own, through the
  // counters' queue (lock_counters, in key order: no deadlock with other writers). A
  // process queued for them may have taken them first; on a lost connection, this
  // writer's next commit stores them (it counts from rv_floor_ and id_floor_).
  if (!handed_out || conn_.lost()) return;
  try {
    auto s = begin_statements();
    s.push_back(statement(Q::raise_counters, Params().add(rv_floor_).add(id_floor_)));
    s.push_back({"bh_commit", "COMMIT", {}});
    conn_.pipeline(std::move(s));
  } catch (const Error&) {
    rollback();
  }
}

void PgWriter::commit_counters() {
  // Nothing else changed: a bare note. A COMMIT lost with its connection is not read
  // back (rollback_keeping_counters falls back), so no wait of connect timeouts here.
  auto bare = write_commit_note(session_, known_rv_, rv_, nullptr, NoteKey());
  Params p;
  p.add(rv_).add(last_id_).add(session_).add(token_).add(channel_).add(bare).add(bare);
  std::vector<Statement> s;
  s.push_back(statement(Q::close_transaction, std::move(p)));
  s.push_back({"bh_commit", "COMMIT", {}});
  begin_ahead_ = false;
  conn_.pipeline(std::move(s));
  known_rv_ = rv_;
}

void PgWriter::rollback() {
  conn_.discard();
  owners_.clear();
  prefetched_.reset();
  begin_ahead_ = false;
  if (std::exchange(begun_ahead_, false)) {
    try {
      conn_.take_after();  // whatever it began is rolled back below
    } catch (const Error&) {
    }
  }
  if (conn_.lost() || !conn_.in_transaction()) return;
  try {
    conn_.exec("ROLLBACK");
  } catch (const Error&) {
  }
}

bool PgWriter::in_transaction() { return !conn_.lost() && conn_.in_transaction(); }

std::int64_t PgWriter::data_version() {
  // The listener hears of other processes' commits a little late; begin() sees the
  // counters they moved at once.
  return shared_->foreign_commits.load(std::memory_order_acquire) + counted_commits_;
}

std::vector<std::string> PgWriter::commit_notes(bool all_sent) {
  // As long as the listener takes to judge its connection dead: past it, the notes
  // count as missed.
  if (all_sent) (void)shared_->notes.await_sent(Listener::kStallLimit);
  return shared_->notes.take();
}

void PgWriter::set_lock_wait(std::function<bool()> keep_waiting) {
  // Asked while begin waits for the counters' lock; lock_timeout (the lease) bounds the
  // wait anyway (see Connection).
  keep_waiting_ = std::move(keep_waiting);
}

std::int64_t PgWriter::next_resource_version() { return rv_floor_ = ++rv_; }

ObjectID PgWriter::next_object_id() { return id_floor_ = ++last_id_; }

void PgWriter::fence(std::int64_t began_in) {
  // Fencing: the leader's writes hold the lease row (FOR KEY SHARE) until they commit, so a
  // takeover waits for them, and fail when a takeover committed first.
  auto term = shared_->term.load(std::memory_order_acquire);
  if (began_in != 0 && began_in != term)
    throw Error(errc::store,
                "postgres: the leadership term this reconcile began in has ended: its "
                "writes are refused (the leader of a later term reconciles the object again)");
  if (term != 0 && fenced_term_ == term) return;
  if (term != 0) {
    auto r = run(conn_, Q::lease_check, Params().add(session_).add(term));
    if (r.rows() == 1) {
      fenced_term_ = term;
      return;
    }
    shared_->depose();
  }
  throw Error(errc::store,
              "postgres: this process is not the leader (its lease was taken over): "
              "controller, collector and sweep writes are the leader's");
}

// A write's statements are deferred (Connection::defer) from its savepoint on, and sent
// with its release: one round trip per write of a group. The release is where a
// deferred statement's failure surfaces, still inside the write's savepoint.
void PgWriter::savepoint(int depth) {
  auto d = std::to_string(depth);
  conn_.defer({"bh_savepoint" + d, "SAVEPOINT s" + d, {}});
}

void PgWriter::release(int depth) {
  auto d = std::to_string(depth);
  conn_.run(("bh_release" + d).c_str(), "RELEASE SAVEPOINT s" + d);
}

void PgWriter::release_later(int depth) {
  auto d = std::to_string(depth);
  conn_.defer({"bh_release" + d, "RELEASE SAVEPOINT s" + d, {}});
}

void PgWriter::rollback_to(int depth) {
  fenced_term_ = 0;  // a lease check rolled back with its savepoint holds no lock any more
  owners_.clear();
  auto d = std::to_string(depth);
  // Never sent: dropping it and what followed is rolling back to it.
  if (conn_.discard_from("bh_savepoint" + d)) return;
  conn_.discard();
  // Unnamed: the transaction is aborted until the rollback runs, and the server refuses
  // to prepare anything but a rollback then; a release not yet prepared on this
  // connection would be refused (and the transaction stay aborted). Unnamed statements
  // are parsed as they run, after the rollback.
  std::vector<Statement> s;
  s.push_back({"", "ROLLBACK TO SAVEPOINT s" + d, {}});
  s.push_back({"", "RELEASE SAVEPOINT s" + d, {}});
  conn_.pipeline(std::move(s));
}

void PgWriter::later(Q q, Params p) {
  prefetched_.reset();
  conn_.defer(statement(q, std::move(p)));
  later_at_ = conn_.deferred_total();
}

bool PgWriter::join_last(Q q, const Params& p) {
  Statement* last = conn_.last_deferred();
  if (!last || later_at_ != conn_.deferred_total() || last->sql.starts_with("WITH")) return false;
  // The last statement becomes a data-modifying CTE of `q`, whose parameters follow its
  // own ($1 of `q` is $n+1). The two must not depend on each other's effects: PostgreSQL
  // runs both against the same snapshot, in no set order.
  auto offset = last->params.size();
  auto next = statement(q);
  std::string sql = "WITH joined AS (" + last->sql + ") ";
  for (std::size_t i = 0; i < next.sql.size(); ++i) {
    if (next.sql[i] != '$' || i + 1 == next.sql.size() || !std::isdigit(next.sql[i + 1])) {
      sql += next.sql[i];
      continue;
    }
    std::size_t end = i + 1;
    while (end < next.sql.size() && std::isdigit(next.sql[end])) ++end;
    sql += '$' + std::to_string(std::stoul(next.sql.substr(i + 1, end - i - 1)) + offset);
    i = end - 1;
  }
  last->name += "+" + next.name;
  last->sql = std::move(sql);
  last->params.append(p);
  return true;
}

Result PgWriter::write_now(Q q, const Params& p) {
  prefetched_.reset();
  return run(conn_, q, p);
}

std::vector<ObjectID> PgWriter::ids(Q q, std::int64_t limit) {
  auto r = run(conn_, q, Params().add(limit));
  std::vector<ObjectID> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.i64(i, 0));
  return out;
}

}  // namespace beehive::store::pg
