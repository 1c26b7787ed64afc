// A libpq connection: connecting (with the store's timeout and search path), prepared
// statements with text parameters, pipelines, and error translation.
//
// Runs on the one thread using the connection at the time; not thread-safe.

#include "store/postgres/pg_connection.hpp"

#include <libpq-fe.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>

#include "store/postgres/pg_faults.hpp"
#include "store/statement_count.hpp"

namespace beehive::store::pg {

Params& Params::add(std::int64_t v) {
  values_.push_back(std::to_string(v));
  null_.push_back(false);
  return *this;
}

Params& Params::add(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  return *this;
}

Params& Params::add_null() {
  values_.emplace_back();
  null_.push_back(true);
  return *this;
}

Params& Params::append(const Params& other) {
  values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  null_.insert(null_.end(), other.null_.begin(), other.null_.end());
  return *this;
}

std::vector<const char*> Params::pointers() const {
  std::vector<const char*> out(values_.size());
  for (std::size_t i = 0; i < values_.size(); ++i) out[i] = null_[i] ? nullptr : values_[i].c_str();
  return out;
}

std::vector<int> Params::lengths() const {
  std::vector<int> out(values_.size());
  for (std::size_t i = 0; i < values_.size(); ++i) out[i] = static_cast<int>(values_[i].size());
  return out;
}

Result& Result::operator=(Result&& o) noexcept {
  if (this != &o) {
    if (r_) PQclear(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}

Result::~Result() {
  if (r_) PQclear(r_);
}

int Result::rows() const { return r_ ? PQntuples(r_) : 0; }

bool Result::null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }

std::string_view Result::text(int row, int col) const {
  return {PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col))};
}

std::int64_t Result::i64(int row, int col) const {
  auto t = text(row, col);
  std::int64_t v = 0;
  std::from_chars(t.data(), t.data() + t.size(), v);
  return v;
}

std::optional<std::int64_t> Result::opt_i64(int row, int col) const {
  if (null(row, col)) return std::nullopt;
  return i64(row, col);
}

int Result::affected() const {
  const char* n = r_ ? PQcmdTuples(r_) : "";
  return *n ? std::atoi(n) : 0;
}

