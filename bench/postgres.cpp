// The PostgreSQL store against raw libpq on the same server, in the same run. Pairs
// (beehive / baseline; bench/ratios.py --suite postgres prints the ratios):
//
//   BM_PgUpdate        blocking Client::update to a new spec / BM_PgRawUpdate: BEGIN,
//                      UPDATE objects ..., COMMIT as three statements (BM_PgRawUpdatePipelined:
//                      the same in one round trip, for context)
//   BM_PgGet           Client::get / BM_PgRawGet: a prepared point select of the same row
//   BM_PgGroupCommit   8 threads creating through one Beehive / BM_PgRawCommit/conns:1:
//                      single-row INSERTs committed one by one from one connection
//                      (conns:8: eight connections doing the same, for context;
//                      BM_PgRawBatch: 8-row transactions in one round trip each, the
//                      ceiling of a group commit of 8; BM_PgRawSplitBatch: the same rows in
//                      flight as concurrent commits on several connections)
//   BM_PgWatchLatency  a forked process updates through beehive while this one watches
//                      (watch_list): update called -> change delivered /
//                      BM_PgRawUpdateNotify: the forked process runs BEGIN, UPDATE, NOTIFY,
//                      COMMIT -> received here on a LISTEN (BM_PgRawNotify: a bare NOTIFY).
//                      Both also count what is delivered after the writer's call returned.
//
// The server: $BEEHIVE_BENCH_PG (a conninfo) if set; else a throwaway server started with
// scripts/pg-test-server.sh in a temp dir (port $BEEHIVE_PG_PORT, default 55433 here so
// that it never meets the test suite's) with fsync turned back on, since group commit is
// about what a durable commit costs; stopped at exit. Each run gets fresh schemas,
// dropped after it. The raw side uses a schema beehive migrated, so that its rows pay
// for the same table and indexes.

#include <libpq-fe.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <caf/all.hpp>

#include <beehive/actors.hpp>
#include <beehive/beehive.hpp>
#include <beehive/postgres.hpp>

#include "store/statement_count.hpp"  // beehive::store::statements_run (private header)

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using beehive::Context;

struct Spec {
  std::string name;
  int n = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Spec, name, n)
struct Status {
  std::string phase;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Status, phase)
using Objects = beehive::Client<Spec, Status>;
const beehive::GroupKind item_kind{"bench.io", "Item"};

constexpr int kRows = 100;
constexpr std::int64_t kTarget = kRows / 2;  // ids 1..kRows in a fresh schema

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::int64_t now_millis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The spec text beehive stores for Spec{"item", n}.
std::string spec_text(int n) { return nlohmann::json(Spec{"item", n}).dump(); }

// --- raw libpq ---------------------------------------------------------------------------

class Pg {
 public:
  explicit Pg(const std::string& conninfo, const std::string& schema = "") {
    c_ = PQconnectdb(conninfo.c_str());
    if (PQstatus(c_) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(c_));
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);  // DROP ... CASCADE's list
    if (!schema.empty()) exec("SET search_path TO " + quote(schema));
  }
  ~Pg() { PQfinish(c_); }
  Pg(const Pg&) = delete;
  Pg& operator=(const Pg&) = delete;

  PGconn* raw() const { return c_; }
  std::string quote(const std::string& id) const {
    char* q = PQescapeIdentifier(c_, id.data(), id.size());
    std::string out(q);
    PQfreemem(q);
    return out;
  }
  void exec(const std::string& sql) { check(PQexec(c_, sql.c_str()), sql); }
  void prepare(const char* name, const char* sql) {
    check(PQprepare(c_, name, sql, 0, nullptr), sql);
  }
  // Runs a prepared statement with text parameters; the result is the caller's.
  PGresult* run(const char* name, const std::vector<std::string>& params) {
    std::vector<const char*> v;
    for (auto& p : params) v.push_back(p.c_str());
    return check(
        PQexecPrepared(c_, name, static_cast<int>(v.size()), v.data(), nullptr, nullptr, 0), name,
        /*keep=*/true);
  }
  // Sends prepared statements in one pipeline (one round trip) and reads their results.
  void pipeline(const std::vector<std::pair<const char*, std::vector<std::string>>>& stmts) {
    PQenterPipelineMode(c_);
    for (auto& [name, params] : stmts) {
      std::vector<const char*> v;
      for (auto& p : params) v.push_back(p.c_str());
      PQsendQueryPrepared(c_, name, static_cast<int>(v.size()), v.data(), nullptr, nullptr, 0);
    }
    PQpipelineSync(c_);
    for (std::size_t i = 0; i < stmts.size(); ++i) {
      check(PQgetResult(c_), stmts[i].first);
      while (PGresult* r = PQgetResult(c_)) PQclear(r);
    }
    PQclear(PQgetResult(c_));  // the sync
    PQexitPipelineMode(c_);
  }

 private:
  PGresult* check(PGresult* r, const std::string& what, bool keep = false) {
    auto s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
      std::string msg = what + ": " + PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error(msg);
    }
    if (keep) return r;
    PQclear(r);
    return nullptr;
  }
  PGconn* c_;
};

