// Relations: cascade deletion through owners, and what the load options add to a list.
//
//   BM_CascadeDelete/children:<n>/warmed:<0|1>
//                                   an owner with n children (with_owner), no
//                                   finalizers, on a started beehive. Time from
//                                   remove(owner) until a watch on the owner reports
//                                   ChangeType::Deleted (the owner is physically gone,
//                                   which GC does only after every child is gone). Set
//                                   manually per iteration; us/child is derived.
//                                   warmed:1 first runs one throwaway 1-child cascade on
//                                   the same beehive, so the writer's statements are
//                                   prepared, as in a process that has been running;
//                                   warmed:0 is the first cascade of a fresh beehive.
//   BM_FinalizerRelease/held:<n>    200 deletion-pending objects held by a finalizer,
//                                   released one by one, beside n that stay held; time
//                                   from the first release until the last released one
//                                   is collected (held:0 is the baseline).
//   BM_List/<load>                  Client::list of 10 000 objects with one load option
//                                   (or none: plain, the baseline of the ratios; all:
//                                   the five together).
//
// Each cascade iteration uses a fresh database file; each list case one fresh file,
// populated once. WAL, synchronous NORMAL, under $BENCH_DB_DIR (default /tmp).
// `python3 bench/ratios.py --suite relations` prints the tables.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

namespace {

using namespace bench;
using namespace std::chrono_literals;
using beehive::ChangeType;
using beehive::Context;
using beehive::ControllerClient;
using beehive::ObjectID;
using beehive::Result;

const beehive::GroupKind owner_kind{"acme.com", "Owner"};
const beehive::GroupKind child_kind{"acme.com", "Child"};
const beehive::GroupKind item_kind{"acme.com", "Item"};
// A kind with a do-nothing controller: only there for its ControllerClient::within
// (setup in one transaction); it holds no objects.
const beehive::GroupKind setup_kind{"acme.com", "Setup"};

ControllerClient<Status> register_setup_kind(beehive::Beehive& bh) {
  return beehive::register_controller<Spec, Status>(
      bh, setup_kind,
      [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; });
}

// --- finalizer releases behind a backlog ------------------------------------------------

constexpr int kReleased = 200;

// Objects whose deletion is requested, each held by a finalizer: `held` of them stay held,
// kReleased are released one by one (each release a commit that triggers a GC pass).
// Time from the first release until the last released object is collected.
void BM_FinalizerRelease(benchmark::State& state) {
  const int held = static_cast<int>(state.range(0));
  for (auto _ : state) {
    Hive hive("finalizers");
    auto cc = beehive::register_controller<Spec, Status>(
        *hive.bh, item_kind,
        [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; });
    Objects items(*hive.bh, item_kind);
    std::vector<ObjectID> released;
    cc.within(hive.ctx, [&](const Context& tx) {
      for (int i = 0; i < held + kReleased; ++i) {
        auto o = items.create(tx, Spec{"item", i}, beehive::with_finalizers({"acme.com/hold"}));
        items.remove(tx, o.id);
        if (i >= held) released.push_back(o.id);
      }
    });
    checkpoint(hive.file.path);
    hive.start();
    std::this_thread::sleep_for(3s);  // the start's reconciles of every object, untimed
    auto watch = items.watch(hive.ctx, released.back());
    watch.next_for(5s);  // the snapshot
    auto t0 = Clock::now();
    for (auto id : released) cc.remove_finalizer(hive.ctx, id, "acme.com/hold");
    bool gone = false;
    while (auto ch = watch.next_for(60s))
      if (ch->type == ChangeType::Deleted) {
        gone = true;
        break;
      }
    state.SetIterationTime(seconds_since(t0));
    if (!gone) {
      state.SkipWithError("the last released object was not collected");
      break;
    }
  }
}

// --- cascade delete ----------------------------------------------------------------------

// Creates an owner with `children` children in one transaction; returns the owner.
ObjectID make_family(const ControllerClient<Status>& setup, const Objects& owners,
                     const Objects& kids, const Context& ctx, int children) {
  ObjectID owner = 0;
  setup.within(ctx, [&](const Context& tx) {
    owner = owners.create(tx, Spec{"owner", 0}).id;
    for (int i = 0; i < children; ++i)
      kids.create(tx, Spec{"child", i}, beehive::with_owner(owner));
  });
  return owner;
}

// Removes `owner` and waits for its watch to report the physical removal; false when
// it did not come within 60 s.
bool remove_and_wait(beehive::Stream<ObjChange>& watch, const Objects& owners, const Context& ctx,
                     ObjectID owner) {
  owners.remove(ctx, owner);
  while (auto ch = watch.next_for(60s))
    if (ch->type == ChangeType::Deleted) return true;
  return false;
}

void BM_CascadeDelete(benchmark::State& state) {
  const int children = static_cast<int>(state.range(0));
  const bool warmed = state.range(1) != 0;
  double timed = 0;
  for (auto _ : state) {
    Hive hive("cascade");
    auto setup = register_setup_kind(*hive.bh);
    Objects owners(*hive.bh, owner_kind);
    Objects kids(*hive.bh, child_kind);
    const ObjectID owner = make_family(setup, owners, kids, hive.ctx, children);
    checkpoint(hive.file.path);
    hive.start();
    if (warmed) {
      const ObjectID throwaway = make_family(setup, owners, kids, hive.ctx, 1);
      auto w = owners.watch(hive.ctx, throwaway);
      if (!remove_and_wait(w, owners, hive.ctx, throwaway)) {
        state.SkipWithError("the warm-up cascade did not finish");
        break;
      }
    }
    auto watch = owners.watch(hive.ctx, owner);
    auto first = watch.next_for(5s);
    if (!first || first->type != ChangeType::Added) {
      state.SkipWithError("no snapshot of the owner");
      break;
    }

    auto t0 = Clock::now();
    const bool gone = remove_and_wait(watch, owners, hive.ctx, owner);
    const double elapsed = seconds_since(t0);
    state.SetIterationTime(elapsed);
    timed += elapsed;

    if (!gone || !kids.list(hive.ctx).empty()) {
      state.SkipWithError("the owner or a child was not collected");
      break;
    }
  }
  if (timed > 0) {
    const double iters = static_cast<double>(state.iterations());
    state.counters["us/child"] = timed * 1e6 / (children * iters);
  }
}

// --- list with load options --------------------------------------------------------------

constexpr int kListObjects = 10000;

enum class Load { plain, owner, dependencies, dependents, owned, events, all };

// 10 000 items in pairs (2k, 2k+1): the odd one is owned by the even one and depends on
// it, and carries two event runs. So every relation is non-empty for half of the list:
// owner and dependencies for the odd ones, owned and dependents for the even ones,
// events for the odd ones.
//
// There is no public call that records events yet, so the event rows are inserted with
// SQLiteCpp into beehive's `events` table (src/store/sqlite/sqlite_schema.cpp), in the shape
// the store reads back.
struct ListFixture {
  ListFixture() : hive("list") {
    auto cc = beehive::register_controller<Spec, Status>(
        *hive.bh, item_kind,
        [](const Context&, ControllerClient<Status>&, const Obj&) { return Result{}; });
    items.emplace(*hive.bh, item_kind);
    std::vector<ObjectID> odd;
    cc.within(hive.ctx, [&](const Context& tx) {
      for (int i = 0; i < kListObjects / 2; ++i) {
        auto parent = items->create(tx, Spec{"item", 2 * i});
        auto child = items->create(tx, Spec{"item", 2 * i + 1}, beehive::with_owner(parent.id));
        cc.add_dependency(tx, child.id, parent.id);
        odd.push_back(child.id);
      }
    });
    SQLite::Database db(hive.file.path.string(), SQLite::OPEN_READWRITE, kBusyTimeoutMs);
    SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement ins(db, R"sql(
      INSERT INTO events (object_id, category, type, reason, message, detail, count,
                          first_at, last_at)
      VALUES (?1, ?2, 'Normal', 'Synced', 'synced with the backend', NULL, 3, ?3, ?3))sql");
    const std::int64_t now = beehive::to_millis(std::chrono::system_clock::now());
    for (auto id : odd) {
      for (const char* category : {"", "health"}) {
        ins.bind(1, id);
        ins.bind(2, category);
        ins.bind(3, now);
        ins.exec();
        ins.reset();
      }
    }
    txn.commit();
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }

