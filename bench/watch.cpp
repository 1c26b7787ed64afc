// Watches: what open watch streams cost a writer.
//
// Every case times the same thing: a blocking Client::update of one object (of 100) whose
// spec changes every iteration, on a started beehive (no controllers) over a fresh
// database file (WAL, synchronous NORMAL) under $BENCH_DB_DIR (default /tmp). Only the
// watches open during the loop differ:
//
//   BM_WatchedUpdate/none           no watch: the baseline of the ratios
//   BM_WatchedUpdate/one            1 watch_list on the written kind, consumed
//   BM_WatchedUpdate/many           64 watch_list streams on the written kind, consumed
//   BM_WatchedUpdate/other_kinds    16 watch_list streams, one on each of 16 other kinds
//                                   that nothing writes, consumed
//   BM_WatchedUpdate/slow           1 watch_list on the written kind that nobody reads
//                                   while the loop runs (conflation must keep it to one
//                                   pending change)
//
// "Consumed": one drainer thread reads every stream with next_for in a loop (decoding
// each change into Object<Spec, Status>, as an application would), blocking on the
// first stream while all are empty. `python3 bench/ratios.py --suite watch` prints each
// case as a ratio to `none` from the same run.
//
// Fan-out under a fast writer (what the hub holds when it cannot keep up):
//
//   BM_WatchFanout/watchers:N/writes:W   N watch_list streams on one kind, each read by a
//                                        thread of its own (blocking next, decoding),
//                                        while one thread updates 20 objects round-robin
//                                        as fast as it can, W times.
//
// Cases: no watcher x 200 000 writes (the baseline of the write rate), 10 x 20 000,
// 200 x 20 000 and 200 x 200 000. Counters: `peak_rss_growth_MiB` (resident memory
// sampled every 2 ms from the first write until every watcher has seen the last, minus
// before the first write), `lag_ms` (from the return of the last write until the last
// watcher has seen it), `writes/s`. What the hub and the streams hold is bounded by
// objects x watchers: ten times the writes must not grow the memory, nor the lag.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

namespace {

using namespace bench;
using namespace std::chrono_literals;
using beehive::ObjectID;
using beehive::Stream;

const beehive::GroupKind item_kind{"acme.com", "Item"};

constexpr int kRows = 100;
constexpr ObjectID kTarget = kRows / 2;
constexpr int kOtherKinds = 16;
constexpr int kManyWatchers = 64;

enum class Case { none, one, many, other_kinds, slow };

// Reads every stream it is given until stopped, on a thread of its own.
class Drainer {
 public:
  explicit Drainer(std::vector<Stream<ObjChange>> streams) : streams_(std::move(streams)) {
    if (!streams_.empty()) thread_ = std::thread([this] { run(); });
  }
  ~Drainer() { stop(); }

  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::int64_t received() const { return received_.load(); }

