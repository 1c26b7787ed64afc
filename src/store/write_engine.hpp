#pragma once

// The write engine: runs every write transaction of one Beehive over the backend's write
// connection. It owns the `within` sessions (a session's writes each in a savepoint,
// nested blocks as savepoints), the group commit (several independent writes in one
// transaction, each in its own savepoint so that a failing one rolls back alone), the
// all-or-nothing transactions of the actor surface, and the look for other processes'
// commits. It applies every write through WriteOps and hands each commit's record to its
// `publish` function, after the commit and never after a rollback.
//
// It knows nothing of actors, mailboxes or reply slots: callers pass what they want run
// and get the result (or an exception) back.
//
// Thread-safety: none. Exactly one thread runs it: the store_writer actor's, which owns
// it (src/actors/store_writer.*); blocked callers hand their writes to that actor.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <beehive/actor/requests.hpp>
#include <beehive/commit_record.hpp>
#include <beehive/errors.hpp>
#include <beehive/metrics.hpp>
#include <beehive/options.hpp>
#include <beehive/time.hpp>

#include "store/backend.hpp"
#include "store/clock_step.hpp"
#include "store/event_sweep.hpp"
#include "store/object_limits.hpp"

namespace beehive::store {

/// The steps of a `within` session.
struct SessionCmd {
  enum Kind { begin, savepoint, release, rollback_to, commit, rollback } kind = begin;
};

/// A read inside a within block: served on the write connection, so that it sees the
/// block's own uncommitted writes.
struct ReadOp {
  enum What { get, get_by_slug, list, list_owned, related, incoming, events, current, list_where };
  What what = get;
  GroupKind gk;
  ObjectID id = 0;  // get, related, incoming, events, current: the object; list_owned: owner
  std::string slug;
  unsigned loads = 0;  // related: the relation
  EventFilter query{};
  ListQuery where{};  // list_where; its selector lives as long as the caller waits
};

/// Every operation the engine runs: the application's writes, beehive's maintenance
/// writes, and the steps and reads of a within session.
using WriteOp =
    beehive::detail::variant_of<write_request_types, collect_request, trim_events_request,
                                trim_change_log_request, SessionCmd, ReadOp>::type;

/// What an operation returns, for the blocking facade (each request's `reply_type`
/// lands in the field below that holds it).
struct WriteReply {
  ObjectRow row;
  bool flag{};  // get_or_create: created; remove_by_slug: deletion requested; incoming refs
  std::uint64_t session{};        // SessionCmd::begin: the session opened
  std::vector<ObjectRow> rows{};  // ReadOp
  int count{};                    // collect_request: objects removed; trim_events: runs
  Event event{};                  // record_event_request: the run
  std::vector<Ref> refs{};        // ReadOp::related
  std::vector<Event> events{};    // ReadOp::events
};

/// Puts a request's typed reply into a WriteReply, and takes it back out.
void put_reply(WriteReply& out, ObjectRow&& row);
void put_reply(WriteReply& out, get_or_create_reply&& r);
void put_reply(WriteReply& out, bool flag);
void put_reply(WriteReply& out, int count);
void put_reply(WriteReply& out, Event&& event);
template <class Reply>
Reply take_reply(WriteReply&& r) {
  if constexpr (std::is_same_v<Reply, ObjectRow>)
    return std::move(r.row);
  else if constexpr (std::is_same_v<Reply, get_or_create_reply>)
    return {std::move(r.row), r.flag};
  else if constexpr (std::is_same_v<Reply, bool>)
    return r.flag;
  else if constexpr (std::is_same_v<Reply, int>)
    return r.count;
  else
    return std::move(r.event);
}

/// Decodes a written row back into the caller's types inside the transaction; throwing
/// rolls the write back (the facade's documented "nothing is written that the caller
/// could not read back").
using RowCheck = std::function<void(const ObjectRow&)>;

/// The blocked caller a write is run for, as the engine sees it: a write is applied only
/// after `claim` succeeded (a caller that gave up first is never written), and another
/// process's lock is waited for only while the caller has not `abandoned` its wait.
class WaitingCaller {
 public:
  virtual bool abandoned() const = 0;
  virtual bool claim() = 0;
  /// The write is the leader's (a reconcile's): fenced (Writer::fence).
  virtual bool leader_work() const { return false; }
  /// The leadership term the leader's work began in (0: any).
  virtual std::int64_t leader_term() const { return 0; }

