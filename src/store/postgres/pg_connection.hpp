#pragma once

// One libpq connection to the store's schema: statements prepared once per connection
// and run with bound parameters, several statements sent in one round trip (libpq's
// pipeline mode), and PostgreSQL's errors turned into beehive's.
//
// A connection that is lost is re-established on the next statement run outside a
// transaction (a transaction in progress is gone with it: that statement fails with
// errc::store). Prepared statements are prepared again on the new connection.
//
// Not thread-safe: a connection is used by one thread at a time (a reader leased from
// the pool, the thread running the writer, or the listener's thread).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace beehive::store::pg {

/// Statement parameters, all sent as text (PostgreSQL converts them to the column's type).
class Params {
 public:
  Params() = default;
  Params& add(std::int64_t v);
  Params& add(std::string_view v);
  Params& add(const char* v) { return add(std::string_view(v)); }
  Params& add(const std::string& v) { return add(std::string_view(v)); }
  Params& add_null();
  /// Appends `other`'s values after these.
  Params& append(const Params& other);
  template <class T>
  Params& add(const std::optional<T>& v) {
    return v ? add(*v) : add_null();
  }
  std::size_t size() const { return values_.size(); }
  /// Pointers valid while the Params lives unchanged.
  std::vector<const char*> pointers() const;
  std::vector<int> lengths() const;

 private:
  std::vector<std::string> values_;
  std::vector<bool> null_;
};

/// A statement's result; owns the PGresult.
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* r) : r_(r) {}
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result& operator=(Result&& o) noexcept;
  ~Result();

  int rows() const;
  bool null(int row, int col) const;
  std::string_view text(int row, int col) const;
  std::string str(int row, int col) const { return std::string(text(row, col)); }
  std::int64_t i64(int row, int col) const;
  std::optional<std::int64_t> opt_i64(int row, int col) const;
  bool boolean(int row, int col) const { return text(row, col) == "t"; }
  /// Rows an INSERT, UPDATE or DELETE touched.
  int affected() const;

 private:
  PGresult* r_ = nullptr;
};

/// One statement of a pipeline: prepared under `name` from `sql` the first time (an
/// empty name: run unprepared).
struct Statement {
  std::string name;
  std::string sql;
  Params params;
  /// A deferred statement's result lands here, when someone wants it.
  std::shared_ptr<Result> out{};
};

/// Throws Error(errc::invalid_argument) for a connection string libpq cannot parse (a
/// key=value list or a postgres:// URI with a syntax error, an unknown keyword); a bare
/// word is a database name and always passes. Connects to nothing.
void check_conninfo(const std::string& conninfo);
/// Throws Error(errc::invalid_argument) for a schema name PostgreSQL would misread: empty,
/// over 63 bytes (it would truncate it: two names would share one store), `pg_*` (its
/// own), `$user` (the role's schema in a search path), a NUL byte, or not UTF-8 text.
void check_schema_name(const std::string& schema);
/// What a store's sessions call themselves (application_name), for operators reading
/// pg_stat_activity and for beehive-ctl's "does an application run on it?" probe:
/// "beehive " and the schema, spelt as the server keeps it, which is printable ASCII
/// (other bytes, and a backslash, as \xNN) of at most 63 bytes.
std::string session_name(const std::string& schema);

/// The oldest server beehive runs on (PQserverVersion's numbering): 13, the first with
/// gen_random_uuid built in (older ones also lack settings every connection makes).
/// Throws errc::store, saying so, for an older one.
void require_server_version(int server_version);