namespace {

// Notices (a schema that exists already, an index skipped) are not errors: beehive does
// not print them.
void ignore_notice(void*, const char*) {}

bool ok(PGresult* r) {
  auto s = PQresultStatus(r);
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

}  // namespace

void check_schema_name(const std::string& schema) {
  if (schema.empty()) throw Error(errc::invalid_argument, "postgres: empty schema name");
  if (schema.size() > 63)
    throw Error(
        errc::invalid_argument,
        "postgres: schema name longer than 63 bytes (PostgreSQL would truncate it): " + schema);
  if (schema.starts_with("pg_"))
    throw Error(errc::invalid_argument,
                "postgres: schema names starting with pg_ are PostgreSQL's own: " + schema);
  // Quoted or not, a search path reads it as the schema named after the role: the store
  // would use that schema's tables, perhaps another store's.
  if (schema == "$user")
    throw Error(errc::invalid_argument,
                "postgres: the schema name $user stands for the role's own schema in a "
                "search path; choose another name");
  if (schema.find('\0') != std::string::npos)
    throw Error(errc::invalid_argument, "postgres: schema name holds a NUL byte");
  beehive::detail::require_text(schema, "postgres: the schema name");
}

std::string session_name(const std::string& schema) {
  // The server replaces what is not printable ASCII in an application_name ('?' up to
  // version 15, \xNN from 16) and cuts it at 63 bytes: spelt so here, the name is kept
  // as given, and the tool can look for it.
  std::string out = "beehive ";
  for (unsigned char c : schema) {
    char piece[5] = {static_cast<char>(c), '\0'};
    // A backslash too, so that no schema's name reads as another's escaped byte.
    if (c < 0x20 || c > 0x7e || c == '\\') std::snprintf(piece, sizeof piece, "\\x%02x", c);
    if (out.size() + std::strlen(piece) > 63) break;
    out += piece;
  }
  return out;
}

void check_conninfo(const std::string& conninfo) {
  // libpq's own test for a connection string, as opposed to a database name.
  if (conninfo.find('=') == std::string::npos && conninfo.rfind("postgresql://", 0) != 0 &&
      conninfo.rfind("postgres://", 0) != 0)
    return;
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (opts) {
    PQconninfoFree(opts);
    return;
  }
  std::string why = err ? err : "out of memory";
  PQfreemem(err);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  throw Error(errc::invalid_argument, "postgres: malformed connection string: " + why);
}

void require_server_version(int server_version) {
  if (server_version >= 130000) return;
  throw Error(errc::store, "postgres: the server runs PostgreSQL " +
                               std::to_string(server_version / 10000) +
                               "; beehive needs PostgreSQL 13 or later");
}

Connection::Connection(std::string conninfo, std::string schema,
                       std::chrono::milliseconds connect_timeout,
                       std::chrono::milliseconds stall_limit, std::function<bool()> keep_waiting)
    : conninfo_(std::move(conninfo)),
      schema_(std::move(schema)),
      connect_timeout_(connect_timeout),
      stall_limit_(stall_limit),
      keep_waiting_(std::move(keep_waiting)) {
  check_conninfo(conninfo_);
  hosts_ = hosts_of(conninfo_);
  try {
    connect();
  } catch (...) {  // the destructor will not run
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
    throw;
  }
}

Connection::~Connection() {
  if (conn_) PQfinish(conn_);
}

void Connection::set_read_only() {
  read_only_ = true;
  exec("SET default_transaction_read_only = on");
}

void Connection::connect() {
  ++connects_;
  if (conn_) PQfinish(conn_);
  dropped_ = false;
  in_txn_ = false;
  prepared_.clear();
  after_.clear();
  after_preparing_.clear();
  after_sent_ = 0;  // their results went with the old connection, as did what they began
  after_results_.reset();
  after_error_.clear();
  if (faults::refuse_connections.load()) {
    conn_ = nullptr;
    throw Error(errc::store, "postgres: cannot connect: refused (injected)");
  }
  // Named after the schema, so that an operator can tell the control planes' sessions
  // apart in pg_stat_activity.
  auto app = session_name(schema_);
  // Over TCP, a server that went silent (a partition dropping packets) fails the call
  // within the stall limit instead of the kernel's minutes: a cut-off leader then
  // notices in time. libpq lets later keywords override earlier ones: these defaults
  // come before `conninfo`, which may set its own. (Its connect_timeout has no effect:
  // Options::connect_timeout bounds the connection below.)
  // A connection without a stall limit (a reader's, the listener's) gets the connect
  // timeout: a read sent as the network went silent fails in seconds, not in minutes.
  auto user_timeout =
      std::to_string((stall_limit_.count() > 0 ? stall_limit_ : connect_timeout_).count());
  std::vector<const char*> keys{"application_name",    "keepalives",       "keepalives_idle",
                                "keepalives_interval", "keepalives_count", "tcp_user_timeout"};
  std::vector<const char*> values{app.c_str(), "1", "5", "2", "3", user_timeout.c_str()};
  keys.push_back("dbname");
  values.push_back(conninfo_.c_str());
  // With several hosts, each is tried on its own, with a connect timeout of its own (as
  // libpq's connect_timeout is per host): given the whole list, libpq would spend the
  // whole timeout on a first host that hangs (a frozen primary) and never try the next.
  const std::size_t base = keys.size();
  std::string why;
  std::chrono::steady_clock::time_point deadline;
  for (std::size_t i = 0; i < std::max<std::size_t>(hosts_.size(), 1); ++i) {
    keys.resize(base);
    values.resize(base);
    if (!hosts_.empty())
      for (auto& [key, value] : hosts_[i]) {
        keys.push_back(key);
        values.push_back(value.c_str());
      }
    // After `conninfo`, so that it wins: text goes in and out as the UTF-8 beehive
    // checked. Another client encoding (the conninfo's, PGCLIENTENCODING's) would have
    // the server re-encode it, storing something else than every other client reads.
    keys.push_back("client_encoding");
    values.push_back("UTF8");
    keys.push_back(nullptr);
    values.push_back(nullptr);
    deadline = std::chrono::steady_clock::now() + connect_timeout_;
    auto failed = start(keys, values, deadline);
    if (!failed) break;
    if (!why.empty()) why += "; ";
    why += hosts_.empty() ? *failed : host_label(hosts_[i]) + ": " + *failed;
  }
  if (!conn_) throw Error(errc::store, "postgres: cannot connect: " + why);
  try {
    require_server_version(PQserverVersion(conn_));
  } catch (...) {
    PQfinish(conn_);
    conn_ = nullptr;
    throw;
  }
  PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
  // The schema's tables are named unqualified in every statement. pg_catalog stays
  // first (implicitly), so that no table of the schema can shadow a system function.
  // No JIT: its compile time (milliseconds) dwarfs our short statements, and a generic
  // plan's cost guess can cross its threshold. READ COMMITTED whatever the database's or
  // role's default: a write that waited for the counters' lock must read them as the
  // other process committed them (a stricter level fails it instead), and a leader's
  // lease check must see its campaign's latest renewal. Commits wait for the server's
  // disk whatever the role's default: with synchronous_commit off, a write beehive
  // reported (and watches saw) could vanish in a server crash. A stronger level (one
  // that also waits for standbys) is kept.
  // A connection without a stall limit (a reader, the listener, an open's) leaves the
  // role's idle-in-transaction and lock timeouts as they are: 0 would switch off what a
  // DBA set to keep a paused process from holding locks for ever.
  Params p;
  p.add(quote_identifier(schema_));
  std::string setup = "SELECT set_config('search_path', $1, false), ";
  if (stall_limit_.count() > 0) {
    p.add(static_cast<std::int64_t>(stall_limit_.count()));
    setup +=
        "set_config('idle_in_transaction_session_timeout', $2, false), "
        "set_config('lock_timeout', $2, false), ";
  }
  setup +=
      "set_config('jit', 'off', false), "
      "set_config('default_transaction_isolation', 'read committed', false), "
      "set_config('synchronous_commit', CASE current_setting('synchronous_commit') "
      "WHEN 'off' THEN 'on' ELSE current_setting('synchronous_commit') END, false)";
  if (read_only_) setup += ", set_config('default_transaction_read_only', 'on', false)";
  auto vals = p.pointers();
  auto lens = p.lengths();
  // Within the connect timeout too.
  PGresult* r = setup_result(PQsendQueryParams(conn_, setup.c_str(), static_cast<int>(p.size()),
                                               nullptr, vals.data(), lens.data(), nullptr, 0) == 1,
                             deadline);
  if (!ok(r)) {
    try {
      fail(r, "search_path");
    } catch (...) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw;
    }
  }
  PQclear(r);
  if (check_client_) set_client_check(deadline);
}