 protected:
  ~WaitingCaller() = default;
};

/// One write of a group commit and, once the group is done, its outcome.
struct GroupedWrite {
  const WriteOp* op = nullptr;
  const RowCheck* check = nullptr;
  WaitingCaller* caller = nullptr;
  std::optional<WriteReply> reply{};  ///< set when it committed
  errc code = errc::store;            ///< else why not
  std::string what{};
  /// Whether its caller claimed it (or gave up first): asked once, even when the group
  /// runs again.
  enum Turn { waiting, claimed, gave_up } turn = waiting;
};

/// The schema versions a registered kind writes (its migrator's; 0 without one).
struct SchemaVersions {
  int spec = 0;
  int status = 0;
};

/// Which schema versions a request leaves unset, to be stored at the kind's (bits).
enum VersionDefault : unsigned { kDefaultSpec = 1, kDefaultStatus = 2 };

/// Where an engine stands in other processes' commits (see publish_foreign_commits). It
/// outlives the engine: after a writer crashed, the next one goes on from here, so that
/// what other processes committed meanwhile is published, not skipped.
struct ForeignCursor {
  bool set = false;            // an engine has stood here
  std::int64_t seen_rv = 0;    // everything up to this version was published
  std::int64_t known_rv = 0;   // the highest version published, an engine's own or read
                               // (with unpublished_commit clear: all below it too)
  std::int64_t runs_seen = 0;  // event runs (not logged) up to this version were published
  /// Versions an engine published since the last look (not to be published again).
  std::vector<std::int64_t> own_rvs;
  /// A commit may have landed unpublished (OutcomeUnknown, or a look that failed after a
  /// commit of its own): the next look reads the log whatever data_version says.
  bool unpublished_commit = false;
};

struct WriteEngineConfig {
  std::unique_ptr<Writer> writer;
  std::shared_ptr<Clock> clock;
  /// Null: no metrics, and no clock reads for them.
  std::shared_ptr<MetricsSink> metrics;
  /// The largest spec, and status, a write may store (with_max_object_bytes).
  std::size_t max_object_bytes = default_max_object_bytes;
  /// Remember this engine's own commits, to tell other processes' apart (see
  /// publish_foreign_commits).
  bool watch_foreign_commits = true;
  /// Receives the record of every commit that changed something, right after it.
  std::function<void(const commit_record&)> publish;
  /// Shared with the engines that come before and after this one (null: its own). Only
  /// one engine uses it at a time.
  std::shared_ptr<ForeignCursor> cursor;
  /// The schema versions this build reads, per kind (null: every version). A write over
  /// a stored row that a caller decodes back (update, create_or_update, set_labels) is
  /// refused, as the facade's decode refuses it, when the row holds a newer blob, even
  /// without the caller's check (a request from an actor brings no types to decode with).
  std::function<SchemaVersions(const GroupKind&, unsigned defaults)> schema_versions;
};

class WriteEngine {
 public:
  explicit WriteEngine(WriteEngineConfig cfg);
  WriteEngine(const WriteEngine&) = delete;
  WriteEngine& operator=(const WriteEngine&) = delete;

  /// Runs one write: in the open session (in a savepoint), or as a transaction of its
  /// own. With a `caller`, another process's lock is waited for only while it waits, and
  /// nothing is written unless it claims the write first.
  WriteReply execute(const WriteOp& op, const RowCheck& check, WaitingCaller* caller = nullptr);

  /// One step of a within session. `begin` returns the new session's number in
  /// WriteReply::session; `commit` publishes the session's record.
  WriteReply session_step(SessionCmd::Kind kind, const WaitingCaller* caller = nullptr);

  /// A read on the write connection (inside a session: it sees the session's writes).
  WriteReply read(const ReadOp& r);

  /// Applies `writes` (from 0 on; `more` may append to it whenever all so far are
  /// applied) in one transaction, each failing alone, then commits. Each write's outcome
  /// lands in it; when the transaction itself fails, every write fails. On a backend
  /// that defers statements (Writer::defers_statements) the writes' statements travel
  /// with the commit; a refusal there, which no write can be blamed for, runs the group
  /// again with each write in its own savepoint, its outcome learnt before the next.
  using MoreWrites = std::function<void(std::vector<GroupedWrite>&)>;
  void commit_group(std::vector<GroupedWrite>& writes, const MoreWrites& more);

  /// All of `ops` in one transaction, or none (the error names the failing index).
  std::vector<WriteReply> execute_all(const std::vector<WriteOp>& ops);

  /// Publishes what other processes (or another Store on the file) committed since the
  /// last look: one PRAGMA data_version while nothing happened. Not inside a session.
  /// When the log no longer reaches back to the last look (another process trimmed it
  /// meanwhile), what it missed is lost: the record says so (`lost_through`).
  /// With `own` (this engine's commit, just made, its versions noted): publishes it in
  /// the same record as the others' commits, and sets `*own_published`.
  void publish_foreign_commits(const commit_record* own = nullptr, bool* own_published = nullptr);

  /// Publishes other processes' commits from their notes (Writer::commit_notes, in
  /// commit order): a note's record at once when it carries one and its versions follow
  /// the last published (known_rv), else through the change log (publish_foreign_commits),
  /// which covers the notes after it too. An empty note: a look at the log.
  void publish_noted_commits();

