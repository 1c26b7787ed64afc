// Controllers: how fast a started beehive settles a backlog, and what one status write
// costs beside raw SQLite.
//
//   BM_Converge/<objects>/<workers>   N objects exist before start; the controller calls
//                                     update_status once per object. Wall time from
//                                     bh.start() until every object is settled
//                                     (observed_generation == generation), as objects/s.
//   BM_ConvergeRequeueing/<objects>   The same with 4 workers, every pass returning
//                                     requeue_after(1h): µs/object should not grow with
//                                     the objects (each holds a timer once done).
//   BM_RawUpdateStatus                 BEGIN IMMEDIATE, the UPDATE of the status columns
//     vs BM_BeehiveUpdateStatus        (beehive's own statement), COMMIT; against a
//                                     blocking ControllerClient::update_status from the
//                                     benchmark's thread. The status changes every
//                                     iteration, so every call is a real write.
//
// Everything runs at synchronous NORMAL (beehive's default) on a fresh database file in
// WAL mode under $BENCH_DB_DIR (default /tmp). `python3 bench/ratios.py --suite
// controller` runs this binary and prints the table.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common.hpp"

namespace {

using namespace bench;
using beehive::Context;
using beehive::ControllerClient;
using beehive::ObjectID;
using beehive::Result;

const beehive::GroupKind item_kind{"acme.com", "Item"};

// --- convergence -------------------------------------------------------------------------

// Counts status writes and wakes the benchmark thread when the last one is done.
struct SettledCounter {
  explicit SettledCounter(int target) : target(target) {}
  void add() {
    if (count.fetch_add(1, std::memory_order_acq_rel) + 1 >= target) count.notify_all();
  }
  void wait() {
    for (int seen = count.load(std::memory_order_acquire); seen < target;
         seen = count.load(std::memory_order_acquire))
      count.wait(seen, std::memory_order_acquire);
  }
  const int target;
  std::atomic<int> count{0};
};

// One iteration = one fresh database with `objects` unsettled objects, one start, one
// wait for the last status write. Setup (creating the objects in one `within`
// transaction, a WAL checkpoint) and teardown (a confirming list, stop, close) are not
// timed; the time is set manually.
void converge(benchmark::State& state, int objects, int workers, Result result) {
  double timed = 0;
  double start_call = 0;  // of which bh.start() itself took
  for (auto _ : state) {
    Hive hive("converge");
    auto settled = std::make_shared<SettledCounter>(objects);
    auto cc = beehive::register_controller<Spec, Status>(
        *hive.bh, item_kind,
        [settled, result](const Context& ctx, ControllerClient<Status>& c, const Obj& o) {
          c.update_status(ctx, o.id, o.generation, Status{"Ready", o.generation});
          settled->add();
          return result;
        },
        beehive::with_concurrency(workers));
    Objects items(*hive.bh, item_kind);
    cc.within(hive.ctx, [&](const Context& tx) {
      for (int i = 0; i < objects; ++i) items.create(tx, Spec{"item", i});
    });
    checkpoint(hive.file.path);

    auto t0 = Clock::now();
    hive.start();
    start_call += seconds_since(t0);
    settled->wait();
    const double elapsed = seconds_since(t0);
    state.SetIterationTime(elapsed);
    timed += elapsed;

    // Confirm once, outside the timed part: every object settled, each reconciled once.
    int unsettled = 0;
    for (auto& o : items.list(hive.ctx))
      if (o.observed_generation != o.generation) ++unsettled;
    if (unsettled != 0 || settled->count.load() != objects) {
      state.SkipWithError("not every object was settled exactly once");
      break;
    }
  }
  if (timed > 0) {
    const double iters = static_cast<double>(state.iterations());
    state.counters["objects/s"] = objects * iters / timed;
    state.counters["us/object"] = timed * 1e6 / (objects * iters);
    state.counters["start_ms"] = start_call * 1e3 / iters;
  }
}

void BM_Converge(benchmark::State& state) {
  converge(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), Result{});
}

// The same, each pass asking to run again in an hour: every object holds a timer once
// its pass ends, so the controller's timer bookkeeping per pass shows in µs/object as
// the count grows (it should stay flat: an index, not a scan).
void BM_ConvergeRequeueing(benchmark::State& state) {
  converge(state, static_cast<int>(state.range(0)), 4, Result{std::chrono::hours(1)});
}