PGresult* Connection::setup_result(bool sent, std::chrono::steady_clock::time_point deadline) {
  while (sent && PQisBusy(conn_)) sent = wait_for_socket(POLLIN, deadline) && PQconsumeInput(conn_);
  if (!sent && PQstatus(conn_) == CONNECTION_OK) timed_out();
  PGresult* r = PQgetResult(conn_);
  if (r)
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  return r;
}

void Connection::set_client_check(std::chrono::steady_clock::time_point deadline) {
  if (PQserverVersion(conn_) < 140000) return;
  PQclear(setup_result(PQsendQuery(conn_, "SET client_connection_check_interval = 100") == 1,
                       deadline));
  if (PQstatus(conn_) == CONNECTION_OK) return;  // set, or refused: the server cannot check
  std::string why = PQerrorMessage(conn_);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  PQfinish(conn_);
  conn_ = nullptr;
  throw Error(errc::store, "postgres: cannot connect: " + why);
}

void Connection::check_client_while_waiting() {
  if (std::exchange(check_client_, true)) return;
  set_client_check(std::chrono::steady_clock::now() + connect_timeout_);
}

std::optional<std::string> Connection::start(const std::vector<const char*>& keys,
                                             const std::vector<const char*>& values,
                                             std::chrono::steady_clock::time_point deadline) {
  // Connected without blocking, so that the timeout holds to the millisecond (libpq's
  // own counts whole seconds, two at least) for every step: a server that accepts the
  // connection and then never answers included.
  conn_ = PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1);
  auto step = PGRES_POLLING_WRITING;
  while (conn_ && PQstatus(conn_) != CONNECTION_BAD && step != PGRES_POLLING_OK &&
         step != PGRES_POLLING_FAILED) {
    if (!wait_for_socket(step == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline)) {
      PQfinish(conn_);
      conn_ = nullptr;
      if (std::exchange(caller_gave_up_, false))  // no other host either
        throw Error(errc::store, "postgres: cannot connect: the caller stopped waiting first");
      return "no answer within the connect timeout (" + std::to_string(connect_timeout_.count()) +
             " ms)";
    }
    step = PQconnectPoll(conn_);
  }
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) return std::nullopt;
  std::string why = conn_ ? PQerrorMessage(conn_) : "out of memory";
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  PQfinish(conn_);
  conn_ = nullptr;
  return why;
}

