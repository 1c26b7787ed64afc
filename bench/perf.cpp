// Issue 9: group commit, reads and converged writes without the writer, blocking-write
// latency and its CPU, idle cost, and scale. Every ratio divides two figures measured in
// the same run of this binary (never a remembered number).
//
// Each case runs on a fresh database file (WAL) in a temp dir under $BENCH_DB_DIR
// (default: the system temp dir, /tmp), except the scale cases, which share one populated
// file per object count.
//
// 1. Group commit (synchronous = FULL)
//   BM_RawFullCommit/batch:1      one thread: BEGIN IMMEDIATE, one INSERT into a table
//                                 shaped like beehive's `objects`, COMMIT. Baseline.
//   BM_RawFullCommit/batch:8      the same with 8 INSERTs per commit: the ceiling a group
//                                 commit of 8 callers could approach (x_raw).
//   BM_GroupCommit/callers:N/caf_sharing:S
//                                 N threads (1, 4, 8) each doing blocking Client::create
//                                 on one Beehive opened with Synchronous::full; one
//                                 iteration = N x 64 creates, timed from the release of
//                                 the threads to the last join (manual time). Counters:
//                                 rows/s, rows/commit (writer transactions, inspect_atom),
//                                 cpu_us/row (process CPU) and x_raw = rows/s /
//                                 BM_RawFullCommit/batch:1 rows/s (target >= 5 at N = 8).
//                                 S = 1: the diagnostic CAF variant (see `Caf` below).
//
// 2. Reads and blocking-write latency (synchronous = NORMAL)
//   BM_RawPointSelect             prepared SELECT of the 16 object columns by id on a
//                                 read-only connection, read into a struct. Baseline.
//   BM_BeehiveGet                 Client::get, decoded.            x_raw target <= 1.3
//   BM_RawPointSelectWhileWriting the raw select while another thread commits raw updates of
//                                 another row (100 us pause between them); x_select: its
//                                 slowdown against BM_RawPointSelect.
//   BM_BeehiveGetWhileWriting     get while another thread issues blocking updates of another
//                                 object (same pause); x_raw against the raw select while
//                                 writing, x_get against get alone.
//   BM_RawUpdate                  BEGIN IMMEDIATE, UPDATE objects SET spec = ... (beehive's
//                                 statement), COMMIT; new spec every call. Baseline.
//   BM_BeehiveUpdate/caf_own      blocking Client::update, new spec every call.
//                                                                  x_raw target <= 2
//   BM_BeehiveUpdate/caf_sharing  the same, diagnostic CAF variant; x_own compares them.
//   Both write cases report cpu_us/op: process CPU (CLOCK_PROCESS_CPUTIME_ID, all threads)
//   per call, beside the wall time per call.
//
// 3. Converged no-ops (NORMAL); baseline BM_RawPointSelect, target <= 1.5
//   BM_NoopUpdate                 Client::update with the stored spec
//   BM_NoopUpdateStatus           ControllerClient::update_status with the stored status at
//                                 the recorded generation
//   Both check that the writer committed no transaction during the loop.
//
// 4. Idle cost
//   BM_Idle/objects:N/caf_sharing:S
//                                 a started beehive, 5 kinds with controllers that write
//                                 status once, N settled objects in all, resync interval
//                                 2 s (which is also the GC cadence). After convergence and
//                                 1 s of settling, it measures $BENCH_IDLE_SECONDS (default
//                                 10; the issue asks for 60) of idleness: process CPU,
//                                 statements_run() delta, writer transactions, PRAGMA
//                                 data_version seen from another connection (changes only
//                                 when a commit wrote pages), WAL size, context switches,
//                                 reconciles. N = 100 and 10 000: the same cost at both
//                                 shows that resync reads do not scan settled objects.
//                                 It fails if data_version or the WAL size changed.
//                                 Expected statements: one unsettled-index read per kind per
//                                 resync, plus the GC pass (2 reads) per cadence.
//
// 5. Scale (NORMAL), N = 1 000, 10 000, 100 000 objects of one kind, created inside
//    ControllerClient::within blocks of 5 000
//   BM_RawScaleList/objects:N     raw SELECT of all columns of the kind, ORDER BY id, into
//                                 structs, on a read-only connection. Baseline.
//   BM_ScaleList/objects:N        Client::list, decoded. objects/s, x_raw.
//   BM_ScaleConverge/objects:N/workers:W/caf_sharing:S
//                                 one iteration: fresh file with N unsettled objects;
//                                 start; time until the controller (W workers) has written
//                                 every status once = the convergence time (objects/s,
//                                 us/object). Then, untimed by the framework but reported:
//                                 stop, a new Beehive over the settled file, start, time
//                                 until every object has been reconciled once more
//                                 (restart_ms: the startup reconcile of a settled store,
//                                 whose status writes are converged no-ops), 1 s idle, then
//                                 VmRSS (/proc/self/status, after malloc_trim) as
//                                 rss_MiB and its growth over the process before the
//                                 iteration (rss_delta_MiB). Run one case alone for a clean
//                                 absolute RSS:
//     bench_perf --benchmark_filter='ScaleConverge/objects:100000/workers:1/caf_sharing:0'
//
// The whole binary takes about 2 minutes on a quiet 2-vCPU VM, more when other work
// competes (idle cases 3 x ~13 s, the 100 000-object convergence cases 20-35 s each).
// Sections alone:
//   python3 bench/ratios.py --suite commit   (7 interleaved repetitions, ratio of medians)
//   bench_perf --benchmark_filter='PointSelect|BeehiveGet|Update|Noop' --benchmark_repetitions=5
//   BENCH_IDLE_SECONDS=60 bench_perf --benchmark_filter=Idle
//   bench_perf --benchmark_filter=Scale
//
// Ratios: a baseline benchmark stores its per-operation figure when it finishes; the
// benchmark compared with it reports x_raw (or x_get) when that baseline ran earlier in
// the same process. Filtering a baseline out drops the ratio counters.
//
// Times are wall-clock (UseRealTime or manual time): a blocking beehive call sleeps or
// spins while other threads work, so the caller's CPU time says little.

