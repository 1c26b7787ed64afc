// What the change log costs a create: raw SQLite with and without the log's row, and
// beehive's blocking `create`, in the same run, at synchronous NORMAL and FULL.
//
//   BM_RawCreate/<sync>        INSERT INTO objects; COMMIT (bench_store's BM_RawInsert)
//   BM_RawCreateLogged/<sync>  INSERT INTO objects; INSERT INTO change_log; COMMIT: the
//                              log's inherent cost is this over BM_RawCreate
//   BM_BeehiveCreate/<sync>    Client::create, blocking (labels none), over BM_RawCreate
//
// Each case runs against a fresh file with beehive's schema (bench/common.hpp); the raw
// cases write the row the way beehive's writer does (the change_log statement is
// src/store/sqlite/sqlite_queries.cpp's log_change). One transaction per iteration.
//
// This file uses only what the commit before the change log (7beca46, schema 6) already
// had, so that the same source builds there: its schema has no change_log table, so the
// logged raw case creates one of the same shape (CREATE TABLE IF NOT EXISTS). The before
// / after comparison of `create` is then x_raw = BM_BeehiveCreate / BM_RawCreate of each
// build, each from its own run (see bench/README.md, 2026-12-01: labels, selectors,
// change log):
//
//   python3 bench/ratios.py --suite change_log
//
// Times are wall-clock (UseRealTime): a blocking create sleeps while the writer works.

#include <cstdint>
#include <string>

#include "common.hpp"

namespace {

using beehive::sqlite::Synchronous;
using bench::checkpoint;
using bench::DbFile;
using bench::kBusyTimeoutMs;
using bench::now_millis;
using bench::set_rate;

constexpr const char* kRawInsert = R"sql(
INSERT INTO objects ("group", kind, slug, spec, spec_version, generation, resource_version,
                     finalizers, created_at, updated_at)
VALUES (?1, ?2, NULL, ?3, 0, 1, ?4, '[]', ?5, ?5))sql";

// beehive's Query::log_change (schema 7).
constexpr const char* kLogChange = R"sql(
INSERT INTO change_log (resource_version, object_id, "group", kind, parts, at, final_body)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7))sql";

// The change_log of schema 7, for a file at an older schema (a no-op at 7).
constexpr const char* kChangeLogTable = R"sql(
CREATE TABLE IF NOT EXISTS change_log (
  resource_version INTEGER PRIMARY KEY,
  object_id        INTEGER NOT NULL,
  "group"          TEXT NOT NULL,
  kind             TEXT NOT NULL,
  parts            INTEGER NOT NULL,
  at               INTEGER NOT NULL,
  final_body       TEXT
))sql";

const char* sync_pragma(Synchronous s) {
  return s == Synchronous::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
}

const std::string kSpec = R"({"n":3,"name":"item"})";  // bench::Spec{"item", 3}

void raw_create(benchmark::State& state, Synchronous sync, bool logged) {
  DbFile file(logged ? "raw-create-logged" : "raw-create");
  {
    SQLite::Database db(file.path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                        kBusyTimeoutMs);
    db.exec("PRAGMA journal_mode = WAL");
    bench::create_raw_schema(db);
    db.exec(kChangeLogTable);
  }
  checkpoint(file.path);
  SQLite::Database db(file.path.string(), SQLite::OPEN_READWRITE, kBusyTimeoutMs);
  db.exec(sync_pragma(sync));
  db.exec("PRAGMA foreign_keys = ON");
  SQLite::Statement ins(db, kRawInsert);
  SQLite::Statement log(db, kLogChange);
  std::int64_t rv = 0;
  for (auto _ : state) {
    db.exec("BEGIN IMMEDIATE");
    const std::int64_t now = now_millis();
    ins.bindNoCopy(1, "acme.com");
    ins.bindNoCopy(2, "Item");
    ins.bindNoCopy(3, kSpec);
    ins.bind(4, ++rv);
    ins.bind(5, now);
    ins.exec();
    ins.reset();
    const std::int64_t id = db.getLastInsertRowid();
    if (logged) {
      log.bind(1, rv);
      log.bind(2, id);
      log.bindNoCopy(3, "acme.com");
      log.bindNoCopy(4, "Item");
      log.bind(5, static_cast<std::int64_t>(1));  // object_change::created
      log.bind(6, now);
      log.bind(7);  // NULL: not a removal
      log.exec();
      log.reset();
    }
    db.exec("COMMIT");
    benchmark::DoNotOptimize(id);
  }
  set_rate(state);
}

void BM_RawCreate(benchmark::State& state, Synchronous sync) { raw_create(state, sync, false); }
void BM_RawCreateLogged(benchmark::State& state, Synchronous sync) {
  raw_create(state, sync, true);
}

void BM_BeehiveCreate(benchmark::State& state, Synchronous sync) {
  bench::Hive hive("beehive-create", sync);
  checkpoint(hive.file.path);
  bench::Objects items(*hive.bh, beehive::GroupKind{"acme.com", "Item"});
  const bench::Spec spec{"item", 3};
  for (auto _ : state) {
    auto obj = items.create(hive.ctx, spec);
    benchmark::DoNotOptimize(obj.id);
  }
  set_rate(state);
}

#define CHANGE_LOG_BENCH(fn, mode, sync) \
  BENCHMARK_CAPTURE(fn, mode, sync)->UseRealTime()->Unit(benchmark::kMicrosecond)

CHANGE_LOG_BENCH(BM_RawCreate, normal, Synchronous::normal);
CHANGE_LOG_BENCH(BM_RawCreateLogged, normal, Synchronous::normal);
CHANGE_LOG_BENCH(BM_BeehiveCreate, normal, Synchronous::normal);
CHANGE_LOG_BENCH(BM_RawCreate, full, Synchronous::full);
CHANGE_LOG_BENCH(BM_RawCreateLogged, full, Synchronous::full);
CHANGE_LOG_BENCH(BM_BeehiveCreate, full, Synchronous::full);

}  // namespace