std::vector<Connection::HostKeys> Connection::hosts_of(const std::string& conninfo) {
  if (conninfo.find('=') == std::string::npos && conninfo.rfind("postgresql://", 0) != 0 &&
      conninfo.rfind("postgres://", 0) != 0)
    return {};  // a database name
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), nullptr);
  if (!opts) return {};  // check_conninfo has said why
  auto split = [](const char* list) {
    std::vector<std::string> out;
    if (!list) return out;
    std::string_view rest(list);
    for (;;) {
      auto comma = rest.find(',');
      out.emplace_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return out;
  };
  std::vector<std::string> host, hostaddr, port;
  bool whole_list = false;  // options that choose among the hosts: libpq must see them all
  for (auto* o = opts; o->keyword; ++o) {
    std::string_view k(o->keyword), v(o->val ? o->val : "");
    if (k == "host") host = split(o->val);
    if (k == "hostaddr") hostaddr = split(o->val);
    if (k == "port") port = split(o->val);
    if ((k == "load_balance_hosts" && !v.empty() && v != "disable") ||
        (k == "target_session_attrs" && v == "prefer-standby"))
      whole_list = true;
  }
  PQconninfoFree(opts);
  std::size_t n = std::max(host.size(), hostaddr.size());
  auto has_empty = [](const std::vector<std::string>& list) {
    return std::any_of(list.begin(), list.end(), [](auto& e) { return e.empty(); });
  };
  // One host; lists that do not pair up (libpq refuses them, and says why); an empty
  // entry (libpq's default there, which an override cannot spell); or a choice among
  // the hosts: the whole list goes to libpq as given.
  if (n <= 1 || whole_list || (!host.empty() && host.size() != n) ||
      (!hostaddr.empty() && hostaddr.size() != n) || (port.size() > 1 && port.size() != n) ||
      has_empty(host) || has_empty(hostaddr) || has_empty(port))
    return {};
  std::vector<HostKeys> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!host.empty()) out[i].emplace_back("host", host[i]);
    if (!hostaddr.empty()) out[i].emplace_back("hostaddr", hostaddr[i]);
    if (!port.empty()) out[i].emplace_back("port", port.size() == 1 ? port[0] : port[i]);
  }
  return out;
}