#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include <beehive/actors.hpp>

#include "common.hpp"
#include "store/sqlite/sqlite_connection.hpp"  // beehive::store::statements_run (private header)

namespace {

using namespace bench;
using namespace std::chrono_literals;
using beehive::Context;
using beehive::ControllerClient;
using beehive::ObjectID;
using beehive::Result;
using beehive::sqlite::Synchronous;

const beehive::GroupKind item_kind{"acme.com", "Item"};

// What beehive stores for Spec{"item", n} and Status{"Ready", seen}: compact JSON with
// sorted keys. The raw cases bind the same bytes.
std::string spec_text(int n) { return R"({"n":)" + std::to_string(n) + R"(,"name":"item"})"; }

// --- process measurements ----------------------------------------------------------------

// CPU time of every thread of the process, in seconds.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Context switches of the whole process (voluntary: a thread went to sleep).
struct Switches {
  long voluntary = 0, involuntary = 0;
};
Switches switches() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return {ru.ru_nvcsw, ru.ru_nivcsw};
}

// VmRSS of this process in KiB (/proc/self/status), 0 when unavailable.
long vmrss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return 0;
}

// RSS with freed heap returned to the system first, so that earlier cases of the run
// weigh less.
double trimmed_rss_mib() {
  ::malloc_trim(0);
  return static_cast<double>(vmrss_kib()) / 1024.0;
}

std::uint64_t statements() { return beehive::store::statements_run(); }

// Transactions the store writer has committed since it started (inspect_atom).
std::uint64_t writer_transactions(const beehive::Beehive& bh) {
  auto writer = bh.store_writer();
  caf::scoped_actor self{writer->home_system(), true};
  std::uint64_t n = 0;
  self->request(writer, caf::infinite, beehive::inspect_atom::value)
      .receive([&](const beehive::store_writer_state& s) { n = s.transactions; },
               [](caf::error&) {});
  return n;
}

// Wall and process-CPU time of a timed loop.
struct Stopwatch {
  Clock::time_point wall0 = Clock::now();
  double cpu0 = process_cpu_seconds();
  double wall() const { return seconds_since(wall0); }
  double cpu() const { return process_cpu_seconds() - cpu0; }
};

// --- same-run baselines ------------------------------------------------------------------

std::map<std::string, double>& baselines() {
  static std::map<std::string, double> m;
  return m;
}

void set_baseline(const std::string& key, double value) { baselines()[key] = value; }

// counter = value / baseline, when the baseline ran earlier in this process.
void ratio_counter(benchmark::State& state, const char* counter, const std::string& key,
                   double value) {
  auto it = baselines().find(key);
  if (it != baselines().end() && it->second > 0) state.counters[counter] = value / it->second;
}

// Per-operation wall time (us) of a loop, the rate, and its process CPU per operation.
double finish_loop(benchmark::State& state, const Stopwatch& sw) {
  const double n = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  const double us_per_op = sw.wall() * 1e6 / n;
  state.counters["cpu_us/op"] = sw.cpu() * 1e6 / n;
  set_rate(state);
  return us_per_op;
}

