// beehive vs raw SQLite, same run, same file settings, one thread.
//
// Each pair runs against a fresh database file (WAL, the same PRAGMA synchronous) in a
// temp dir under $BENCH_DB_DIR (default: the system temp dir, /tmp):
//
//   BM_RawInsert       vs BM_BeehiveCreate  one new row, one commit per iteration
//   BM_RawUpdate       vs BM_BeehiveUpdate  one row's spec changed, one commit per iteration
//   BM_RawPointSelect  vs BM_BeehiveGet     one row read by id
//
// Writes run at synchronous NORMAL and FULL, reads at NORMAL; the suffix of each name
// says which (BM_RawInsert/full/real_time). Times are wall-clock (UseRealTime): a
// blocking beehive write sleeps while the writer thread works, so CPU time would flatter
// it. `python3 bench/ratios.py` runs this binary and prints beehive / raw per pair.
//
// The raw side is what an application would write by hand with SQLiteCpp: a table
// shaped like beehive's `objects` (same columns, constraints and indexes, see
// src/store/sqlite/sqlite_schema.cpp), prepared statements reused, BEGIN IMMEDIATE ... COMMIT
// around each write. Everything beehive does beyond that (resource version counter,
// re-reading the row, JSON encode/decode, the hand-off to the writer actor, the reader
// pool) is what the ratio measures.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <unistd.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <benchmark/benchmark.h>

#include <beehive/beehive.hpp>

#include "common.hpp"

namespace {

namespace fs = std::filesystem;
using beehive::sqlite::Synchronous;
using bench::checkpoint;
using bench::create_raw_schema;
using bench::DbFile;
using bench::kBusyTimeoutMs;
using bench::now_millis;
using bench::RawSpecUpdate;
using bench::read_raw;

// --- sample types ------------------------------------------------------------------------

struct WidgetSpec {
  std::string name;
  int replicas = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WidgetSpec, name, replicas)

struct WidgetStatus {};  // stored as {} without a converter

using Widgets = beehive::Client<WidgetSpec, WidgetStatus>;
const beehive::GroupKind widget_kind{"acme.com", "Widget"};

// The text beehive stores for WidgetSpec{"widget", n} (compact JSON, keys sorted); the
// raw benchmarks bind the same bytes.
std::string spec_text(int replicas) {
  return R"({"name":"widget","replicas":)" + std::to_string(replicas) + "}";
}

// Rows present before a read/update benchmark starts; the target is in the middle.
constexpr int kRows = 100;
constexpr beehive::ObjectID kTarget = kRows / 2;

// --- file settings (database files: bench/common.hpp) ------------------------------------

const char* sync_pragma(Synchronous s) {
  return s == Synchronous::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
}

// --- raw SQLite --------------------------------------------------------------------------

constexpr const char* kRawInsert = R"sql(
INSERT INTO objects ("group", kind, slug, spec, spec_version, generation, resource_version,
                     finalizers, created_at, updated_at)
VALUES (?1, ?2, NULL, ?3, 0, 1, ?4, '[]', ?5, ?5))sql";

constexpr const char* kRawSelect = R"sql(
SELECT id, "group", kind, slug, spec, spec_version, status, status_version, generation,
       observed_generation, observed_at, resource_version, deletion_requested_at,
       finalizers, created_at, updated_at
  FROM objects WHERE id = ?1)sql";

// A write connection set up like beehive's (WAL, synchronous, foreign keys).
struct RawDb {
  RawDb(const fs::path& file, Synchronous sync)
      : db(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, kBusyTimeoutMs) {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(sync_pragma(sync));
    db.exec("PRAGMA foreign_keys = ON");
    create_raw_schema(db);
  }

  // Inserts `n` rows in one transaction (setup only).
  void populate(int n) {
    SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement ins(db, kRawInsert);
    for (int i = 0; i < n; ++i) {
      ins.bind(1, "acme.com");
      ins.bind(2, "Widget");
      ins.bind(3, spec_text(-1));
      ins.bind(4, static_cast<std::int64_t>(i + 1));
      ins.bind(5, now_millis());
      ins.exec();
      ins.reset();
    }
    txn.commit();
  }

  SQLite::Database db;
};