std::string Connection::host_label(const HostKeys& keys) {
  std::string name, port;
  for (auto& [key, value] : keys) {
    std::string_view k(key);
    if (k == "host" && !value.empty())
      name = value;
    else if (k == "hostaddr" && name.empty())
      name = value;
    else if (k == "port")
      port = value;
  }
  if (name.empty()) name = "(default host)";
  return port.empty() ? name : name + ":" + port;
}

void Connection::timed_out() {
  PQfinish(conn_);
  conn_ = nullptr;
  if (std::exchange(caller_gave_up_, false))
    throw Error(errc::store, "postgres: cannot connect: the caller stopped waiting first");
  throw Error(errc::store, "postgres: cannot connect: no answer within the connect timeout (" +
                               std::to_string(connect_timeout_.count()) + " ms)");
}

std::string Connection::quote_identifier(std::string_view name) const {
  char* q = PQescapeIdentifier(conn_, name.data(), name.size());
  if (!q) throw Error(errc::invalid_argument, "postgres: bad identifier: " + std::string(name));
  std::string out(q);
  PQfreemem(q);
  return out;
}

bool Connection::in_transaction() const {
  auto s = PQtransactionStatus(conn_);
  return s == PQTRANS_ACTIVE || s == PQTRANS_INTRANS || s == PQTRANS_INERROR;
}

bool Connection::transaction_failed() const {
  return PQtransactionStatus(conn_) == PQTRANS_INERROR;
}

bool Connection::lost() const { return dropped_ || PQstatus(conn_) != CONNECTION_OK; }

void Connection::reconnect() { connect(); }

void Connection::drop() {
  ::shutdown(PQsocket(conn_), SHUT_RDWR);
  dropped_ = true;
}

void Connection::exit_pipeline() {
  // libpq refuses while it is still busy: the server ended the session in the middle of
  // the pipeline (its FATAL read as a statement's result, the end of the stream not
  // yet). Left so, the connection would stay "connected" in pipeline mode, and fail
  // every statement after: it is lost.
  if (!PQexitPipelineMode(conn_)) drop();
}

void Connection::ensure() {
  // Idle, nothing is due from the server: anything to read is its goodbye (a FATAL
  // message, the end of the stream), so the connection is made anew.
  if (!in_txn_) hung_up();
  if (!lost()) return;
  if (in_txn_) {
    // Said once, to the transaction's next statement: whatever comes after it (a poll,
    // the next transaction) connects anew.
    in_txn_ = false;
    throw Error(errc::store, "postgres: connection lost inside a transaction (rolled back)");
  }
  connect();
}

bool Connection::hung_up() {
  if (lost()) return true;
  pollfd p{PQsocket(conn_), POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) dropped_ = true;
  return lost();
}

void Connection::settle() {
  if (!lost()) in_txn_ = in_transaction();
}

void Connection::fail(PGresult* r, std::string_view what) {
  std::string msg = r ? PQresultErrorMessage(r) : "";
  if (msg.empty()) msg = PQerrorMessage(conn_);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  bool unique = state && std::string_view(state) == "23505";
  if (r) PQclear(r);
  if (unique) throw Error(errc::already_exists, "postgres: " + msg);
  if (lost()) throw Error(errc::store, "postgres: connection lost: " + msg);
  throw Error(errc::store,
              "postgres: " + msg + (what.empty() ? "" : " (" + std::string(what) + ")"));
}

void Connection::prepare(const std::string& name, const std::string& sql) {
  if (name.empty() || prepared_.contains(name)) return;
  ++round_trips_;
  PGresult* r = PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr);
  if (!ok(r)) fail(r, name);
  PQclear(r);
  prepared_.insert(name);
}