  std::vector<Obj> list(Load l) const {
    using namespace beehive;
    switch (l) {
      case Load::plain:
        return items->list(hive.ctx);
      case Load::owner:
        return items->list(hive.ctx, load_owner());
      case Load::dependencies:
        return items->list(hive.ctx, load_dependencies());
      case Load::dependents:
        return items->list(hive.ctx, load_dependents());
      case Load::owned:
        return items->list(hive.ctx, load_owned());
      case Load::events:
        return items->list(hive.ctx, load_events());
      case Load::all:
        return items->list(hive.ctx, load_owner(), load_dependencies(), load_dependents(),
                           load_owned(), load_events());
    }
    return {};
  }

  Hive hive;
  std::optional<Objects> items;
};

// Whether the relation `l` asks for came back, and non-empty for half of the objects.
bool loaded_as_expected(const std::vector<Obj>& objs, Load l) {
  if (objs.size() != static_cast<std::size_t>(kListObjects)) return false;
  std::size_t non_empty = 0;
  for (auto& o : objs) {
    switch (l) {
      case Load::plain:
        non_empty += 1;
        break;
      case Load::owner:
        non_empty += o.get_owner().has_value();
        break;
      case Load::dependencies:
        non_empty += !o.list_dependencies().empty();
        break;
      case Load::dependents:
        non_empty += !o.list_dependents().empty();
        break;
      case Load::owned:
        non_empty += !o.list_owned().empty();
        break;
      case Load::events:
        non_empty += o.list_events().size() == 2;
        break;
      case Load::all:
        non_empty += o.get_owner().has_value() || !o.list_owned().empty();
        (void)o.list_dependencies();
        (void)o.list_dependents();
        (void)o.list_events();
        break;
    }
  }
  const std::size_t want = (l == Load::plain || l == Load::all) ? objs.size() : objs.size() / 2;
  return non_empty == want;
}

void BM_List(benchmark::State& state, Load l) {
  ListFixture f;
  try {
    if (!loaded_as_expected(f.list(l), l)) {
      state.SkipWithError("relations missing from the list");
      return;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    auto objs = f.list(l);
    benchmark::DoNotOptimize(objs.data());
  }
  state.counters["objects/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kListObjects, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_FinalizerRelease)
    ->ArgName("held")
    ->Arg(0)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_CascadeDelete)
    ->ArgNames({"children", "warmed"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({16, 1})
    ->Iterations(20)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CascadeDelete)
    ->ArgNames({"children", "warmed"})
    ->Args({256, 1})
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CascadeDelete)
    ->ArgNames({"children", "warmed"})
    ->Args({4096, 1})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

#define LIST_BENCH(name) \
  BENCHMARK_CAPTURE(BM_List, name, Load::name)->UseRealTime()->Unit(benchmark::kMillisecond)

LIST_BENCH(plain);
LIST_BENCH(owner);
LIST_BENCH(dependencies);
LIST_BENCH(dependents);
LIST_BENCH(owned);
LIST_BENCH(events);
LIST_BENCH(all);

}  // namespace