// --- status writes -----------------------------------------------------------------------

constexpr int kRows = 100;
constexpr ObjectID kTarget = kRows / 2;

// What beehive stores for Status{"Ready", seen} (compact JSON, keys sorted).
std::string status_text(std::int64_t seen) {
  return R"({"phase":"Ready","seen":)" + std::to_string(seen) + "}";
}

constexpr const char* kRawInsert = R"sql(
INSERT INTO objects ("group", kind, slug, spec, spec_version, generation, resource_version,
                     finalizers, created_at, updated_at)
VALUES ('acme.com', 'Item', NULL, ?1, 0, 1, ?2, '[]', ?3, ?3))sql";

// The statement beehive's writer runs for a status write (Query::update_status).
constexpr const char* kRawUpdateStatus =
    "UPDATE objects SET status = ?2, status_version = 0, observed_generation = ?3, "
    "observed_at = ?4, resource_version = ?5, updated_at = ?6 WHERE id = ?1";

void BM_RawUpdateStatus(benchmark::State& state) {
  DbFile file("raw-status");
  SQLite::Database db(file.path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                      kBusyTimeoutMs);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
  create_raw_schema(db);
  {
    SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement ins(db, kRawInsert);
    for (int i = 0; i < kRows; ++i) {
      ins.bind(1, R"({"n":0,"name":"item"})");
      ins.bind(2, static_cast<std::int64_t>(i + 1));
      ins.bind(3, now_millis());
      ins.exec();
      ins.reset();
    }
    txn.commit();
  }
  checkpoint(file.path);
  SQLite::Statement upd(db, kRawUpdateStatus);
  std::int64_t rv = kRows;
  std::int64_t seen = 0;
  for (auto _ : state) {
    std::string status = status_text(++seen);  // a new value every iteration
    const std::int64_t now = now_millis();
    db.exec("BEGIN IMMEDIATE");
    upd.bind(1, kTarget);
    upd.bindNoCopy(2, status);
    upd.bind(3, static_cast<std::int64_t>(1));
    upd.bind(4, now);
    upd.bind(5, ++rv);
    upd.bind(6, now);
    upd.exec();
    upd.reset();
    db.exec("COMMIT");
  }
  set_rate(state);
}

// A started beehive whose controller settles each of the 100 objects once at start;
// the loop then writes the target's status from the benchmark thread (a plain thread,
// not a reconcile), as an application reporting observations would.
void BM_BeehiveUpdateStatus(benchmark::State& state) {
  Hive hive("beehive-status");
  auto settled = std::make_shared<SettledCounter>(kRows);
  auto cc = beehive::register_controller<Spec, Status>(
      *hive.bh, item_kind,
      [settled](const Context& ctx, ControllerClient<Status>& c, const Obj& o) {
        c.update_status(ctx, o.id, o.generation, Status{"Ready", 0});
        settled->add();
        return Result{};
      });
  Objects items(*hive.bh, item_kind);
  cc.within(hive.ctx, [&](const Context& tx) {
    for (int i = 0; i < kRows; ++i) items.create(tx, Spec{"item", 0});
  });
  hive.start();
  settled->wait();
  checkpoint(hive.file.path);

  std::int64_t seen = 0;
  for (auto _ : state) cc.update_status(hive.ctx, kTarget, 1, Status{"Ready", ++seen});

  // Every iteration must have been a real write.
  auto last = items.get(hive.ctx, kTarget);
  if (!last.status || last.status->seen != seen || settled->count.load() != kRows)
    state.SkipWithError("a status write was lost, or the controller ran again");
  set_rate(state);
}

// Convergence: each iteration builds its own backlog, so the counts are fixed.
BENCHMARK(BM_Converge)
    ->ArgNames({"objects", "workers"})
    ->Args({1000, 1})
    ->Args({1000, 4})
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Converge)
    ->ArgNames({"objects", "workers"})
    ->Args({10000, 1})
    ->Args({10000, 4})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ConvergeRequeueing)
    ->ArgNames({"objects"})
    ->Arg(1000)
    ->Arg(20000)
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The pair next to each other so that drift of the disk affects both alike.
BENCHMARK(BM_RawUpdateStatus)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BeehiveUpdateStatus)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