Result Connection::run(const char* name, const std::string& sql, const Params& params) {
  read_after({});
  if (!deferred_.empty() || keep_waiting_) {
    std::vector<Statement> one;
    one.push_back({name, sql, params});
    return std::move(pipeline(std::move(one)).back());
  }
  count_statement();
  ensure();
  ++round_trips_;
  auto vals = params.pointers();
  auto lens = params.lengths();
  PGresult* r = nullptr;
  if (!*name) {  // run once: not worth preparing
    r = PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr, vals.data(),
                     lens.data(), nullptr, 0);
  } else {
    prepare(name, sql);
    r = PQexecPrepared(conn_, name, static_cast<int>(params.size()), vals.data(), lens.data(),
                       nullptr, 0);
  }
  settle();
  if (!ok(r)) fail(r, name);
  return Result(r);
}

void Connection::exec(const std::string& sql) {
  read_after({});
  if (!deferred_.empty() || keep_waiting_) {
    std::vector<Statement> one;
    one.push_back({"", sql, {}});
    pipeline(std::move(one));
    return;
  }
  count_statement();
  ensure();
  ++round_trips_;
  PGresult* r = PQexec(conn_, sql.c_str());
  settle();
  if (!ok(r)) fail(r, sql);
  PQclear(r);
}

void Connection::defer(Statement s) {
  deferred_.push_back(std::move(s));
  ++deferred_total_;
}

bool Connection::discard_from(std::string_view name) {
  for (std::size_t i = deferred_.size(); i-- > 0;) {
    if (deferred_[i].name == name) {
      deferred_.resize(i);
      return true;
    }
  }
  return false;
}

PGresult* Connection::PipelineReads::next() {
  if (!sent) return nullptr;
  if (wait) cancelled = c.await_result(wait, cancelled, cut);
  PGresult* r = PQgetResult(c.conn_);
  if (!r) {  // the connection went
    sent = false;
    return nullptr;
  }
  while (PGresult* extra = PQgetResult(c.conn_)) PQclear(extra);  // the statement's end
  if (!ok(r) && !first_error && PQresultStatus(r) != PGRES_PIPELINE_ABORTED) {
    first_error = r;
    return nullptr;
  }
  return r;
}

void Connection::PipelineReads::end() {
  if (!sent) return;
  if (PGresult* sync = PQgetResult(c.conn_)) PQclear(sync);  // PGRES_PIPELINE_SYNC
}

std::vector<Result> Connection::pipeline(std::vector<Statement> statements) {
  return pipeline(std::move(statements), {});
}

bool Connection::wait_for_socket(short events, std::chrono::steady_clock::time_point deadline) {
  // With a caller that may stop waiting (keep_waiting_), asked every 10 ms: a server
  // that does not answer holds it up no longer than its own deadline.
  const std::int64_t slice = keep_waiting_ ? 10 : 1000;
  for (;;) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (keep_waiting_ && !keep_waiting_()) {
      caller_gave_up_ = true;
      return false;
    }
    pollfd p{PQsocket(conn_), events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), slice)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let libpq find out what is wrong
  }
}

bool Connection::await_result(const std::function<bool()>& keep_waiting, bool cancelled, bool cut) {
  while (PQisBusy(conn_)) {
    pollfd p{PQsocket(conn_), POLLIN, 0};
    (void)::poll(&p, 1, 10);
    if (!PQconsumeInput(conn_)) return cancelled;  // gone: PQgetResult reports it
    if (!cancelled && PQisBusy(conn_) && !keep_waiting()) {
      cancelled = true;
      if (cut) {
        drop();  // PQgetResult then reports the connection lost
        return cancelled;
      }
      // PQcancel connects to the server anew, and blocks while it does: a server cut off
      // by a network that drops packets would hold this thread for the kernel's connect
      // timeout (minutes). On a thread of its own, the wait here goes on, bounded by the
      // connection's own timeouts.
      if (PGcancel* c = PQgetCancel(conn_)) {
        faults::cancels_sent.fetch_add(1);
        std::thread([c, delay = faults::cancel_delay_ms.load()] {
          if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
          char why[256];
          PQcancel(c, why, sizeof why);
          PQfreeCancel(c);
          faults::cancels_delivered.fetch_add(1);
        }).detach();
      }
    }
  }
  return cancelled;
}