// --- the server --------------------------------------------------------------------------

class Server {
 public:
  static Server& get() {
    static Server s;
    return s;
  }
  const std::string& conninfo() const { return conninfo_; }
  bool fsync() const { return fsync_; }

  ~Server() {
    if (dir_.empty() || ::getpid() != owner_) return;  // not ours, or a forked child
    std::string cmd = "bash '" BEEHIVE_PG_SCRIPT "' stop '" + dir_.string() + "' >/dev/null";
    (void)!std::system(cmd.c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  Server() : owner_(::getpid()) {
    if (const char* env = std::getenv("BEEHIVE_BENCH_PG"); env && *env) {
      conninfo_ = env;
    } else {
      ::setenv("BEEHIVE_PG_PORT", "55433", /*overwrite=*/0);
      dir_ = std::filesystem::temp_directory_path() /
             ("beehive-bench-pg-" + std::to_string(::getpid()));
      std::string cmd = "bash '" BEEHIVE_PG_SCRIPT "' start '" + dir_.string() + "'";
      FILE* p = ::popen(cmd.c_str(), "r");
      char buf[512];
      while (p && std::fgets(buf, sizeof buf, p)) conninfo_ += buf;
      if (!p || ::pclose(p) != 0 || conninfo_.empty())
        throw std::runtime_error("bench_postgres: the server did not start: " + cmd);
      while (!conninfo_.empty() && conninfo_.back() == '\n') conninfo_.pop_back();
      // The test server runs without fsync; a benchmark of commits wants it back.
      Pg admin(conninfo_);
      admin.exec("ALTER SYSTEM SET fsync = on");
      admin.exec("ALTER SYSTEM SET full_page_writes = on");
      admin.exec("SELECT pg_reload_conf()");
      std::this_thread::sleep_for(200ms);  // the reload is asynchronous
    }
    Pg c(conninfo_);
    PGresult* r = PQexec(c.raw(), "SHOW fsync");
    fsync_ = PQntuples(r) == 1 && std::string(PQgetvalue(r, 0, 0)) == "on";
    PQclear(r);
  }

  pid_t owner_;
  std::filesystem::path dir_;
  std::string conninfo_;
  bool fsync_ = false;
};

const std::string& conninfo() { return Server::get().conninfo(); }

// A schema of its own for one run, dropped (with everything in it) at the end.
struct Schema {
  Schema() : name("bench_" + std::to_string(::getpid()) + "_" + std::to_string(++counter)) {}
  ~Schema() {
    if (::getpid() != owner) return;
    try {
      Pg c(conninfo());
      c.exec("DROP SCHEMA IF EXISTS " + c.quote(name) + " CASCADE");
    } catch (const std::exception&) {
    }
  }
  Schema(const Schema&) = delete;
  Schema& operator=(const Schema&) = delete;
  static inline int counter = 0;
  std::string name;
  pid_t owner = ::getpid();
};

// A schema with beehive's tables and kRows rows written by raw INSERTs; the raw
// statements below work on it.
constexpr const char* kRawInsert =
    R"(INSERT INTO objects (id, "group", kind, spec, generation, resource_version, created_at,
       updated_at) VALUES ($1, 'bench.io', 'Item', $2, 1, $1, $3, $3))";
