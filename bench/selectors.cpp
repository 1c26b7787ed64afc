// Label selectors at scale: does a selective list cost the matching rows or the kind?
//
// One file, built once per process through beehive (ControllerClient::within blocks of
// 5 000 creates): 100 000 objects of one kind, every 100th labelled tier=gold (1 000),
// the others tier=bronze. Every case reads that file, NORMAL, on a fresh Beehive or a
// read-only connection:
//
//   BM_SelectorList            Client::list(ctx, with_selector("tier=gold")), decoded:
//                              1 000 objects
//   BM_RawSelectorList         raw SQLite, the same 1 000 rows and columns, driven by the
//                              labels primary key (labels (key, value, object_id) ->
//                              objects by rowid), into structs: what a selective read
//                              costs when it reads only the matching rows
//   BM_RawSelectorListShipped  raw SQLite, beehive's statement without the unary + on the
//                              kind's terms (as first shipped): the plan SQLite picks
//                              unaided walks objects_by_kind over the whole kind
//   BM_RawSelectorListFixed    raw SQLite, the statement beehive runs (list_where in
//                              src/store/sqlite/sqlite_change_log.cpp: +o."group" = ?1 AND
//                              +o.kind = ?2 keep the planner off objects_by_kind)
//   BM_FullList                Client::list(ctx), all 100 000, decoded
//   BM_RawFullList             raw SQLite, all 100 000 rows of the kind, into structs
//   BM_PageOfACommonLabel      Client::list_page(ctx, 100, <a token halfway>,
//                              with_selector("tier=bronze")): a page of a label 99% carry
//   BM_PageOfTheKind           the same page without a selector
//
// Ratios (python3 bench/ratios.py --suite selectors, medians of interleaved repetitions):
// selective / raw selective (expect a small factor, like list's ~1x of raw), selective /
// full list (expect ~1%: 1 000 of 100 000 rows). The EXPLAIN QUERY PLAN of both
// statements is printed once at start (stderr) and recorded in bench/README.md.
//
// Times are wall-clock (UseRealTime).

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace {

using namespace bench;
using beehive::Context;
using beehive::ControllerClient;
using beehive::Result;

const beehive::GroupKind kKind{"acme.com", "Item"};
constexpr int kObjects = 100000;
constexpr int kEvery = 100;  // every 100th object is tier=gold
constexpr int kGold = kObjects / kEvery;

// The 16 object columns read_raw reads (bench/common.hpp), plus the labels beehive reads.
#define RAW_COLUMNS                                                                         \
  "o.id, o.\"group\", o.kind, o.slug, o.spec, o.spec_version, o.status, o.status_version, " \
  "o.generation, o.observed_generation, o.observed_at, o.resource_version, "                \
  "o.deletion_requested_at, o.finalizers, o.created_at, o.updated_at, o.labels"

// Hand-written: the labels primary key gives the matching ids in id order, each object
// is read by rowid.
constexpr const char* kRawSelective = "SELECT " RAW_COLUMNS R"sql(
  FROM labels AS l CROSS JOIN objects AS o ON o.id = l.object_id
 WHERE l.key = ?3 AND l.value = ?4 AND l.object_id > 0
   AND o."group" = ?1 AND o.kind = ?2
 ORDER BY l.object_id)sql";

// The WHERE beehive builds for list(ctx, with_selector("tier=gold")), same columns as
// the hand-written one (beehive also reads the conditions subquery, skipped for objects
// without conditions).
constexpr const char* kShippedSelective = "SELECT " RAW_COLUMNS R"sql(
  FROM objects AS o
 WHERE o."group" = ?1 AND o.kind = ?2 AND o.id > 0
   AND o.id IN (SELECT object_id FROM labels WHERE key = ?3 AND value = ?4)
 ORDER BY o.id)sql";

// The shipped statement with the kind's terms made unusable for an index (unary +): the
// planner then takes the ids from the IN list and reads each object by rowid, as it does
// on its own once ANALYZE has run. A query shape that fixes the plan without statistics.
constexpr const char* kFixedSelective = "SELECT " RAW_COLUMNS R"sql(
  FROM objects AS o
 WHERE +o."group" = ?1 AND +o.kind = ?2 AND o.id > 0
   AND o.id IN (SELECT object_id FROM labels WHERE key = ?3 AND value = ?4)
 ORDER BY o.id)sql";

constexpr const char* kRawFull = "SELECT " RAW_COLUMNS R"sql(
  FROM objects AS o WHERE o."group" = ?1 AND o.kind = ?2 ORDER BY o.id)sql";

// --- the populated file ------------------------------------------------------------------

void print_plan(SQLite::Database& db, const char* label, const char* sql) {
  SQLite::Statement q(db, std::string("EXPLAIN QUERY PLAN ") + sql);
  q.bind(1, kKind.group);
  q.bind(2, kKind.kind);
  q.bind(3, "tier");
  q.bind(4, "gold");
  std::cerr << "EXPLAIN QUERY PLAN, " << label << ":\n";
  while (q.executeStep())
    std::cerr << "  " << q.getColumn(0).getInt() << " " << q.getColumn(1).getInt() << " "
              << q.getColumn(3).getString() << "\n";
}