void set_rate(benchmark::State& state) {
  state.counters["items/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_RawInsert(benchmark::State& state, Synchronous sync) {
  DbFile file("raw-insert");
  RawDb raw(file.path, sync);
  checkpoint(file.path);
  SQLite::Statement ins(raw.db, kRawInsert);
  const std::string spec = spec_text(3);
  std::int64_t rv = 0;
  for (auto _ : state) {
    raw.db.exec("BEGIN IMMEDIATE");
    ins.bindNoCopy(1, "acme.com");
    ins.bindNoCopy(2, "Widget");
    ins.bindNoCopy(3, spec);
    ins.bind(4, ++rv);
    ins.bind(5, now_millis());
    ins.exec();
    ins.reset();
    benchmark::DoNotOptimize(raw.db.getLastInsertRowid());
    raw.db.exec("COMMIT");
  }
  set_rate(state);
}

void BM_RawUpdate(benchmark::State& state, Synchronous sync) {
  DbFile file("raw-update");
  RawDb raw(file.path, sync);
  raw.populate(kRows);
  checkpoint(file.path);
  RawSpecUpdate update(raw.db, kRows);
  int i = 0;
  for (auto _ : state) update(kTarget, spec_text(i++));  // a new value every iteration
  set_rate(state);
}

void BM_RawPointSelect(benchmark::State& state, Synchronous sync) {
  DbFile file("raw-select");
  RawDb raw(file.path, sync);  // stays open, like beehive's write connection
  raw.populate(kRows);
  checkpoint(file.path);
  // Read-only connection, as beehive's readers use.
  SQLite::Database ro(file.path.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
  SQLite::Statement sel(ro, kRawSelect);
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
  set_rate(state);
}

// --- beehive -----------------------------------------------------------------------------

// A store and a beehive over a fresh file; the file goes when the run ends.
struct Hive {
  Hive(const std::string& tag, Synchronous sync) : file(tag) {
    beehive::sqlite::Options opts;
    opts.synchronous = sync;
    store = beehive::sqlite::open(file.path, opts);
    bh = std::make_unique<beehive::Beehive>(store);
    widgets.emplace(*bh, widget_kind);
  }
  ~Hive() {
    widgets.reset();
    bh.reset();
    store.reset();
  }

  // Creates `n` objects (ids 1..n in a fresh file), then checkpoints the WAL.
  void populate(int n) {
    for (int i = 0; i < n; ++i) widgets->create(ctx, WidgetSpec{"widget", -1});
    checkpoint(file.path);
  }

  DbFile file;
  std::shared_ptr<beehive::Store> store;
  std::unique_ptr<beehive::Beehive> bh;
  std::optional<Widgets> widgets;
  beehive::Context ctx;
};

void BM_BeehiveCreate(benchmark::State& state, Synchronous sync) {
  Hive hive("beehive-create", sync);
  checkpoint(hive.file.path);
  const WidgetSpec spec{"widget", 3};
  for (auto _ : state) {
    auto obj = hive.widgets->create(hive.ctx, spec);
    benchmark::DoNotOptimize(obj.id);
  }
  set_rate(state);
}

void BM_BeehiveUpdate(benchmark::State& state, Synchronous sync) {
  Hive hive("beehive-update", sync);
  hive.populate(kRows);
  int i = 0;
  std::int64_t expected_generation = 1;
  for (auto _ : state) {
    auto obj = hive.widgets->update(hive.ctx, kTarget, WidgetSpec{"widget", i++});
    benchmark::DoNotOptimize(obj.generation);
    ++expected_generation;
  }
  // Every iteration must have been a real write (the spec changed each time).
  auto last = hive.widgets->get(hive.ctx, kTarget);
  if (last.generation != expected_generation)
    state.SkipWithError("an update did not bump the generation");
  set_rate(state);
}

void BM_BeehiveGet(benchmark::State& state, Synchronous sync) {
  Hive hive("beehive-get", sync);
  hive.populate(kRows);
  for (auto _ : state) {
    auto obj = hive.widgets->get(hive.ctx, kTarget);
    benchmark::DoNotOptimize(obj);
  }
  set_rate(state);
}

// Pairs next to each other so that drift of the disk affects both sides alike.
#define BEEHIVE_BENCH(fn, mode, sync) \
  BENCHMARK_CAPTURE(fn, mode, sync)->UseRealTime()->Unit(benchmark::kMicrosecond)

BEEHIVE_BENCH(BM_RawInsert, normal, Synchronous::normal);
BEEHIVE_BENCH(BM_BeehiveCreate, normal, Synchronous::normal);
BEEHIVE_BENCH(BM_RawInsert, full, Synchronous::full);
BEEHIVE_BENCH(BM_BeehiveCreate, full, Synchronous::full);

BEEHIVE_BENCH(BM_RawUpdate, normal, Synchronous::normal);
BEEHIVE_BENCH(BM_BeehiveUpdate, normal, Synchronous::normal);
BEEHIVE_BENCH(BM_RawUpdate, full, Synchronous::full);
BEEHIVE_BENCH(BM_BeehiveUpdate, full, Synchronous::full);

BEEHIVE_BENCH(BM_RawPointSelect, normal, Synchronous::normal);
BEEHIVE_BENCH(BM_BeehiveGet, normal, Synchronous::normal);

}  // namespace