class Connection {
 public:
  /// Connects and sets the search path to `schema` (which need not exist yet). With a
  /// `stall_limit`, a transaction left idle longer than it is ended by the server (a
  /// paused or cut-off process must not hold the store's write lock for longer), and a
  /// statement waits no longer than it for another transaction's lock (errc::store).
  /// `keep_waiting`: see set_keep_waiting (the connect in here asks it too).
  Connection(std::string conninfo, std::string schema, std::chrono::milliseconds connect_timeout,
             std::chrono::milliseconds stall_limit = {}, std::function<bool()> keep_waiting = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Runs the statement named `name` (prepared from `sql` on first use).
  Result run(const char* name, const std::string& sql, const Params& params = {});
  /// Runs SQL text without parameters (BEGIN, SAVEPOINT s1 ...).
  void exec(const std::string& sql);
  /// Sends the deferred statements and these in one round trip and returns these ones'
  /// results in order; the first failing statement throws, after every result has been
  /// read.
  std::vector<Result> pipeline(std::vector<Statement> statements);
  /// The same, asking `keep_waiting` every 10 ms while the server has not answered (a
  /// lock held by another process): on false the statement is cancelled and the call
  /// throws errc::store.
  std::vector<Result> pipeline(std::vector<Statement> statements,
                               const std::function<bool()>& keep_waiting);
  /// Queues a statement whose result nobody reads: it is sent with the next statement
  /// that is run (run, exec and pipeline send the queue first, in one round trip), so
  /// that a write's statements cost one round trip rather than one each. Its failure
  /// surfaces there.
  void defer(Statement s);
  /// Drops the last queued statement named `name` and every one after it, unsent; false
  /// when no queued statement has that name.
  bool discard_from(std::string_view name);
  /// Drops every queued statement, unsent (the transaction is being rolled back).
  void discard() { deferred_.clear(); }
  /// Statements ever queued on this connection: the last one queued is still the one
  /// queued at a count while the count stays (and it has not been sent or dropped).
  std::uint64_t deferred_total() const { return deferred_total_; }
  /// The last statement queued (null when none).
  Statement* last_deferred() { return deferred_.empty() ? nullptr : &deferred_.back(); }
  /// Sends the queued statements now.
  void flush() {
    if (!deferred_.empty()) pipeline({});
  }
  /// Statements to send after the next pipeline's, in the same round trip but on their
  /// own (a failure of one side does not abort the other), whose results that pipeline
  /// does not wait for: take_after reads them. Anything else run before that reads and
  /// keeps them first. Named statements only (prepared on first use, on their side).
  void send_after(std::vector<Statement> statements) { after_ = std::move(statements); }
  /// The results of the statements send_after sent; throws the first failure (after
  /// rolling back a transaction it left aborted), or errc::store when none were sent.
  std::vector<Result> take_after(const std::function<bool()>& keep_waiting = {});
  /// Reads what send_after sent, if anything (take_after then returns it): a caller
  /// about to ask in_transaction() learns what those statements left.
  void read_pending() { read_after({}); }

  /// Inside a transaction (an aborted one included).
  bool in_transaction() const;
  /// Inside a transaction a statement failed in: it refuses everything until rolled back.
  bool transaction_failed() const;
  /// The server connection is gone (a statement failed for it).
  bool lost() const;
  /// Whether the server ended the session, asked when nothing is due from it (every
  /// result read): anything waiting on the socket then is its goodbye. Marks the
  /// connection lost when so.
  bool hung_up();
  /// Connects again now, dropping whatever state the old connection had.
  void reconnect();
  /// Cuts the connection to the server now, as a network failure would (tests).
  void drop();
  /// While set, every call (run, exec, pipeline, and a connect, anew after a loss, which
  /// then fails with errc::store) asks `keep_waiting` every 10 ms while the server has
  /// not answered; on false it cuts the connection rather than asking the
  /// server to cancel (which needs the server to answer): the call fails with errc::store
  /// and the connection is lost. For callers that must not wait for a server that may
  /// not answer at all: a reader whose caller gave up, the leadership campaign.
  void set_keep_waiting(std::function<bool()> keep_waiting) {
    keep_waiting_ = std::move(keep_waiting);
  }
  /// Whether the caller set_keep_waiting named still waits (true without one).
  bool caller_waits() const { return !keep_waiting_ || keep_waiting_(); }
  /// From now on every transaction of this connection, and of the ones that replace it,
  /// is read-only: the server refuses writes (beehive-ctl's read commands).
  void set_read_only();
  /// From now on the server checks, while a statement of this connection (and of the ones
  /// that replace it) runs, that the client is still there, and gives the statement up
  /// when it is not: a statement left waiting for a lock by a client that went would
  /// otherwise run, and commit, once the lock is free. PostgreSQL 14 and later, on the
  /// platforms that support it; elsewhere nothing changes.
  void check_client_while_waiting();
  /// Round trips to the server so far: statements run one by one, pipelines, and
  /// statements prepared on first use.
  std::uint64_t round_trips() const { return round_trips_; }
  /// Sessions made (or tried) so far: a caller can tell whether a call made a new one.
  std::uint64_t connects() const { return connects_; }
  /// A quoted identifier (the schema, a channel name), safe to splice into SQL text.
  std::string quote_identifier(std::string_view name) const;
  PGconn* raw() { return conn_; }
  const std::string& schema() const { return schema_; }

 private:
  void connect();
  /// One host's keywords (host, hostaddr, port), which override the connection string's.
  using HostKeys = std::vector<std::pair<const char*, std::string>>;
  /// The hosts of a connection string naming several, each on its own; empty for one.
  static std::vector<HostKeys> hosts_of(const std::string& conninfo);
  /// "host:port", for a failure's explanation.
  static std::string host_label(const HostKeys& keys);
  /// Connects with `keys` and `values` (null-terminated) by `deadline`: nothing once
  /// connected (conn_), else why not (conn_ null). Throws once keep_waiting_ says stop.
  std::optional<std::string> start(const std::vector<const char*>& keys,
                                   const std::vector<const char*>& values,
                                   std::chrono::steady_clock::time_point deadline);
  /// Ends a connection attempt that took longer than the connect timeout.
  [[noreturn]] void timed_out();
  /// The answer to a statement connect() sent (`sent`: whether it went), read by
  /// `deadline`; its first result (null when none).
  PGresult* setup_result(bool sent, std::chrono::steady_clock::time_point deadline);
  /// Sets client_connection_check_interval (see check_client_while_waiting) by
  /// `deadline`; a server that refuses it is left as it is.
  void set_client_check(std::chrono::steady_clock::time_point deadline);
  /// Reconnects when lost outside a transaction; throws errc::store when lost inside one.
  /// Outside a transaction it first looks whether the server closed the connection
  /// meanwhile (a restart, an idle timeout, pg_terminate_backend): a call on such a
  /// connection would fail for nothing when a new one can serve it.
  void ensure();
  /// Records whether the connection is inside a transaction after a statement.
  void settle();
  /// Leaves pipeline mode; a connection that cannot (libpq still busy: the server ended
  /// the session mid-pipeline) is lost.
  void exit_pipeline();
  /// Reads a pipeline's results in order, up to its sync: waits as `wait` allows (see
  /// await_result), keeps the first failure (a statement aborted by an earlier failure
  /// is not one), and notes when the connection went.
  struct PipelineReads {
    Connection& c;
    const std::function<bool()>& wait;
    bool cut;
    bool sent = true;  // false once the connection went
    bool cancelled = false;
    PGresult* first_error = nullptr;
    /// The next statement's result; null for the first failure (kept above) or when the
    /// connection went.
    PGresult* next();
    /// Reads the sync's result.
    void end();
  };
  /// Waits until a result can be read without blocking, asking `keep_waiting`; cancels
  /// the statement on false. Returns whether it cancelled.
  bool await_result(const std::function<bool()>& keep_waiting, bool cancelled, bool cut);
  /// Waits for the socket to be ready for `events`; false once `deadline` passed.
  bool wait_for_socket(short events, std::chrono::steady_clock::time_point deadline);
  void prepare(const std::string& name, const std::string& sql);
  /// Reads the results of the statements send_after sent, if any, into after_results_,
  /// and ends the pipeline they were sent in.
  void read_after(const std::function<bool()>& keep_waiting);
  /// Throws the error of a failed result (errc::already_exists for a unique violation).
  [[noreturn]] void fail(PGresult* r, std::string_view what);

  std::string conninfo_, schema_;
  std::vector<HostKeys> hosts_;  // see hosts_of
  std::chrono::milliseconds connect_timeout_, stall_limit_;
  PGconn* conn_ = nullptr;
  bool dropped_ = false;
  bool check_client_ = false;           // see check_client_while_waiting
  std::function<bool()> keep_waiting_;  // see set_keep_waiting
  bool caller_gave_up_ = false;         // the last connect ended for keep_waiting_
  bool read_only_ = false;              // see set_read_only
  /// Inside a transaction as of the last statement: a connection lost then is not
  /// silently replaced (what followed would run outside the transaction).
  bool in_txn_ = false;
  std::unordered_set<std::string> prepared_;
  std::vector<Statement> deferred_;
  std::vector<Statement> after_;              // see send_after
  std::size_t after_sent_ = 0;                // their results, unread, in pipeline mode
  std::vector<std::string> after_preparing_;  // prepared with them, results unread too
  /// Their results once read, or why they failed (see take_after).
  std::optional<std::vector<Result>> after_results_;
  std::string after_error_;
  std::uint64_t deferred_total_ = 0;
  std::uint64_t round_trips_ = 0;
  std::uint64_t connects_ = 0;
};

}  // namespace beehive::store::pg