constexpr const char* kRawUpdate =
    "UPDATE objects SET spec = $2, spec_version = 0, generation = $3, resource_version = $4, "
    "updated_at = $5 WHERE id = $1";
// The object columns beehive reads (less its conditions subquery, empty here).
constexpr const char* kRawSelect =
    R"(SELECT id, "group", kind, slug, spec, spec_version, status, status_version, generation,
       observed_generation, observed_at, resource_version, deletion_requested_at, finalizers,
       created_at, updated_at, labels FROM objects WHERE id = $1)";

struct RawTable {
  explicit RawTable(int rows) {
    beehive::postgres::open(conninfo(), {.schema = schema.name});  // creates the tables
    Pg c(conninfo(), schema.name);
    c.prepare("ins", kRawInsert);
    for (int i = 1; i <= rows; ++i)
      PQclear(c.run("ins", {std::to_string(i), spec_text(-1), std::to_string(now_millis())}));
  }
  Schema schema;
};

// A beehive (not started unless asked) on a fresh schema holding kRows objects.
struct Hive {
  explicit Hive(int rows = kRows) {
    store = beehive::postgres::open(conninfo(), {.schema = schema.name});
    bh = std::make_unique<beehive::Beehive>(store);
    items.emplace(*bh, item_kind);
    for (int i = 0; i < rows; ++i) items->create(ctx, Spec{"item", -1});
  }
  ~Hive() {
    if (stop) stop(ctx);
    items.reset();
    bh.reset();
    store.reset();
  }
  Schema schema;
  std::shared_ptr<beehive::Store> store;
  std::unique_ptr<beehive::Beehive> bh;
  std::optional<Objects> items;
  beehive::Stop stop;
  Context ctx;
};

std::uint64_t writer_transactions(const beehive::Beehive& bh) {
  auto writer = bh.store_writer();
  caf::scoped_actor self{writer->home_system(), true};
  std::uint64_t n = 0;
  self->request(writer, caf::infinite, beehive::inspect_atom::value)
      .receive([&](const beehive::store_writer_state& s) { n = s.transactions; },
               [](caf::error&) {});
  return n;
}

// =========================================================================================
// a. Blocking update
// =========================================================================================

void BM_PgRawUpdate(benchmark::State& state) {
  RawTable t(kRows);
  Pg c(conninfo(), t.schema.name);
  c.prepare("upd", kRawUpdate);
  std::int64_t rv = kRows, generation = 1;
  int i = 0;
  for (auto _ : state) {
    c.exec("BEGIN");
    PQclear(c.run("upd", {std::to_string(kTarget), spec_text(i++), std::to_string(++generation),
                          std::to_string(++rv), std::to_string(now_millis())}));
    c.exec("COMMIT");
  }
}

// The same transaction in one round trip: the least a client can pay for it.
void BM_PgRawUpdatePipelined(benchmark::State& state) {
  RawTable t(kRows);
  Pg c(conninfo(), t.schema.name);
  c.prepare("begin", "BEGIN");
  c.prepare("upd", kRawUpdate);
  c.prepare("commit", "COMMIT");
  std::int64_t rv = kRows, generation = 1;
  int i = 0;
  for (auto _ : state) {
    c.pipeline({{"begin", {}},
                {"upd",
                 {std::to_string(kTarget), spec_text(i++), std::to_string(++generation),
                  std::to_string(++rv), std::to_string(now_millis())}},
                {"commit", {}}});
  }
}

