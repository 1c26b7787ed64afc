// The event log: the cost of ControllerClient::record_event as an object's timeline
// grows, and the event log's retention sweep that trims timelines.
//
//   BM_RecordEvent/<mode>/runs:<n>   one blocking record_event on one object whose
//                                    timeline (one category) already holds n runs.
//                                    extend: the same category/type/reason every call,
//                                    so each call extends the current run (count + 1).
//                                    new: two reasons alternate, so each call starts a
//                                    new run. extend/runs:10 is the baseline: every
//                                    case reports x_extend10 = its mean time / the
//                                    baseline's, measured earlier in the same process.
//                                    The cost should stay flat as n grows.
//   BM_SweepRaw                      baseline: SQLiteCpp on a copy of the sweep file,
//                                    BEGIN IMMEDIATE; DELETE of every run but the newest
//                                    10 per (object, category) with row_number() OVER;
//                                    COMMIT.
//   BM_SweepBeehive                  Beehive::start on a copy of the same file with
//                                    with_event_retention(10, 1 h), until the sweep at start has
//                                    trimmed the timelines (polled with
//                                    Client::list_events on the last object, then every
//                                    timeline checked). x_raw = its mean time / BM_SweepRaw's.
//   BM_CollectPass/retention:<0|1>   on the swept file (20 000 runs left), a started
//                                    beehive without / with that retention: remove an
//                                    object of another kind (no events, no finalizers)
//                                    until a watch reports it Deleted: the GC pass that
//                                    collects it (its commit triggers one more pass,
//                                    which the next iteration may queue behind). GC
//                                    passes never trim (the event log sweeps on its own
//                                    cadence), so retention should cost them nothing;
//                                    x_no_retention = retention:1 / retention:0.
//
// The x_* counters divide by a baseline that runs earlier in the same process
// (registration order); a filter that leaves the baseline out drops them.
//
// The sweep file: 100 000 runs, 1 000 objects x 2 categories x 50 runs, written once per
// process through record_event inside ControllerClient::within blocks of 4 000 records
// (reasons alternate, so each record is a new run), then checkpointed. Each sweep
// iteration copies it to a fresh file; 80 000 runs go. The swept beehive registers no
// controller (nothing is reconciled at start: only the GC pass and the sweep run).
//
// record_event on a beehive that is not started (a ControllerClient works without
// start), with_event_retention unset: nothing is trimmed. In the `new` cases the timeline
// would grow by one run per iteration; every kTrimEvery iterations the runs added since
// setup are deleted with SQLiteCpp outside the timed part, so it stays within
// n .. n + kTrimEvery runs. Times are wall-clock per call (manual time).
//
// One fresh database file per benchmark run (sweep: per iteration), WAL, synchronous
// NORMAL, under $BENCH_DB_DIR (default /tmp).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"