const fs::path& populated() {
  static std::unique_ptr<DbFile> file;
  if (!file) {
    file = std::make_unique<DbFile>("selectors");
    {
      beehive::sqlite::Options opts;
      auto store = beehive::sqlite::open(file->path, opts);
      auto bh = std::make_unique<beehive::Beehive>(store);
      auto cc = beehive::register_controller<Spec, Status>(
          *bh, kKind,
          [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; });
      Objects items(*bh, kKind);
      Context ctx;
      const beehive::Labels gold{{"tier", "gold"}}, bronze{{"tier", "bronze"}};
      for (int done = 0; done < kObjects;) {
        const int m = std::min(5000, kObjects - done);
        cc.within(ctx, [&](const Context& tx) {
          for (int i = done; i < done + m; ++i)
            items.create(tx, Spec{"item", i},
                         beehive::with_labels((i + 1) % kEvery == 0 ? gold : bronze));
        });
        done += m;
      }
      bh.reset();
    }
    checkpoint(file->path);
    SQLite::Database db(file->path.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
    print_plan(db, "beehive's selective list (the shipped WHERE)", kShippedSelective);
    print_plan(db, "hand-written selective list", kRawSelective);
    print_plan(db, "beehive's statement with +o.\"group\", +o.kind", kFixedSelective);
  }
  return file->path;
}

// A beehive over the populated file (not started: list needs no controller).
struct Reader {
  explicit Reader(const fs::path& path) {
    beehive::sqlite::Options opts;
    store = beehive::sqlite::open(path, opts);
    bh = std::make_unique<beehive::Beehive>(store);
    items = std::make_unique<Objects>(*bh, kKind);
  }
  ~Reader() {
    items.reset();
    bh.reset();
    store.reset();
  }
  std::shared_ptr<beehive::Store> store;
  std::unique_ptr<beehive::Beehive> bh;
  std::unique_ptr<Objects> items;
  Context ctx;
};

struct RawWithLabels {
  RawRow row;
  std::optional<std::string> labels;
};

void raw_list(benchmark::State& state, const char* sql, bool selective) {
  const auto& path = populated();
  SQLite::Database ro(path.string(), SQLite::OPEN_READONLY, kBusyTimeoutMs);
  SQLite::Statement sel(ro, sql);
  const std::size_t expected = selective ? kGold : kObjects;
  for (auto _ : state) {
    sel.bind(1, kKind.group);
    sel.bind(2, kKind.kind);
    if (selective) {
      sel.bind(3, "tier");
      sel.bind(4, "gold");
    }
    std::vector<RawWithLabels> rows;
    while (sel.executeStep()) rows.push_back({read_raw(sel), opt_text(sel.getColumn(16))});
    sel.reset();
    if (rows.size() != expected) {
      state.SkipWithError("wrong row count");
      break;
    }
    benchmark::DoNotOptimize(rows);
  }
  state.counters["rows"] = static_cast<double>(expected);
}

void BM_RawSelectorList(benchmark::State& state) { raw_list(state, kRawSelective, true); }
void BM_RawSelectorListShipped(benchmark::State& state) {
  raw_list(state, kShippedSelective, true);
}
void BM_RawSelectorListFixed(benchmark::State& state) { raw_list(state, kFixedSelective, true); }
void BM_RawFullList(benchmark::State& state) { raw_list(state, kRawFull, false); }

void BM_SelectorList(benchmark::State& state) {
  Reader r(populated());
  const auto selector = beehive::with_selector("tier=gold");
  for (auto _ : state) {
    auto gold = r.items->list(r.ctx, selector);
    if (gold.size() != static_cast<std::size_t>(kGold) ||
        gold.front().labels.at("tier") != "gold") {
      state.SkipWithError("wrong objects");
      break;
    }
    benchmark::DoNotOptimize(gold);
  }
  state.counters["rows"] = kGold;
}

void BM_FullList(benchmark::State& state) {
  Reader r(populated());
  for (auto _ : state) {
    auto all = r.items->list(r.ctx);
    if (all.size() != static_cast<std::size_t>(kObjects)) {
      state.SkipWithError("wrong object count");
      break;
    }
    benchmark::DoNotOptimize(all);
  }
  state.counters["rows"] = kObjects;
}

// A page of 100 from the middle of the kind: of the objects labelled tier=bronze (99% of
// them), or of all of them. A page of a common label should cost about a page of the
// kind, not every match (a list of 99 000 ids built for each page).
template <class... Opts>
void page_from_middle(benchmark::State& state, const Opts&... opts) {
  Reader r(populated());
  auto middle = r.items->list_page(r.ctx, kObjects / 2, "", opts...).continue_token;
  for (auto _ : state) {
    auto page = r.items->list_page(r.ctx, 100, middle, opts...);
    if (page.items.size() != 100 ||
        (sizeof...(opts) && page.items.front().labels.at("tier") != "bronze")) {
      state.SkipWithError("wrong objects");
      break;
    }
    benchmark::DoNotOptimize(page);
  }
  state.counters["rows"] = 100;
}
void BM_PageOfACommonLabel(benchmark::State& state) {
  page_from_middle(state, beehive::with_selector("tier=bronze"));
}
void BM_PageOfTheKind(benchmark::State& state) { page_from_middle(state); }

BENCHMARK(BM_RawSelectorList)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawSelectorListShipped)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawSelectorListFixed)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SelectorList)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawFullList)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FullList)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PageOfACommonLabel)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PageOfTheKind)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