void BM_PgUpdate(benchmark::State& state) {
  Hive h;
  int i = 0;
  std::int64_t expected_generation = 1;
  const auto tx0 = writer_transactions(*h.bh);
  const auto st0 = beehive::store::statements_run();
  for (auto _ : state) {
    auto obj = h.items->update(h.ctx, kTarget, Spec{"item", i++});
    benchmark::DoNotOptimize(obj.generation);
    ++expected_generation;
  }
  if (h.items->get(h.ctx, kTarget).generation != expected_generation)
    state.SkipWithError("an update did not bump the generation");
  // Statements run one by one (a round trip each); the transaction's opening and its
  // commit are pipelines of their own, one round trip each, not counted here.
  state.counters["stmts/op"] = static_cast<double>(beehive::store::statements_run() - st0) /
                               static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
  state.counters["tx/op"] = static_cast<double>(writer_transactions(*h.bh) - tx0) /
                            static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
}

// =========================================================================================
// b. Point read
// =========================================================================================

// What hand-written code fills from the row.
struct RawRow {
  std::int64_t id = 0, generation = 0, resource_version = 0, created_at = 0, updated_at = 0;
  std::string group, kind, spec, finalizers;
  std::optional<std::string> slug, status, labels;
  std::optional<std::int64_t> observed_generation, observed_at, deletion_requested_at;
  int spec_version = 0, status_version = 0;
};

std::optional<std::string> opt_text(PGresult* r, int col) {
  if (PQgetisnull(r, 0, col)) return std::nullopt;
  return std::string(PQgetvalue(r, 0, col), static_cast<std::size_t>(PQgetlength(r, 0, col)));
}
std::int64_t i64(PGresult* r, int col) { return std::strtoll(PQgetvalue(r, 0, col), nullptr, 10); }
std::optional<std::int64_t> opt_i64(PGresult* r, int col) {
  if (PQgetisnull(r, 0, col)) return std::nullopt;
  return i64(r, col);
}

void BM_PgRawGet(benchmark::State& state) {
  RawTable t(kRows);
  Pg c(conninfo(), t.schema.name);
  c.prepare("get", kRawSelect);
  const std::vector<std::string> params{std::to_string(kTarget)};
  for (auto _ : state) {
    PGresult* r = c.run("get", params);
    if (PQntuples(r) != 1) {
      PQclear(r);
      state.SkipWithError("row not found");
      break;
    }
    RawRow row;
    row.id = i64(r, 0);
    row.group = PQgetvalue(r, 0, 1);
    row.kind = PQgetvalue(r, 0, 2);
    row.slug = opt_text(r, 3);
    row.spec = PQgetvalue(r, 0, 4);
    row.spec_version = static_cast<int>(i64(r, 5));
    row.status = opt_text(r, 6);
    row.status_version = static_cast<int>(i64(r, 7));
    row.generation = i64(r, 8);
    row.observed_generation = opt_i64(r, 9);
    row.observed_at = opt_i64(r, 10);
    row.resource_version = i64(r, 11);
    row.deletion_requested_at = opt_i64(r, 12);
    row.finalizers = PQgetvalue(r, 0, 13);
    row.created_at = i64(r, 14);
    row.updated_at = i64(r, 15);
    row.labels = opt_text(r, 16);
    PQclear(r);
    benchmark::DoNotOptimize(row);
  }
}

void BM_PgGet(benchmark::State& state) {
  Hive h;
  const auto st0 = beehive::store::statements_run();
  for (auto _ : state) {
    auto obj = h.items->get(h.ctx, kTarget);
    benchmark::DoNotOptimize(obj);
  }
  state.counters["stmts/op"] = static_cast<double>(beehive::store::statements_run() - st0) /
                               static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
}

// =========================================================================================
// c. Group commit
// =========================================================================================

constexpr int kPerThread = 64;

// Runs `threads` threads, each calling write(thread, i) kPerThread times once they are all
// ready; returns the wall time from the start signal to the last return.
template <class Write>
double timed_threads(int threads, Write write) {
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      go.wait(false);
      for (int i = 0; i < kPerThread; ++i) write(t, i);
    });
  std::this_thread::sleep_for(1ms);  // every thread reaches its wait
  const auto t0 = Clock::now();
  go.store(true);
  go.notify_all();
  for (auto& t : ts) t.join();
  return seconds_since(t0);
}