std::vector<Result> Connection::pipeline(std::vector<Statement> statements,
                                         const std::function<bool()>& keep_waiting) {
  read_after(keep_waiting);
  // The deferred statements go first; their results are read and dropped.
  std::size_t skip = deferred_.size();
  if (skip) {
    statements.insert(statements.begin(), std::make_move_iterator(deferred_.begin()),
                      std::make_move_iterator(deferred_.end()));
    deferred_.clear();
  }
  for (std::size_t i = 0; i < statements.size(); ++i) count_statement();
  ensure();
  if (PQenterPipelineMode(conn_) != 1) fail(nullptr, "pipeline");
  std::vector<Result> results;
  bool sent = true;
  // Statements not yet prepared on this connection are prepared in the same round trip,
  // each just before it first runs: preparing waits for the tables' locks as running
  // does, and can fail as running can, so it must come after the statements before it
  // (a savepoint's included). `prepares[i]`: statement i is prepared first.
  std::vector<char> prepares(statements.size(), 0);
  std::vector<const std::string*> preparing;
  for (std::size_t i = 0; i < statements.size(); ++i) {
    auto& s = statements[i];
    if (s.name.empty() || prepared_.contains(s.name) ||
        std::any_of(preparing.begin(), preparing.end(), [&](auto* n) { return *n == s.name; }))
      continue;
    preparing.push_back(&s.name);
    prepares[i] = 1;
  }
  for (std::size_t i = 0; i < statements.size(); ++i) {
    auto& s = statements[i];
    if (prepares[i] && !PQsendPrepare(conn_, s.name.c_str(), s.sql.c_str(), 0, nullptr))
      sent = false;
    if (!sent) break;
    auto vals = s.params.pointers();
    auto lens = s.params.lengths();
    auto n = static_cast<int>(s.params.size());
    int queued = s.name.empty() ? PQsendQueryParams(conn_, s.sql.c_str(), n, nullptr, vals.data(),
                                                    lens.data(), nullptr, 0)
                                : PQsendQueryPrepared(conn_, s.name.c_str(), n, vals.data(),
                                                      lens.data(), nullptr, 0);
    if (!queued) {
      sent = false;
      break;
    }
  }
  if (sent && PQpipelineSync(conn_) != 1) sent = false;
  auto after = std::exchange(after_, {});
  if (sent && !after.empty()) {
    // Prepared first, on their side of the sync: a failure there is theirs alone.
    for (auto& s : after) {
      if (prepared_.contains(s.name) || std::find(after_preparing_.begin(), after_preparing_.end(),
                                                  s.name) != after_preparing_.end())
        continue;
      after_preparing_.push_back(s.name);
      if (!PQsendPrepare(conn_, s.name.c_str(), s.sql.c_str(), 0, nullptr)) sent = false;
    }
    for (auto& s : after) {
      auto vals = s.params.pointers();
      auto lens = s.params.lengths();
      if (sent && !PQsendQueryPrepared(conn_, s.name.c_str(), static_cast<int>(s.params.size()),
                                       vals.data(), lens.data(), nullptr, 0))
        sent = false;
      count_statement();
    }
    if (sent && PQpipelineSync(conn_) != 1) sent = false;
    if (sent) {
      after_sent_ = after.size();
    } else {
      after_preparing_.clear();
      drop();  // the COMMIT before them may have gone out: read back as after a loss
    }
  }
  ++round_trips_;
  const bool cut = !keep_waiting && keep_waiting_;
  const auto& wait = cut ? keep_waiting_ : keep_waiting;
  PipelineReads rd{*this, wait, cut};
  rd.sent = sent;
  for (std::size_t i = 0; rd.sent && i < statements.size(); ++i) {
    if (prepares[i]) {
      if (PGresult* r = rd.next()) {
        if (ok(r)) prepared_.insert(statements[i].name);
        PQclear(r);
      }
    }
    PGresult* r = rd.next();
    if (!r) continue;  // the first failure (kept), or the connection went
    if (i >= skip)
      results.emplace_back(r);
    else if (statements[i].out)
      *statements[i].out = Result(r);
    else
      PQclear(r);
  }
  rd.end();
  sent = rd.sent;
  bool cancelled = rd.cancelled;
  PGresult* first_error = rd.first_error;
  if (!sent) {
    // Whatever is left of the pipeline is unusable: drop the connection's state.
    after_sent_ = 0;
    exit_pipeline();
    settle();
    if (first_error) fail(first_error, statements.front().name);
    fail(nullptr, statements.front().name);
  }
  if (after_sent_ && cancelled) after_sent_ = 0;  // gone with the connection, dropped below
  if (after_sent_ && first_error) read_after({});
  if (after_sent_) {
    in_txn_ = true;  // what was sent after is still running: see read_after
    return results;
  }
  exit_pipeline();
  settle();
  if (cancelled) {
    // The cancel request travels on a connection of its own: when the statement ended
    // by itself first (the lock came free), the request can still land, and cancel
    // whatever this session runs next. The session is not used again (a transaction
    // begun on it ends with it), and the call fails as cancelled: nobody waits for it.
    if (first_error) PQclear(first_error);
    drop();
    in_txn_ = false;  // over with the connection, and this call says so
    throw Error(errc::store, "postgres: gave up waiting for another process's transaction");
  }
  if (first_error) fail(first_error, "pipeline");
  return results;
}