namespace {

using namespace bench;
using namespace std::chrono_literals;
using beehive::Context;
using beehive::ControllerClient;
using beehive::EventSpec;
using beehive::EventType;
using beehive::ObjectID;
using beehive::Result;

const beehive::GroupKind probe_kind{"acme.com", "Probe"};

ControllerClient<Status> register_probe_kind(beehive::Beehive& bh) {
  return beehive::register_controller<Spec, Status>(
      bh, probe_kind,
      [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; });
}

EventSpec event(std::string category, std::string reason) {
  EventSpec e;
  e.category = std::move(category);
  e.type = EventType::Warning;
  e.reason = std::move(reason);
  e.message = "probe failed: connection refused";
  return e;
}

const char* reason_of(int i) { return i % 2 == 0 ? "ProbeFailed" : "ProbeTimedOut"; }

// Records per within block when populating.
constexpr int kBlock = 4000;

std::int64_t scalar(SQLite::Database& db, const std::string& sql) {
  SQLite::Statement q(db, sql);
  q.executeStep();
  return q.getColumn(0).getInt64();
}

// --- record_event as the timeline grows ----------------------------------------------------

enum class Mode { extend, fresh };

constexpr int kTrimEvery = 50;
const std::string kCategory = "health";

// Mean wall time per call of extend/runs:10, from the last run of it in this process.
double g_extend10_s = 0;

void BM_RecordEvent(benchmark::State& state, Mode mode) {
  const int runs = static_cast<int>(state.range(0));
  Hive hive(mode == Mode::extend ? "extend" : "new");
  auto cc = register_probe_kind(*hive.bh);
  Objects objects(*hive.bh, probe_kind);
  const ObjectID id = objects.create(hive.ctx, Spec{"probe", 0}).id;

  // runs alternating reasons: runs runs, the last one with reason_of(runs - 1).
  for (int done = 0; done < runs;) {
    const int n = std::min(kBlock, runs - done);
    cc.within(hive.ctx, [&](const Context& tx) {
      for (int i = done; i < done + n; ++i) cc.record_event(tx, id, event(kCategory, reason_of(i)));
    });
    done += n;
  }
  checkpoint(hive.file.path);

  // A second connection for the checks and, in `new`, the trims between timed calls.
  SQLite::Database raw(hive.file.path.string(), SQLite::OPEN_READWRITE, kBusyTimeoutMs);
  const std::string count_sql =
      "SELECT count(*) FROM events WHERE object_id = " + std::to_string(id);
  if (scalar(raw, count_sql) != runs) {
    state.SkipWithError("setup did not write one run per record");
    return;
  }
  const std::int64_t setup_max = scalar(raw, "SELECT max(id) FROM events");
  SQLite::Statement trim(raw, "DELETE FROM events WHERE id > ?1");
  trim.bind(1, setup_max);

  // extend: the current run's key; new: always the other reason than the current run's.
  const EventSpec same = event(kCategory, reason_of(runs - 1));
  const EventSpec alternate[2] = {event(kCategory, reason_of(runs)),
                                  event(kCategory, reason_of(runs + 1))};

  double timed = 0;
  std::int64_t calls = 0;
  int since_trim = 0;
  for (auto _ : state) {
    const EventSpec& e = mode == Mode::extend ? same : alternate[since_trim % 2];
    auto t0 = Clock::now();
    cc.record_event(hive.ctx, id, e);
    const double elapsed = seconds_since(t0);
    state.SetIterationTime(elapsed);
    timed += elapsed;
    ++calls;
    if (mode == Mode::fresh && ++since_trim == kTrimEvery) {
      // Back to the setup's runs: the current run is again the setup's last one.
      trim.exec();
      trim.reset();
      since_trim = 0;
    }
  }

  // Every call must have done what its mode says.
  auto latest = objects.get_latest_event(hive.ctx, id, kCategory);
  const std::int64_t rows = scalar(raw, count_sql);
  bool ok = latest.has_value();
  if (ok && mode == Mode::extend) ok = rows == runs && latest->count == calls + 1;
  if (ok && mode == Mode::fresh) ok = rows == runs + since_trim && latest->count == 1;
  if (!ok) {
    state.SkipWithError("record_event did not extend / start runs as expected");
    return;
  }

  if (calls > 0) {
    const double mean = timed / static_cast<double>(calls);
    if (mode == Mode::extend && runs == 10) g_extend10_s = mean;
    state.counters["us/call"] = mean * 1e6;
    if (g_extend10_s > 0) state.counters["x_extend10"] = mean / g_extend10_s;
  }
  state.counters["runs"] = runs;
}

// --- retention sweep ---------------------------------------------------------------------

constexpr int kSweepObjects = 1000;
constexpr int kSweepCategories = 2;
constexpr int kSweepRunsPerTimeline = 50;
constexpr int kKeep = 10;
constexpr std::int64_t kSweepRuns =
    std::int64_t{kSweepObjects} * kSweepCategories * kSweepRunsPerTimeline;  // 100 000
constexpr std::int64_t kSweepKept = std::int64_t{kSweepObjects} * kSweepCategories * kKeep;
constexpr std::int64_t kSweepRemoved = kSweepRuns - kSweepKept;  // 80 000

std::string sweep_category(int c) { return c == 0 ? "health" : "sync"; }

// The populated, checkpointed file every sweep iteration copies; written on first use.
struct SweepTemplate {
  SweepTemplate() : file("sweep-template") {
    auto store = beehive::sqlite::open(file.path);
    {
      beehive::Beehive bh(store);
      Context ctx;
      auto cc = register_probe_kind(bh);
      Objects objects(bh, probe_kind);
      cc.within(ctx, [&](const Context& tx) {
        for (int i = 0; i < kSweepObjects; ++i)
          ids.push_back(objects.create(tx, Spec{"probe", i}).id);
      });
      // Round-robin over the timelines, so runs of one timeline are spread over the
      // table as a live system would write them; every record starts a new run.
      std::int64_t k = 0;
      while (k < kSweepRuns) {
        cc.within(ctx, [&](const Context& tx) {
          for (int n = 0; n < kBlock && k < kSweepRuns; ++n, ++k) {
            const auto round = static_cast<int>(k / (kSweepObjects * kSweepCategories));
            const auto slot = static_cast<int>(k % (kSweepObjects * kSweepCategories));
            cc.record_event(tx, ids[static_cast<std::size_t>(slot / kSweepCategories)],
                            event(sweep_category(slot % kSweepCategories), reason_of(round)));
          }
        });
      }
    }
    store.reset();
    checkpoint(file.path);
    SQLite::Database db(file.path.string(), SQLite::OPEN_READONLY);
    rows = scalar(db, "SELECT count(*) FROM events");
  }