// Times `commit(thread)` kPerThread times on each of `threads` threads at once, each call
// committing `rows_per_call` rows; reports rows/s.
template <class Commit>
void time_raw_commits(benchmark::State& state, int threads, int rows_per_call, Commit commit) {
  std::int64_t rows = 0;
  double timed = 0;
  for (auto _ : state) {
    const double s = timed_threads(threads, [&](int thread, int) { commit(thread); });
    state.SetIterationTime(s);
    timed += s;
    rows += std::int64_t{threads} * kPerThread * rows_per_call;
  }
  state.counters["rows/s"] = static_cast<double>(rows) / timed;
  state.counters["fsync"] = Server::get().fsync() ? 1 : 0;
}

// Single-row INSERTs, each committed on its own (autocommit: one round trip per row),
// from `conns` connections at once.
void BM_PgRawCommit(benchmark::State& state) {
  const int conns = static_cast<int>(state.range(0));
  RawTable t(0);
  std::vector<std::unique_ptr<Pg>> cs;
  for (int i = 0; i < conns; ++i) {
    cs.push_back(std::make_unique<Pg>(conninfo(), t.schema.name));
    cs.back()->prepare("ins", kRawInsert);
  }
  const std::string spec = spec_text(3);
  std::atomic<std::int64_t> next_id{0};
  time_raw_commits(state, conns, 1, [&](int thread) {
    PQclear(
        cs[thread]->run("ins", {std::to_string(++next_id), spec, std::to_string(now_millis())}));
  });
}

// Batches of 8 rows, each one transaction sent in one round trip: what a perfect group
// commit of 8 callers could reach from one connection. shape:0 is BEGIN, 8 INSERTs,
// COMMIT; shape:1 adds what a beehive transaction writes besides (the change log's 8
// rows, the counters' lock and update, the NOTIFY).
void BM_PgRawBatch(benchmark::State& state) {
  const bool beehive_shape = state.range(0) == 1;
  RawTable t(0);
  Pg c(conninfo(), t.schema.name);
  c.prepare("begin", "BEGIN");
  c.prepare("ins", kRawInsert);
  c.prepare("log", R"(INSERT INTO change_log (resource_version, object_id, "group", kind, parts,
                      at) VALUES ($1, $1, 'bench.io', 'Item', 1, $2))");
  c.prepare("lock",
            "SELECT value FROM beehive_meta WHERE key IN ('resource_version', "
            "'object_id') FOR UPDATE");
  c.prepare("counters",
            "UPDATE beehive_meta SET value = $1 WHERE key IN "
            "('resource_version', 'object_id')");
  c.prepare("notify", "SELECT pg_notify($1, '1')");
  c.prepare("commit", "COMMIT");
  const std::string spec = spec_text(3), channel = "bench_" + t.schema.name;
  std::int64_t next_id = 0, rows = 0;
  for (auto _ : state) {
    std::vector<std::pair<const char*, std::vector<std::string>>> s{{"begin", {}}};
    if (beehive_shape) s.push_back({"lock", {}});
    for (int i = 0; i < 8; ++i) {
      auto id = std::to_string(++next_id);
      auto now = std::to_string(now_millis());
      s.push_back({"ins", {id, spec, now}});
      if (beehive_shape) s.push_back({"log", {id, now}});
    }
    if (beehive_shape) {
      s.push_back({"counters", {std::to_string(next_id)}});
      s.push_back({"notify", {channel}});
    }
    s.push_back({"commit", {}});
    c.pipeline(s);
    rows += 8;
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsRate);
  state.counters["fsync"] = Server::get().fsync() ? 1 : 0;
}