void Connection::read_after(const std::function<bool()>& keep_waiting) {
  if (!after_sent_) return;
  auto n = std::exchange(after_sent_, 0);
  auto preparing = std::exchange(after_preparing_, {});
  after_results_.reset();
  after_error_.clear();
  std::vector<Result> results;
  const bool cut = !keep_waiting && keep_waiting_;
  PipelineReads rd{*this, cut ? keep_waiting_ : keep_waiting, cut};
  for (auto& name : preparing) {
    if (PGresult* r = rd.next()) {
      if (ok(r)) prepared_.insert(name);
      PQclear(r);
    }
  }
  for (std::size_t i = 0; rd.sent && i < n; ++i)
    if (PGresult* r = rd.next()) results.emplace_back(r);
  rd.end();
  const bool sent = rd.sent, cancelled = rd.cancelled;
  PGresult* first_error = rd.first_error;
  exit_pipeline();
  settle();
  if (first_error) {
    after_error_ = PQresultErrorMessage(first_error);
    PQclear(first_error);
  }
  if (cancelled) {
    drop();  // as in pipeline: a late cancel must not hit what this session runs next
    in_txn_ = false;
    after_error_ = "gave up waiting for another process's transaction";
  } else if (!sent || lost()) {
    // Nothing was written in what they began: the next statement connects anew, as
    // after a loss between transactions.
    in_txn_ = false;
    after_error_ = "connection lost";
  } else if (!first_error) {
    after_results_ = std::move(results);
  } else if (in_transaction()) {
    // Nobody wants what the failed statements began: it would refuse what runs next.
    PQclear(PQexec(conn_, "ROLLBACK"));
    settle();
  }
}

std::vector<Result> Connection::take_after(const std::function<bool()>& keep_waiting) {
  read_after(keep_waiting);
  if (after_results_) {
    auto r = std::move(*after_results_);
    after_results_.reset();
    return r;
  }
  auto why = std::exchange(after_error_, {});
  throw Error(errc::store, "postgres: " + (why.empty() ? std::string("nothing was sent") : why));
}

}  // namespace beehive::store::pg