 private:
  void run() {
    while (!stop_.load(std::memory_order_relaxed)) {
      bool got = false;
      for (auto& s : streams_)
        while (auto c = s.next_for(0ms)) {
          benchmark::DoNotOptimize(c->object.spec.n);
          received_.fetch_add(1, std::memory_order_relaxed);
          got = true;
        }
      if (got) continue;
      // All empty: sleep on the first stream (a write reaches every stream of the kind
      // at about the same time).
      if (auto c = streams_.front().next_for(5ms)) {
        benchmark::DoNotOptimize(c->object.spec.n);
        received_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  std::vector<Stream<ObjChange>> streams_;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> received_{0};
  std::thread thread_;
};

// Takes the snapshot's Added off a fresh stream, so that the loop starts from nothing
// pending (for the slow case, so that the count after the loop says what it buffered).
void take_snapshot(Stream<ObjChange>& s, int expected) {
  for (int i = 0; i < expected; ++i)
    if (!s.next_for(5s)) throw std::runtime_error("watch snapshot incomplete");
}

void BM_WatchedUpdate(benchmark::State& state, Case c) {
  Hive hive("watch");
  Objects items(*hive.bh, item_kind);
  for (int i = 0; i < kRows; ++i) items.create(hive.ctx, Spec{"item", -1});
  hive.start();

  std::vector<Stream<ObjChange>> consumed;
  std::vector<Objects> others;
  Stream<ObjChange> slow;
  int watchers = 0;  // on the written kind, consumed
  switch (c) {
    case Case::none:
      break;
    case Case::one:
    case Case::many:
      watchers = c == Case::one ? 1 : kManyWatchers;
      for (int i = 0; i < watchers; ++i) {
        consumed.push_back(items.watch_list(hive.ctx));
        take_snapshot(consumed.back(), kRows);
      }
      break;
    case Case::other_kinds:
      for (int i = 0; i < kOtherKinds; ++i) {
        others.emplace_back(*hive.bh, beehive::GroupKind{"acme.com", "Other" + std::to_string(i)});
        consumed.push_back(others.back().watch_list(hive.ctx));
      }
      break;
    case Case::slow:
      slow = items.watch_list(hive.ctx);
      take_snapshot(slow, kRows);
      break;
  }
  checkpoint(hive.file.path);
  Drainer drainer(std::move(consumed));
  const long rss_before = rss_kib();

  int i = 0;
  for (auto _ : state) {
    auto obj = items.update(hive.ctx, kTarget, Spec{"item", i++});
    benchmark::DoNotOptimize(obj.generation);
  }

  const long rss_after = rss_kib();
  // Every iteration must have been a real write.
  if (items.get(hive.ctx, kTarget).generation != 1 + i)
    state.SkipWithError("an update did not bump the generation");

  // Let consumers catch up with the last write (bounded), then stop them.
  if (watchers > 0) {
    for (auto until = Clock::now() + 2s; Clock::now() < until;) {
      if (drainer.received() >= watchers) break;
      std::this_thread::sleep_for(1ms);
    }
  }
  drainer.stop();
  if (watchers > 0) {
    // Conflation may merge writes, but each consumer sees at least the last one.
    state.counters["delivered/write"] =
        static_cast<double>(drainer.received()) / (static_cast<double>(i) * watchers);
    if (drainer.received() < watchers) state.SkipWithError("a watcher got nothing");
  }
  if (c == Case::slow) {
    // What the unread stream held after `i` writes of one object. The hub delivers
    // after the writer has replied, so give it a moment to push the last change first.
    std::this_thread::sleep_for(200ms);
    int pending = 0;
    std::int64_t last_n = -1;
    while (auto ch = slow.next_for(0ms)) {
      ++pending;
      last_n = ch->object.spec.n;
    }
    state.counters["pending_after"] = pending;
    if (pending != 1 || last_n != i - 1)
      state.SkipWithError("the unread stream did not conflate to the latest change");
  }
  state.counters["rss_growth_KiB"] = static_cast<double>(rss_after - rss_before);
  set_rate(state);
}

constexpr int kFanoutObjects = 20;

/// Samples the resident set every 2 ms on a thread of its own and keeps the peak.
class RssPeak {
 public:
  RssPeak() : thread_([this] { run(); }) {}
  ~RssPeak() { stop(); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  long peak_kib() const { return peak_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      peak_.store(std::max(peak_.load(), rss_kib()));
      std::this_thread::sleep_for(2ms);
    }
    peak_.store(std::max(peak_.load(), rss_kib()));
  }
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_{0};
  std::thread thread_;
};

void BM_WatchFanout(benchmark::State& state) {
  const int watchers = static_cast<int>(state.range(0));
  const int writes = static_cast<int>(state.range(1));
  Hive hive("fanout");
  Objects items(*hive.bh, item_kind);
  std::vector<ObjectID> ids;
  for (int i = 0; i < kFanoutObjects; ++i)
    ids.push_back(items.create(hive.ctx, Spec{"item", 0}).id);
  hive.start();
  checkpoint(hive.file.path);

  // The last write is write number `writes`, of this object: a watcher has seen the
  // last commit when that object reaches that value (conflation keeps the newest).
  const ObjectID last_id = ids[(writes - 1) % kFanoutObjects];
  for (auto _ : state) {
    std::vector<Stream<ObjChange>> streams;
    for (int i = 0; i < watchers; ++i) {
      streams.push_back(items.watch_list(hive.ctx));
      take_snapshot(streams.back(), kFanoutObjects);
    }
    std::atomic<int> caught_up{0};
    std::atomic<std::int64_t> last_seen_ns{0};  // steady clock, the latest catch-up
    std::atomic<std::int64_t> received{0};
    std::atomic<bool> give_up{false};
    std::vector<std::thread> readers;
    for (auto& s : streams)
      readers.emplace_back([&, s = &s] {
        while (!give_up.load(std::memory_order_relaxed)) {
          auto c = s->next_for(100ms);
          if (!c) continue;
          received.fetch_add(1, std::memory_order_relaxed);
          if (c->object.id == last_id && c->object.spec.n == writes) {
            auto now = Clock::now().time_since_epoch().count();
            auto prev = last_seen_ns.load();
            while (prev < now && !last_seen_ns.compare_exchange_weak(prev, now)) {
            }
            caught_up.fetch_add(1);
            return;
          }
        }
      });
    const long rss_before = rss_kib();
    RssPeak peak;
    auto t0 = Clock::now();
    for (int i = 1; i <= writes; ++i)
      items.update(hive.ctx, ids[(i - 1) % kFanoutObjects], Spec{"item", i});
    auto written = Clock::now();
    bool all = false;
    for (auto until = written + 300s; Clock::now() < until;) {
      if ((all = caught_up.load() == watchers)) break;
      std::this_thread::sleep_for(1ms);
    }
    peak.stop();
    give_up.store(true);
    for (auto& t : readers) t.join();
    if (!all) {
      state.SkipWithError("a watcher never saw the last write");
      break;
    }
    auto seen = Clock::time_point(Clock::duration(last_seen_ns.load()));
    state.SetIterationTime(seconds_since(t0));
    state.counters["lag_ms"] =
        std::max(0.0, std::chrono::duration<double, std::milli>(seen - written).count());
    state.counters["peak_rss_growth_MiB"] =
        static_cast<double>(peak.peak_kib() - rss_before) / 1024.0;
    state.counters["writes/s"] = writes / std::chrono::duration<double>(written - t0).count();
    if (watchers > 0)
      state.counters["delivered/write"] =
          static_cast<double>(received.load()) / (static_cast<double>(writes) * watchers);
  }
}
BENCHMARK(BM_WatchFanout)
    ->ArgNames({"watchers", "writes"})
    ->Args({0, 200000})
    ->Args({10, 20000})
    ->Args({200, 20000})
    ->Args({200, 200000})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

#define WATCH_BENCH(name)                               \
  BENCHMARK_CAPTURE(BM_WatchedUpdate, name, Case::name) \
      ->UseRealTime()                                   \
      ->Unit(benchmark::kMicrosecond)

WATCH_BENCH(none);
WATCH_BENCH(one);
WATCH_BENCH(many);
WATCH_BENCH(other_kinds);
WATCH_BENCH(slow);

}  // namespace