// `rows` rows in flight split over `conns` connections, each committing batches of
// rows/conns rows in one round trip with the rows beehive writes, but nothing that
// serialises the commits (no lock held through them, versions from a sequence, no NOTIFY,
// which PostgreSQL serialises itself): what a group commit with several groups in flight
// at once could reach at best with 8 blocking callers (rows:8).
void BM_PgRawSplitBatch(benchmark::State& state) {
  const int conns = static_cast<int>(state.range(0));
  const int per = static_cast<int>(state.range(1)) / conns;
  RawTable t(0);
  {
    Pg c(conninfo(), t.schema.name);
    c.exec("CREATE SEQUENCE bench_versions");
  }
  std::vector<std::unique_ptr<Pg>> cs;
  for (int i = 0; i < conns; ++i) {
    auto c = std::make_unique<Pg>(conninfo(), t.schema.name);
    c->prepare("begin", "BEGIN");
    c->prepare("ins", kRawInsert);
    c->prepare("log", R"(INSERT INTO change_log (resource_version, object_id, "group", kind, parts,
                      at) VALUES ($1, $1, 'bench.io', 'Item', 1, $2))");
    c->prepare("seq", "SELECT nextval('bench_versions')");
    c->prepare("commit", "COMMIT");
    cs.push_back(std::move(c));
  }
  const std::string spec = spec_text(3);
  std::atomic<std::int64_t> next_id{0};
  time_raw_commits(state, conns, per, [&](int thread) {
    std::vector<std::pair<const char*, std::vector<std::string>>> st{{"begin", {}}, {"seq", {}}};
    for (int i = 0; i < per; ++i) {
      auto id = std::to_string(++next_id);
      auto now = std::to_string(now_millis());
      st.push_back({"ins", {id, spec, now}});
      st.push_back({"log", {id, now}});
    }
    st.push_back({"commit", {}});
    cs[thread]->pipeline(st);
  });
}

void BM_PgGroupCommit(benchmark::State& state) {
  const int callers = static_cast<int>(state.range(0));
  Hive h(1);  // the writer's statements are prepared
  const auto tx0 = writer_transactions(*h.bh);
  const auto st0 = beehive::store::statements_run();
  std::atomic<int> failures{0};
  std::int64_t rows = 0;
  double timed = 0;
  for (auto _ : state) {
    const double s = timed_threads(callers, [&](int thread, int i) {
      try {
        h.items->create(h.ctx, Spec{"item", thread * kPerThread + i});
      } catch (const std::exception&) {
        failures.fetch_add(1);
      }
    });
    state.SetIterationTime(s);
    timed += s;
    rows += callers * kPerThread;
  }
  const auto commits = writer_transactions(*h.bh) - tx0;
  const auto statements = beehive::store::statements_run() - st0;  // before the check's list
  if (failures.load() != 0 || h.items->list(h.ctx).size() != static_cast<std::size_t>(rows + 1)) {
    state.SkipWithError("a create failed or was lost");
    return;
  }
  state.counters["rows/s"] = static_cast<double>(rows) / timed;
  state.counters["rows/commit"] =
      commits ? static_cast<double>(rows) / static_cast<double>(commits) : 0;
  state.counters["stmts/row"] = static_cast<double>(statements) / static_cast<double>(rows);
  state.counters["fsync"] = Server::get().fsync() ? 1 : 0;
}

// =========================================================================================
// d. Watch latency across processes
// =========================================================================================

// Written by the forked writer, read here once it has answered: steady_clock is
// CLOCK_MONOTONIC, one clock for both processes.
struct Shared {
  std::atomic<std::int64_t> sent_ns{0};  // just before the write (or NOTIFY) was called
  std::atomic<std::int64_t> done_ns{0};  // when it returned
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// A forked process that writes on request: 'g' -> one write, then an answer byte; 'q'
// quits. Forked before this process starts any thread of the run (CAF's, libpq's
// none), so the child starts clean and builds its own beehive.
class Writer {
 public:
  enum class Mode { raw_notify, raw_update_notify, beehive_update };