  // A fresh copy (the template has no WAL after the checkpoint).
  std::unique_ptr<DbFile> copy(const std::string& tag) const {
    auto out = std::make_unique<DbFile>(tag);
    fs::copy_file(file.path, out->path);
    return out;
  }

  DbFile file;
  std::vector<ObjectID> ids;
  std::int64_t rows = 0;
};

const SweepTemplate& sweep_template() {
  static SweepTemplate t;
  return t;
}

// Every (object, category) holds at most kKeep runs, and kSweepKept runs are left.
bool trimmed(const fs::path& path) {
  SQLite::Database db(path.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
  const auto left = scalar(db, "SELECT count(*) FROM events");
  const auto fullest = scalar(
      db, "SELECT max(n) FROM (SELECT count(*) AS n FROM events GROUP BY object_id, category)");
  return left == kSweepKept && fullest == kKeep;
}

// Waits until the last object's timelines hold at most kKeep runs per category.
bool wait_trimmed(const Objects& probes, const Context& ctx, ObjectID probe) {
  const auto give_up = Clock::now() + 60s;
  while (Clock::now() < give_up) {
    std::map<std::string, int> per_category;
    for (auto& e : probes.list_events(ctx, probe)) ++per_category[e.category];
    if (per_category.size() == kSweepCategories &&
        std::all_of(per_category.begin(), per_category.end(),
                    [](auto& p) { return p.second <= kKeep; }))
      return true;
    std::this_thread::sleep_for(200us);
  }
  return false;
}

void set_sweep_counters(benchmark::State& state, double timed) {
  if (timed <= 0) return;
  const double iters = static_cast<double>(state.iterations());
  state.counters["ms/sweep"] = timed * 1e3 / iters;
  state.counters["removed/s"] = static_cast<double>(kSweepRemoved) * iters / timed;
}

// Mean seconds per BM_SweepRaw iteration, from its last run in this process.
double g_raw_sweep_s = 0;

constexpr const char* kRawSweep = R"sql(
DELETE FROM events WHERE id IN (
  SELECT id FROM (
    SELECT id, row_number() OVER (PARTITION BY object_id, category
                                  ORDER BY last_at DESC, id DESC) AS n
      FROM events)
   WHERE n > ?1))sql";

void BM_SweepRaw(benchmark::State& state) {
  const SweepTemplate& tpl = sweep_template();
  if (tpl.rows != kSweepRuns) {
    state.SkipWithError("the sweep file does not hold 100 000 runs");
    return;
  }
  double timed = 0;
  for (auto _ : state) {
    auto file = tpl.copy("sweep-raw");
    int removed = 0;
    {
      SQLite::Database db(file->path.string(), SQLite::OPEN_READWRITE, kBusyTimeoutMs);
      db.exec("PRAGMA journal_mode = WAL");
      db.exec("PRAGMA synchronous = NORMAL");
      db.exec("PRAGMA foreign_keys = ON");
      SQLite::Statement del(db, kRawSweep);
      del.bind(1, kKeep);

      auto t0 = Clock::now();
      db.exec("BEGIN IMMEDIATE");
      removed = del.exec();
      db.exec("COMMIT");
      const double elapsed = seconds_since(t0);
      state.SetIterationTime(elapsed);
      timed += elapsed;
    }
    if (removed != kSweepRemoved || !trimmed(file->path)) {
      state.SkipWithError("the raw DELETE did not trim to 10 runs per timeline");
      return;
    }
  }
  set_sweep_counters(state, timed);
  if (timed > 0) g_raw_sweep_s = timed / static_cast<double>(state.iterations());
}

void BM_SweepBeehive(benchmark::State& state) {
  const SweepTemplate& tpl = sweep_template();
  if (tpl.rows != kSweepRuns) {
    state.SkipWithError("the sweep file does not hold 100 000 runs");
    return;
  }
  const ObjectID probe = tpl.ids.back();
  double timed = 0, starting = 0;
  for (auto _ : state) {
    auto file = tpl.copy("sweep-beehive");
    Context ctx;
    bool done = false;
    {
      auto store = beehive::sqlite::open(file->path);
      beehive::Beehive bh(store, beehive::with_event_retention(kKeep, std::chrono::hours(1)));
      Objects objects(bh, probe_kind);

      auto t0 = Clock::now();
      auto stop = bh.start(ctx);
      starting += seconds_since(t0);
      // The trim is one transaction: once one timeline is trimmed, all are.
      done = wait_trimmed(objects, ctx, probe);
      const double elapsed = seconds_since(t0);
      state.SetIterationTime(elapsed);
      timed += elapsed;
      stop(ctx);
    }
    if (!done || !trimmed(file->path)) {
      state.SkipWithError("the sweep did not trim to 10 runs per timeline");
      return;
    }
  }
  set_sweep_counters(state, timed);
  if (timed > 0) {
    const double iters = static_cast<double>(state.iterations());
    state.counters["start_ms"] = starting * 1e3 / iters;
    if (g_raw_sweep_s > 0) state.counters["x_raw"] = timed / iters / g_raw_sweep_s;
  }
}

// --- a GC pass once the timelines are trimmed ------------------------------------------------

const beehive::GroupKind scratch_kind{"acme.com", "Scratch"};

// The sweep file after the sweep (20 000 runs, 10 per timeline), on a started beehive
// with (1) or without (0) with_event_retention(10, 1 h). One iteration: remove an object
// of another kind (no finalizers, no events) and wait until a watch reports it Deleted.
// Physical removal happens in a GC pass; the retention sweep is the event log's, on the
// resync cadence, so the two cases should cost the same.
// Mean seconds per BM_CollectPass/retention:0 iteration, from its last run in this process.
double g_collect_plain_s = 0;

void BM_CollectPass(benchmark::State& state) {
  const bool retention = state.range(0) != 0;
  const SweepTemplate& tpl = sweep_template();
  auto file = tpl.copy("collect");
  {
    // Both cases start from the same trimmed data.
    SQLite::Database db(file->path.string(), SQLite::OPEN_READWRITE, kBusyTimeoutMs);
    db.exec("PRAGMA journal_mode = WAL");
    SQLite::Statement del(db, kRawSweep);
    del.bind(1, kKeep);
    del.exec();
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  Context ctx;
  auto store = beehive::sqlite::open(file->path);
  auto bh = retention ? std::make_unique<beehive::Beehive>(
                            store, beehive::with_event_retention(kKeep, std::chrono::hours(1)))
                      : std::make_unique<beehive::Beehive>(store);
  Objects probes(*bh, probe_kind);
  Objects scratch(*bh, scratch_kind);
  auto stop = bh->start(ctx);
  if (!wait_trimmed(probes, ctx, tpl.ids.back())) {
    state.SkipWithError("the timelines are not trimmed");
    return;
  }
  double timed = 0;
  int n = 0;
  for (auto _ : state) {
    auto obj = scratch.create(ctx, Spec{"scratch", ++n});
    auto watch = scratch.watch(ctx, obj.id);
    auto first = watch.next_for(5s);
    if (!first || first->type != beehive::ChangeType::Added) {
      state.SkipWithError("no snapshot of the object");
      break;
    }
    auto t0 = Clock::now();
    scratch.remove(ctx, obj.id);
    bool gone = false;
    while (auto ch = watch.next_for(10s)) {
      if (ch->type == beehive::ChangeType::Deleted) {
        gone = true;
        break;
      }
    }
    const double elapsed = seconds_since(t0);
    state.SetIterationTime(elapsed);
    timed += elapsed;
    if (!gone) {
      state.SkipWithError("the object was not collected");
      break;
    }
  }
  stop(ctx);
  if (timed > 0) {
    const double mean = timed / static_cast<double>(state.iterations());
    if (!retention) g_collect_plain_s = mean;
    state.counters["ms/pass"] = mean * 1e3;
    if (retention && g_collect_plain_s > 0)
      state.counters["x_no_retention"] = mean / g_collect_plain_s;
  }
}

// The baseline first: the other cases divide by it.
#define RECORD_BENCH(name, mode, runs)          \
  BENCHMARK_CAPTURE(BM_RecordEvent, name, mode) \
      ->ArgName("runs")                         \
      ->Arg(runs)                               \
      ->UseManualTime()                         \
      ->Unit(benchmark::kMicrosecond)

RECORD_BENCH(extend, Mode::extend, 10);
RECORD_BENCH(extend, Mode::extend, 5000);
RECORD_BENCH(new, Mode::fresh, 10);
RECORD_BENCH(new, Mode::fresh, 5000);

BENCHMARK(BM_SweepRaw)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SweepBeehive)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CollectPass)
    ->ArgName("retention")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