  /// Rolls the open session back and ends it. `stopped`: stop's deadline did it, and
  /// the session's later steps fail with errc::stopped.
  void abort_session(bool stopped);

  /// A step of the open session failed with `why`: when the database rolled the whole
  /// transaction back meanwhile, the session is broken (its later steps fail, its commit
  /// fails) rather than carrying on outside any transaction.
  void note_session_failure(const std::string& why);

  bool in_session() const { return session_ != 0; }
  std::uint64_t session() const { return session_; }
  /// The session stop rolled back (its later steps fail stopped); 0 = none.
  std::uint64_t aborted_session() const { return aborted_session_; }
  /// Transactions committed.
  std::uint64_t transactions() const { return transactions_; }
  /// A sweep under `policy` has committed pages and has more to go: the next
  /// trim_events_request with this policy runs its next page.
  bool sweeping(const trim_events_request& policy) const {
    return sweep_ && same_policy(sweep_->policy, policy);
  }
  /// How long the last COMMIT took.
  std::chrono::steady_clock::duration last_commit_took() const { return last_commit_; }
  Writer& writer() { return *cfg_.writer; }

 private:
  struct Mark {
    std::size_t changes, wakes, requeues, backoff_resets, events;
    bool edges_removed;
  };
  using SteadyTime = std::chrono::steady_clock::time_point;

  WriteReply apply(const WriteOp& op, const RowCheck& check, commit_record& rec,
                   const WaitingCaller* caller = nullptr);
  void check_size(const WriteOp& op) const;
  bool nothing_to_do(const WriteOp& op);
  /// Notes the time a write is stamped with (see clock_steps_).
  void note_time(Time now);
  /// Remembers a step for the next change-log trim (at most a few: a standby never trims).
  void note_step(ClockStep step);
  /// The newest entry a change-log trim may remove: the last this engine read (another
  /// process's commit above it has not been published yet).
  std::int64_t trim_limit() const;
  /// One attempt at commit_group; `batch`: let the backend learn the writes' outcomes
  /// with the commit (Writer::release_later). False when that failed in a way no write
  /// can be blamed for alone, and nothing was committed: then run it again unbatched.
  bool run_group(std::vector<GroupedWrite>& writes, const MoreWrites& more, bool batch);
  void undo_savepoint(int sp, const std::string& why);
  Error broken_session() const;
  void timed_commit(const commit_record& rec);
  /// Commits the writer's transaction; remembers a commit whose outcome is unknown
  /// (OutcomeUnknown), so that the change log is read for it (publish_foreign_commits).
  void commit_transaction(const commit_record& rec);
  SteadyTime began() const;
  void committed(SteadyTime since, std::size_t requests = 1);
  void publish(const commit_record& rec, bool own = true);
  /// One of publish_noted_commits' notes.
  void publish_note(const std::string& text);
  /// The look at other processes' commits a session held back, now that it ended.
  void catch_up_after_session();
  /// The change log no longer reaches back past `horizon`: chains the others' notes
  /// (all of them sent so far, waited for) from seen_rv, stepping over own versions,
  /// and returns the version reached, or seen_rv when a note is missing before the
  /// horizon. `carried` gets the chained notes' records, in order.
  std::int64_t fill_from_notes(std::int64_t horizon, std::vector<commit_record>& carried);
  void end_session();

  WriteEngineConfig cfg_;
  std::uint64_t session_ = 0;  // the open within session; 0 = none
  std::uint64_t aborted_session_ = 0;
  int depth_ = 0;  // savepoints open inside the session
  /// Why the session's transaction is gone, when the database rolled it back by itself
  /// after a failure (an I/O error, a full disk): the rest of the session fails with
  /// this instead of running outside any transaction, and its commit fails.
  std::string broken_;
  std::vector<Mark> marks_;    // the session record's extent at each savepoint
  commit_record session_rec_;  // what the session changed so far
  SteadyTime session_began_;   // metrics only
  std::uint64_t transactions_ = 0;
  /// A look at other processes' commits came while a session was open: done when it ends.
  bool foreign_pending_ = false;
  bool batching_ = false;  // in a batched group commit (run_group)
  std::chrono::steady_clock::duration last_commit_{};
  // Other processes' commits: the data_version last read (this connection's), and where
  // the engine stands in them (cfg_.cursor's).
  std::int64_t data_version_ = 0;
  ForeignCursor* cursor_ = nullptr;
  std::deque<std::string> notes_;  // their notes taken from the writer, not yet published
  // The last finished event-retention sweep's mark; the sweep in progress, as its last
  // committed page left it; and the page in flight's copy of it, kept once it commits.
  EventSweepMark sweep_mark_;
  std::optional<EventSweep> sweep_;
  EventSweep page_;
  // The latest time a write was stamped with (at first, the change log's newest entry's),
  // and the steps back of the clock the next change-log trim corrects.
  std::optional<Time> latest_stamp_;
  std::vector<ClockStep> clock_steps_;
};

}  // namespace beehive::store