// --- raw SQLite --------------------------------------------------------------------------

constexpr const char* kRawInsert = R"sql(
INSERT INTO objects ("group", kind, slug, spec, spec_version, generation, resource_version,
                     finalizers, created_at, updated_at)
VALUES ('acme.com', 'Item', NULL, ?1, 0, 1, ?2, '[]', ?3, ?3))sql";

constexpr const char* kRawColumns = R"sql(
SELECT id, "group", kind, slug, spec, spec_version, status, status_version, generation,
       observed_generation, observed_at, resource_version, deletion_requested_at,
       finalizers, created_at, updated_at FROM objects )sql";

const std::string kRawSelect = std::string(kRawColumns) + "WHERE id = ?1";
const std::string kRawList =
    std::string(kRawColumns) + R"(WHERE "group" = 'acme.com' AND kind = 'Item' ORDER BY id)";

// A write connection set up like beehive's (WAL, synchronous, foreign keys).
struct RawDb {
  RawDb(const fs::path& file, Synchronous sync)
      : db(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, kBusyTimeoutMs) {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(sync == Synchronous::full ? "PRAGMA synchronous = FULL"
                                      : "PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
    create_raw_schema(db);
  }
  void populate(int n) {
    SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement ins(db, kRawInsert);
    for (int i = 0; i < n; ++i) {
      ins.bind(1, spec_text(-1));
      ins.bind(2, static_cast<std::int64_t>(i + 1));
      ins.bind(3, now_millis());
      ins.exec();
      ins.reset();
    }
    txn.commit();
  }
  SQLite::Database db;
};

std::int64_t scalar(const fs::path& file, const std::string& sql) {
  SQLite::Database db(file.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
  return db.execAndGet(sql).getInt64();
}

// --- beehive -----------------------------------------------------------------------------

// Where a beehive's actors run. `own`: the actor system a Beehive builds for itself (CAF's
// defaults: the work-stealing scheduler, whose idle workers poll). `sharing`: an
// application actor system with CAF's `sharing` scheduler policy (idle workers block on a
// condition variable), handed to Beehive(sys, store). The `sharing` variants are a
// diagnostic: they show how much of a figure is CAF's scheduler polling, without any
// change to the library.
enum class Caf { own, sharing };

struct SharingSystem {
  SharingSystem() {
    beehive::add_message_types(cfg);
    cfg.set("scheduler.policy", caf::atom("sharing"));
    sys.emplace(cfg);
  }
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

// A store and a beehive over an existing path (the caller owns the file, so that a second
// Beehive can reopen it). Members go in reverse order: the beehive before the store, the
// actor system (for Caf::sharing) last.
struct Plane {
  explicit Plane(const fs::path& file, Synchronous sync = Synchronous::normal,
                 std::chrono::milliseconds resync = 0ms, Caf caf = Caf::own) {
    beehive::sqlite::Options opts;
    opts.synchronous = sync;
    store = beehive::sqlite::open(file, opts);
    if (caf == Caf::sharing) {
      system = std::make_unique<SharingSystem>();
      auto& sys = *system->sys;
      if (resync.count() > 0)
        bh = std::make_unique<beehive::Beehive>(sys, store, beehive::with_resync_interval(resync));
      else
        bh = std::make_unique<beehive::Beehive>(sys, store);
    } else if (resync.count() > 0) {
      bh = std::make_unique<beehive::Beehive>(store, beehive::with_resync_interval(resync));
    } else {
      bh = std::make_unique<beehive::Beehive>(store);
    }
  }
  ~Plane() { close(); }
  Plane(const Plane&) = delete;
  Plane& operator=(const Plane&) = delete;

  void start() { stop = bh->start(ctx); }
  void close() {
    if (stop) {
      stop(ctx);
      stop = nullptr;
    }
    bh.reset();
    store.reset();
    system.reset();
  }

  std::unique_ptr<SharingSystem> system;
  std::shared_ptr<beehive::Store> store;
  std::unique_ptr<beehive::Beehive> bh;
  beehive::Stop stop;
  Context ctx;
};

// Counts calls and wakes a waiter when a target is reached.
struct Counter {
  void add() {
    count.fetch_add(1, std::memory_order_acq_rel);
    count.notify_all();
  }
  // Waits until the count reaches `target`; false after `limit`.
  bool wait_for(std::int64_t target, std::chrono::seconds limit = 600s) {
    const auto until = Clock::now() + limit;
    for (auto seen = count.load(std::memory_order_acquire); seen < target;
         seen = count.load(std::memory_order_acquire)) {
      if (Clock::now() > until) return false;
      count.wait(seen, std::memory_order_acquire);
    }
    return true;
  }
  std::atomic<std::int64_t> count{0};
};

// The controller of the idle and scale cases: records status once per generation.
auto status_writer(std::shared_ptr<Counter> reconciles) {
  return [reconciles](const Context& ctx, ControllerClient<Status>& c, const Obj& o) {
    c.update_status(ctx, o.id, o.generation, Status{"Ready", o.generation});
    reconciles->add();
    return Result{};
  };
}

// Creates `n` objects of `items`' kind inside within blocks of `block`.
void create_in_blocks(const ControllerClient<Status>& cc, const Objects& items, const Context& ctx,
                      int n, int block = 5000) {
  for (int done = 0; done < n;) {
    const int m = std::min(block, n - done);
    cc.within(ctx, [&](const Context& tx) {
      for (int i = 0; i < m; ++i) items.create(tx, Spec{"item", done + i});
    });
    done += m;
  }
}

// =========================================================================================
// 1. Group commit
// =========================================================================================

void BM_RawFullCommit(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  DbFile file("raw-full");
  RawDb raw(file.path, Synchronous::full);
  checkpoint(file.path);
  SQLite::Statement ins(raw.db, kRawInsert);
  const std::string spec = spec_text(3);
  std::int64_t rv = 0;
  Stopwatch sw;
  for (auto _ : state) {
    raw.db.exec("BEGIN IMMEDIATE");
    for (int i = 0; i < batch; ++i) {
      ins.bindNoCopy(1, spec);
      ins.bind(2, ++rv);
      ins.bind(3, now_millis());
      ins.exec();
      ins.reset();
    }
    raw.db.exec("COMMIT");
  }
  const double secs = sw.wall();
  finish_loop(state, sw);
  const double rows_per_s = static_cast<double>(state.iterations()) * batch / secs;
  state.counters["rows/s"] = rows_per_s;
  if (batch == 1)
    set_baseline("full_commit_rows/s", rows_per_s);
  else
    ratio_counter(state, "x_raw", "full_commit_rows/s", rows_per_s);
}

void BM_GroupCommit(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const Caf caf = state.range(1) ? Caf::sharing : Caf::own;
  constexpr int kPerThread = 64;
  DbFile file("group-commit");
  Plane plane(file.path, Synchronous::full, 0ms, caf);
  Objects items(*plane.bh, item_kind);
  items.create(plane.ctx, Spec{"warm", 0});  // opens the writer's statements
  checkpoint(file.path);

  const auto tx0 = writer_transactions(*plane.bh);
  const double cpu0 = process_cpu_seconds();
  std::int64_t rows = 0;
  double timed = 0;
  std::atomic<int> failures{0};
  for (auto _ : state) {
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    ts.reserve(threads);
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        go.wait(false);
        for (int i = 0; i < kPerThread; ++i) {
          try {
            items.create(plane.ctx, Spec{"item", t * kPerThread + i});
          } catch (const std::exception&) {
            failures.fetch_add(1);
          }
        }
      });
    std::this_thread::sleep_for(1ms);  // let every thread reach its wait
    const auto t0 = Clock::now();
    go.store(true);
    go.notify_all();
    for (auto& t : ts) t.join();
    const double elapsed = seconds_since(t0);
    state.SetIterationTime(elapsed);
    timed += elapsed;
    rows += threads * kPerThread;
  }
  const double cpu = process_cpu_seconds() - cpu0;
  const auto commits = writer_transactions(*plane.bh) - tx0;
  // Every create landed exactly once.
  const auto stored = scalar(file.path, "SELECT count(*) FROM objects") - 1;
  if (failures.load() != 0 || stored != rows) {
    state.SkipWithError("a create failed or was lost");
    return;
  }
  const double rows_per_s = static_cast<double>(rows) / timed;
  state.counters["rows/s"] = rows_per_s;
  state.counters["rows/commit"] =
      commits ? static_cast<double>(rows) / static_cast<double>(commits) : 0;
  state.counters["cpu_us/row"] = cpu * 1e6 / static_cast<double>(rows);
  ratio_counter(state, "x_raw", "full_commit_rows/s", rows_per_s);
}

// batch:1 is the baseline; batch:8 (8 rows per commit, one thread) is what a perfect group
// commit of 8 callers could approach.
BENCHMARK(BM_RawFullCommit)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GroupCommit)
    ->ArgNames({"callers", "caf_sharing"})
    ->Args({1, 0})
    ->Args({4, 0})
    ->Args({8, 0})
    ->Args({8, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// =========================================================================================
// 2. Reads and blocking-write latency; 3. converged no-ops
// =========================================================================================

constexpr int kRows = 100;
constexpr ObjectID kTarget = kRows / 2;  // ids 1..kRows in a fresh file

// The raw read: a prepared select of kTarget on a read-only connection, read into a
// struct. Returns microseconds per read.
double raw_select_loop(benchmark::State& state, const fs::path& file) {
  SQLite::Database ro(file.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
  SQLite::Statement sel(ro, kRawSelect);
  Stopwatch sw;
  for (auto _ : state) {
    sel.bind(1, kTarget);
    if (!sel.executeStep()) {
      state.SkipWithError("row not found");
      break;
    }
    auto r = read_raw(sel);
    sel.reset();
    benchmark::DoNotOptimize(r);
  }
  return finish_loop(state, sw);
}

void BM_RawPointSelect(benchmark::State& state) {
  DbFile file("raw-select");
  RawDb raw(file.path, Synchronous::normal);  // stays open, like beehive's writer
  raw.populate(kRows);
  checkpoint(file.path);
  set_baseline("select_us", raw_select_loop(state, file.path));
}

// A beehive over a fresh file holding kRows objects (ids 1..kRows), not started.
struct SmallHive {
  SmallHive(const std::string& tag, bool with_controller = false, Caf caf = Caf::own) : file(tag) {
    plane.emplace(file.path, Synchronous::normal, 0ms, caf);
    if (with_controller)
      cc.emplace(beehive::register_controller<Spec, Status>(
          *plane->bh, item_kind,
          [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; }));
    items.emplace(*plane->bh, item_kind);
    for (int i = 0; i < kRows; ++i) items->create(plane->ctx, Spec{"item", -1});
  }
  DbFile file;
  std::optional<Plane> plane;
  std::optional<ControllerClient<Status>> cc;
  std::optional<Objects> items;
  ~SmallHive() {
    items.reset();
    cc.reset();
    plane.reset();
  }
};

void BM_BeehiveGet(benchmark::State& state) {
  SmallHive h("get");
  checkpoint(h.file.path);
  Stopwatch sw;
  for (auto _ : state) {
    auto obj = h.items->get(h.plane->ctx, kTarget);
    benchmark::DoNotOptimize(obj);
  }
  const double us = finish_loop(state, sw);
  set_baseline("get_us", us);
  ratio_counter(state, "x_raw", "select_us", us);
}

// A writer committing every ~100 us while the measured thread reads: the raw baseline for
// BM_BeehiveGetWhileWriting. Both slow down by what SQLite and the machine impose (every
// commit resets the reader's page cache; the writer shares the 2 vCPUs).
void BM_RawPointSelectWhileWriting(benchmark::State& state) {
  DbFile file("raw-select-writing");
  RawDb raw(file.path, Synchronous::normal);
  raw.populate(kRows);
  checkpoint(file.path);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> writes{0};
  std::thread writer([&] {
    RawSpecUpdate update(raw.db, kRows);
    for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      update(kTarget + 1, spec_text(i));
      writes.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(100us);
    }
  });
  std::this_thread::sleep_for(20ms);
  const auto w0 = writes.load();
  const auto t0 = Clock::now();
  const double us = raw_select_loop(state, file.path);
  const double wall = seconds_since(t0);
  const auto w = writes.load() - w0;
  stop.store(true);
  writer.join();
  state.counters["bg_writes/s"] = static_cast<double>(w) / wall;
  ratio_counter(state, "x_select", "select_us", us);
  set_baseline("select_writing_us", us);
}

void BM_BeehiveGetWhileWriting(benchmark::State& state) {
  SmallHive h("get-writing");
  checkpoint(h.file.path);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> writes{0};
  std::thread writer([&] {
    int i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      h.items->update(h.plane->ctx, kTarget + 1, Spec{"item", i++});
      writes.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(100us);
    }
  });
  std::this_thread::sleep_for(20ms);  // the writer is running
  const auto w0 = writes.load();
  Stopwatch sw;
  for (auto _ : state) {
    auto obj = h.items->get(h.plane->ctx, kTarget);
    benchmark::DoNotOptimize(obj);
  }
  const double wall = sw.wall();
  const double us = finish_loop(state, sw);
  const auto w = writes.load() - w0;
  stop.store(true);
  writer.join();
  state.counters["bg_writes/s"] = static_cast<double>(w) / wall;
  ratio_counter(state, "x_raw", "select_writing_us", us);
  ratio_counter(state, "x_get", "get_us", us);
}

void BM_RawUpdate(benchmark::State& state) {
  DbFile file("raw-update");
  RawDb raw(file.path, Synchronous::normal);
  raw.populate(kRows);
  checkpoint(file.path);
  RawSpecUpdate update(raw.db, kRows);
  int i = 0;
  Stopwatch sw;
  for (auto _ : state) update(kTarget, spec_text(i++));  // a new value every call
  set_baseline("update_us", finish_loop(state, sw));
}

void BM_BeehiveUpdate(benchmark::State& state, Caf caf) {
  SmallHive h("update", false, caf);
  checkpoint(h.file.path);
  int i = 0;
  std::int64_t expected_generation = 1;
  Stopwatch sw;
  for (auto _ : state) {
    auto obj = h.items->update(h.plane->ctx, kTarget, Spec{"item", i++});
    benchmark::DoNotOptimize(obj.generation);
    ++expected_generation;
  }
  const double us = finish_loop(state, sw);
  if (h.items->get(h.plane->ctx, kTarget).generation != expected_generation)
    state.SkipWithError("an update did not bump the generation");
  ratio_counter(state, "x_raw", "update_us", us);
  if (caf == Caf::own)
    set_baseline("beehive_update_us", us);
  else
    ratio_counter(state, "x_own", "beehive_update_us", us);
}

void BM_NoopUpdate(benchmark::State& state) {
  SmallHive h("noop-update");
  const Spec stored{"item", -1};
  checkpoint(h.file.path);
  const auto tx0 = writer_transactions(*h.plane->bh);
  Stopwatch sw;
  for (auto _ : state) {
    auto obj = h.items->update(h.plane->ctx, kTarget, stored);
    benchmark::DoNotOptimize(obj);
  }
  const double us = finish_loop(state, sw);
  if (writer_transactions(*h.plane->bh) != tx0 ||
      h.items->get(h.plane->ctx, kTarget).generation != 1)
    state.SkipWithError("a converged update took the writer");
  ratio_counter(state, "x_raw", "select_us", us);
}

void BM_NoopUpdateStatus(benchmark::State& state) {
  SmallHive h("noop-status", true);
  const Status stored{"Ready", 1};
  h.cc->update_status(h.plane->ctx, kTarget, 1, stored);  // settles generation 1
  checkpoint(h.file.path);
  const auto tx0 = writer_transactions(*h.plane->bh);
  Stopwatch sw;
  for (auto _ : state) h.cc->update_status(h.plane->ctx, kTarget, 1, stored);
  const double us = finish_loop(state, sw);
  if (writer_transactions(*h.plane->bh) != tx0)
    state.SkipWithError("a converged status write took the writer");
  ratio_counter(state, "x_raw", "select_us", us);
}

#define PERF_BENCH(fn) BENCHMARK(fn)->UseRealTime()->Unit(benchmark::kMicrosecond)

PERF_BENCH(BM_RawPointSelect);
PERF_BENCH(BM_BeehiveGet);
PERF_BENCH(BM_RawPointSelectWhileWriting);
PERF_BENCH(BM_BeehiveGetWhileWriting);
PERF_BENCH(BM_RawUpdate);
BENCHMARK_CAPTURE(BM_BeehiveUpdate, caf_own, Caf::own)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BeehiveUpdate, caf_sharing, Caf::sharing)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
PERF_BENCH(BM_NoopUpdate);
PERF_BENCH(BM_NoopUpdateStatus);