  Writer(Mode mode, const std::string& schema, const std::string& channel) {
    (void)conninfo();  // the server is known (or started) by this process, not the child
    shared_ = static_cast<Shared*>(
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (shared_) Shared;
    int to_child[2], to_parent[2];
    if (::pipe(to_child) != 0 || ::pipe(to_parent) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to_child[1]);
      ::close(to_parent[0]);
      int rc = 0;
      try {
        serve(mode, schema, channel, to_child[0], to_parent[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_postgres writer: %s\n", e.what());
        rc = 1;
      }
      ::_exit(rc);  // no static destructors: the server is the parent's
    }
    ::close(to_child[0]);
    ::close(to_parent[1]);
    out_ = to_child[1];
    in_ = to_parent[0];
    answer();  // ready
  }
  ~Writer() {
    char q = 'q';
    (void)!::write(out_, &q, 1);
    ::close(out_);
    ::close(in_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::munmap(shared_, sizeof(Shared));
  }

  void request() {
    char g = 'g';
    if (::write(out_, &g, 1) != 1) throw std::runtime_error("writer gone");
  }
  void answer() {
    char a = 0;
    if (::read(in_, &a, 1) != 1 || a != 'a') throw std::runtime_error("writer failed");
  }
  Shared& shared() { return *shared_; }

 private:
  void serve(Mode mode, const std::string& schema, const std::string& channel, int in, int out) {
    auto reply = [&] {
      char a = 'a';
      (void)!::write(out, &a, 1);
    };
    std::optional<Pg> pg;
    std::shared_ptr<beehive::Store> store;
    std::unique_ptr<beehive::Beehive> bh;
    std::optional<Objects> items;
    Context ctx;
    std::string notify;
    if (mode == Mode::raw_notify) {
      pg.emplace(conninfo());
      notify = "NOTIFY " + pg->quote(channel) + ", 'x'";
    } else if (mode == Mode::raw_update_notify) {
      pg.emplace(conninfo(), schema);
      pg->prepare("upd", kRawUpdate);
      notify = "NOTIFY " + pg->quote(channel) + ", 'x'";
    } else {
      store = beehive::postgres::open(conninfo(), {.schema = schema});
      bh = std::make_unique<beehive::Beehive>(store);
      items.emplace(*bh, item_kind);
      items->update(ctx, 1, Spec{"item", 0});  // a first write: statements prepared
    }
    reply();
    int n = 0;
    char c = 0;
    while (::read(in, &c, 1) == 1 && c == 'g') {
      shared_->sent_ns.store(now_ns());
      if (mode == Mode::raw_update_notify) {  // the write and its notification, committed
        pg->exec("BEGIN");
        PQclear(pg->run("upd", {std::to_string(kTarget), spec_text(++n), std::to_string(n + 1),
                                std::to_string(kRows + n), std::to_string(now_millis())}));
        pg->exec(notify);
        pg->exec("COMMIT");
      } else if (pg) {
        pg->exec(notify);
      } else
        items->update(ctx, 1, Spec{"item", ++n});
      shared_->done_ns.store(now_ns());
      reply();
    }
  }

  Shared* shared_ = nullptr;
  pid_t pid_ = -1;
  int out_ = -1, in_ = -1;
};

// Counters shared by both sides: the write's own time, and what is left for delivery.
void latency_counters(benchmark::State& state, double write_s, double total_s) {
  const double n = static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
  state.counters["write_us"] = write_s * 1e6 / n;
  state.counters["latency_us"] = total_s * 1e6 / n;
  // Delivered after the writer's call returned (its commit acknowledged): the closest
  // figure to commit -> delivery that both sides can measure.
  state.counters["after_write_us"] = (total_s - write_s) * 1e6 / n;
}

// Mode::raw_notify: a bare NOTIFY; Mode::raw_update_notify: BEGIN, UPDATE, NOTIFY, COMMIT
// on a table of beehive's shape (what an application would write by hand to have its
// changes heard).
void raw_notify_latency(benchmark::State& state, Writer::Mode mode) {
  const std::string channel = "bench_" + std::to_string(::getpid());
  std::optional<RawTable> table;
  if (mode == Writer::Mode::raw_update_notify) table.emplace(kRows);
  Writer w(mode, table ? table->schema.name : "", channel);
  Pg listener(conninfo());
  listener.exec("LISTEN " + listener.quote(channel));
  double write_s = 0, total_s = 0;
  for (auto _ : state) {
    w.request();
    bool heard = false;
    while (!heard) {
      pollfd fd{PQsocket(listener.raw()), POLLIN, 0};
      if (::poll(&fd, 1, 5000) <= 0) break;
      PQconsumeInput(listener.raw());
      while (PGnotify* n = PQnotifies(listener.raw())) {
        heard = true;
        PQfreemem(n);
      }
    }
    const auto delivered = now_ns();
    w.answer();
    if (!heard) {
      state.SkipWithError("no notification within 5 s");
      break;
    }
    const double s = static_cast<double>(delivered - w.shared().sent_ns.load()) * 1e-9;
    state.SetIterationTime(s);
    total_s += s;
    write_s += static_cast<double>(w.shared().done_ns.load() - w.shared().sent_ns.load()) * 1e-9;
  }
  latency_counters(state, write_s, total_s);
}

void BM_PgRawNotify(benchmark::State& state) {
  raw_notify_latency(state, Writer::Mode::raw_notify);
}
void BM_PgRawUpdateNotify(benchmark::State& state) {
  raw_notify_latency(state, Writer::Mode::raw_update_notify);
}

void BM_PgWatchLatency(benchmark::State& state) {
  Schema schema;
  {  // the tables and the object, made before the fork (and closed: no thread left)
    auto store = beehive::postgres::open(conninfo(), {.schema = schema.name});
    beehive::Beehive bh(store);
    Context ctx;
    Objects(bh, item_kind).create(ctx, Spec{"item", -1});
  }
  Writer w(Writer::Mode::beehive_update, schema.name, "");
  auto store = beehive::postgres::open(conninfo(), {.schema = schema.name});
  auto bh = std::make_unique<beehive::Beehive>(store);
  Context ctx;
  auto stop = bh->start(ctx);
  Objects items(*bh, item_kind);
  auto changes = items.watch_list(ctx);
  // The snapshot (one object, at its newest version so far).
  std::int64_t seen = 0;
  if (auto ch = changes.next_for(5s)) seen = ch->object.resource_version;
  double write_s = 0, total_s = 0;
  for (auto _ : state) {
    w.request();
    bool delivered = false;
    while (!delivered) {
      auto ch = changes.next_for(5s);
      if (!ch) break;
      delivered = ch->object.resource_version > seen;
      seen = std::max(seen, ch->object.resource_version);
    }
    const auto at = now_ns();
    w.answer();
    if (!delivered) {
      state.SkipWithError("no change delivered within 5 s");
      break;
    }
    const double s = static_cast<double>(at - w.shared().sent_ns.load()) * 1e-9;
    state.SetIterationTime(s);
    total_s += s;
    write_s += static_cast<double>(w.shared().done_ns.load() - w.shared().sent_ns.load()) * 1e-9;
  }
  latency_counters(state, write_s, total_s);
  changes.close();
  stop(ctx);
}

#define PG_BENCH(fn) BENCHMARK(fn)->UseRealTime()->Unit(benchmark::kMicrosecond)

PG_BENCH(BM_PgRawUpdate);
PG_BENCH(BM_PgRawUpdatePipelined);
PG_BENCH(BM_PgUpdate);
PG_BENCH(BM_PgRawGet);
PG_BENCH(BM_PgGet);
BENCHMARK(BM_PgRawCommit)
    ->ArgName("conns")
    ->Arg(1)
    ->Arg(8)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PgGroupCommit)
    ->ArgName("callers")
    ->Arg(1)
    ->Arg(8)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PgRawBatch)
    ->ArgName("shape")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PgRawSplitBatch)
    ->ArgNames({"conns", "rows"})
    ->Args({1, 8})
    ->Args({2, 8})
    ->Args({4, 8})
    ->Args({2, 16})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PgRawNotify)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PgRawUpdateNotify)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PgWatchLatency)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