// =========================================================================================
// 4. Idle cost
// =========================================================================================

constexpr int kIdleKinds = 5;
constexpr auto kIdleResync = 2000ms;

double idle_seconds() {
  const char* env = std::getenv("BENCH_IDLE_SECONDS");
  const double s = (env && *env) ? std::atof(env) : 10.0;
  return s > 0 ? s : 10.0;
}

std::uintmax_t file_size_or_zero(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

void BM_Idle(benchmark::State& state) {
  const int objects = static_cast<int>(state.range(0));
  const Caf caf = state.range(1) ? Caf::sharing : Caf::own;
  const double idle = idle_seconds();
  for (auto _ : state) {
    DbFile file("idle");
    Plane plane(file.path, Synchronous::normal, kIdleResync, caf);
    auto reconciles = std::make_shared<Counter>();
    std::vector<ControllerClient<Status>> ccs;
    std::vector<Objects> clients;
    for (int k = 0; k < kIdleKinds; ++k) {
      beehive::GroupKind gk{"acme.com", "Idle" + std::to_string(k)};
      ccs.push_back(
          beehive::register_controller<Spec, Status>(*plane.bh, gk, status_writer(reconciles)));
      clients.emplace_back(*plane.bh, gk);
    }
    for (int k = 0; k < kIdleKinds; ++k) {
      const int n = objects / kIdleKinds + (k < objects % kIdleKinds ? 1 : 0);
      create_in_blocks(ccs[static_cast<std::size_t>(k)], clients[static_cast<std::size_t>(k)],
                       plane.ctx, n);
    }
    plane.start();
    if (!reconciles->wait_for(objects)) {
      state.SkipWithError("the objects did not settle");
      break;
    }
    std::this_thread::sleep_for(1s);  // the start GC pass and any straggler
    if (scalar(file.path,
               "SELECT count(*) FROM objects WHERE observed_generation IS NOT "
               "generation") != 0) {
      state.SkipWithError("objects left unsettled");
      break;
    }

    SQLite::Database watcher(file.path.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
    SQLite::Statement data_version(watcher, "PRAGMA data_version");
    auto read_version = [&] {
      data_version.executeStep();
      auto v = data_version.getColumn(0).getInt64();
      data_version.reset();
      return v;
    };
    const fs::path wal = file.path.string() + "-wal";

    const auto dv0 = read_version();
    const auto wal0 = file_size_or_zero(wal);
    const auto tx0 = writer_transactions(*plane.bh);
    const auto rec0 = reconciles->count.load();
    const auto sw0 = switches();
    const auto st0 = statements();
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(idle));
    const double cpu = process_cpu_seconds() - cpu0;
    const auto st = statements() - st0;
    const double elapsed = seconds_since(t0);
    const auto sw1 = switches();
    const auto rec = reconciles->count.load() - rec0;
    const auto tx = writer_transactions(*plane.bh) - tx0;
    const auto wal1 = file_size_or_zero(wal);
    const auto dv = read_version() - dv0;
    state.SetIterationTime(elapsed);

    // One unsettled-index read per kind per resync, and a GC pass (cascade candidates +
    // collectible) per cadence.
    const double expected = (kIdleKinds + 2) / std::chrono::duration<double>(kIdleResync).count();
    state.counters["idle_s"] = elapsed;
    state.counters["cpu_ms/s"] = cpu * 1e3 / elapsed;
    state.counters["stmts/s"] = static_cast<double>(st) / elapsed;
    state.counters["expected_stmts/s"] = expected;
    state.counters["x_expected"] = static_cast<double>(st) / elapsed / expected;
    state.counters["writer_txn/s"] = static_cast<double>(tx) / elapsed;
    state.counters["data_version_delta"] = static_cast<double>(dv);
    state.counters["wal_growth_B"] = static_cast<double>(wal1) - static_cast<double>(wal0);
    state.counters["vol_switches/s"] = static_cast<double>(sw1.voluntary - sw0.voluntary) / elapsed;
    state.counters["reconciles"] = static_cast<double>(rec);
    if (dv != 0 || wal1 != wal0) state.SkipWithError("an idle beehive wrote to the database");
  }
}

BENCHMARK(BM_Idle)
    ->ArgNames({"objects", "caf_sharing"})
    ->Args({100, 0})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

// =========================================================================================
// 5. Scale
// =========================================================================================

// One populated file per object count, shared by the list cases and kept until exit.
const fs::path& populated(int n) {
  static std::map<int, std::unique_ptr<DbFile>> files;
  auto& slot = files[n];
  if (!slot) {
    slot = std::make_unique<DbFile>("scale-" + std::to_string(n));
    Plane plane(slot->path);
    auto cc = beehive::register_controller<Spec, Status>(
        *plane.bh, item_kind,
        [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; });
    Objects items(*plane.bh, item_kind);
    create_in_blocks(cc, items, plane.ctx, n);
    plane.close();
    checkpoint(slot->path);
  }
  return slot->path;
}

void BM_RawScaleList(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto& file = populated(n);
  SQLite::Database ro(file.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
  SQLite::Statement sel(ro, kRawList);
  Stopwatch sw;
  for (auto _ : state) {
    std::vector<RawRow> rows;
    while (sel.executeStep()) rows.push_back(read_raw(sel));
    sel.reset();
    if (static_cast<int>(rows.size()) != n) {
      state.SkipWithError("wrong row count");
      break;
    }
    benchmark::DoNotOptimize(rows);
  }
  const double us = finish_loop(state, sw);
  state.counters["objects/s"] = n / (us * 1e-6);
  state.counters["ns/object"] = us * 1e3 / n;
  set_baseline("list_us/" + std::to_string(n), us);
}

void BM_ScaleList(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto& file = populated(n);
  Plane plane(file);
  Objects items(*plane.bh, item_kind);
  Stopwatch sw;
  for (auto _ : state) {
    auto all = items.list(plane.ctx);
    if (static_cast<int>(all.size()) != n) {
      state.SkipWithError("wrong object count");
      break;
    }
    benchmark::DoNotOptimize(all);
  }
  const double us = finish_loop(state, sw);
  state.counters["objects/s"] = n / (us * 1e-6);
  state.counters["ns/object"] = us * 1e3 / n;
  ratio_counter(state, "x_raw", "list_us/" + std::to_string(n), us);
}

void BM_ScaleConverge(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int workers = static_cast<int>(state.range(1));
  const Caf caf = state.range(2) ? Caf::sharing : Caf::own;
  double converge = 0, restart = 0, start_call = 0, create = 0, rss = 0, rss_delta = 0;
  for (auto _ : state) {
    const double rss0 = trimmed_rss_mib();
    DbFile file("converge");
    {
      // Converge: N unsettled objects, one status write each.
      Plane plane(file.path, Synchronous::normal, 0ms, caf);
      auto reconciles = std::make_shared<Counter>();
      auto cc = beehive::register_controller<Spec, Status>(
          *plane.bh, item_kind, status_writer(reconciles), beehive::with_concurrency(workers));
      Objects items(*plane.bh, item_kind);
      auto c0 = Clock::now();
      create_in_blocks(cc, items, plane.ctx, n);
      create += seconds_since(c0);
      checkpoint(file.path);

      const auto t0 = Clock::now();
      plane.start();
      start_call += seconds_since(t0);
      if (!reconciles->wait_for(n)) {
        state.SkipWithError("the objects did not settle");
        break;
      }
      const double elapsed = seconds_since(t0);
      state.SetIterationTime(elapsed);
      converge += elapsed;
    }
    if (scalar(file.path,
               "SELECT count(*) FROM objects WHERE observed_generation IS NOT "
               "generation") != 0) {
      state.SkipWithError("objects left unsettled");
      break;
    }
    checkpoint(file.path);
    {
      // Restart over the settled file: every object is reconciled once more; its status
      // write is a converged no-op.
      Plane plane(file.path, Synchronous::normal, 0ms, caf);
      auto reconciles = std::make_shared<Counter>();
      beehive::register_controller<Spec, Status>(*plane.bh, item_kind, status_writer(reconciles),
                                                 beehive::with_concurrency(workers));
      const auto t0 = Clock::now();
      const auto tx0 = writer_transactions(*plane.bh);
      plane.start();
      if (!reconciles->wait_for(n)) {
        state.SkipWithError("the restart did not reconcile every object");
        break;
      }
      restart += seconds_since(t0);
      std::this_thread::sleep_for(1s);  // idle
      rss += trimmed_rss_mib();
      rss_delta += trimmed_rss_mib() - rss0;
      // The start GC pass is the only transaction a restart of a settled store takes.
      if (writer_transactions(*plane.bh) - tx0 > 1)
        state.SkipWithError("the restart of a settled store wrote");
    }
  }
  const double iters =
      static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  if (converge > 0) {
    state.counters["objects/s"] = n * iters / converge;
    state.counters["us/object"] = converge * 1e6 / (n * iters);
    state.counters["start_call_ms"] = start_call * 1e3 / iters;
    state.counters["restart_ms"] = restart * 1e3 / iters;
    state.counters["restart_us/object"] = restart * 1e6 / (n * iters);
    state.counters["create_objects/s"] = n * iters / create;
    state.counters["rss_MiB"] = rss / iters;
    state.counters["rss_delta_MiB"] = rss_delta / iters;
    state.counters["rss_delta_B/object"] = rss_delta * 1024 * 1024 / (n * iters);
  }
}

void scale_list_args(benchmark::internal::Benchmark* b) {
  b->ArgName("objects")->Arg(1000)->Arg(10000)->Arg(100000);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_RawScaleList)->Apply(scale_list_args);
BENCHMARK(BM_ScaleList)->Apply(scale_list_args);
BENCHMARK(BM_ScaleConverge)
    ->ArgNames({"objects", "workers", "caf_sharing"})
    ->Args({1000, 1, 0})
    ->Args({1000, 4, 0})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScaleConverge)
    ->ArgNames({"objects", "workers", "caf_sharing"})
    ->Args({10000, 1, 0})
    ->Args({10000, 4, 0})
    ->Args({10000, 1, 1})
    ->Args({100000, 1, 0})
    ->Args({100000, 4, 0})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
