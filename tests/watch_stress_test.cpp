// Watches under load: what waits for the watch hub stays bounded by the objects written,
// whatever the write rate and the number of watchers, and every subscriber receives each
// object's changes in increasing resource-version order, with no gap and no duplicate at
// the snapshot seam.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

using WatchStressTest = ControllerTest;
using WidgetChange = Change<WidgetSpec, WidgetStatus>;

watch_hub_state inspect_hub(Beehive& bh) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  watch_hub_state st;
  self->request(bh.watch_hub(), caf::infinite, inspect_atom::value)
      .receive([&](watch_hub_state& x) { st = x; },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  return st;
}

TEST_F(WatchStressTest, WhatWaitsForTheHubStaysOneChangePerObjectWhateverTheWriteRate) {
  // Fifty watchers, each read as fast as its thread can, make every commit expensive to
  // fan out; the writer does not wait for that. What the hub has not fanned out yet must
  // still be one change per object, not one per commit.
  constexpr int kObjects = 4;
  constexpr int kWatchers = 50;
  constexpr int kWrites = 3000;
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < kObjects; ++i) ids.push_back(w.create(ctx_, {"a", 0}).id);
  std::vector<Stream<WidgetChange>> streams;
  for (int i = 0; i < kWatchers; ++i) streams.push_back(w.watch_list(ctx_));
  std::atomic<bool> stop{false};
  std::vector<std::atomic<int>> caught_up(kWatchers);  // the watcher saw the last write
  std::vector<std::thread> readers;
  for (int i = 0; i < kWatchers; ++i)
    readers.emplace_back([&, i] {
      while (!stop)
        if (auto c = streams[i].next_for(50ms); c && c->object.spec.size == kWrites) ++caught_up[i];
    });
  for (int i = 1; i <= kWrites; ++i) w.update(ctx_, ids[i % kObjects], {"a", i});
  bool all = eventually(
      [&] {
        return std::all_of(caught_up.begin(), caught_up.end(), [](auto& n) { return n > 0; });
      },
      60s);
  stop = true;
  for (auto& t : readers) t.join();
  ASSERT_TRUE(all) << "a watcher never saw the last write";
  auto st = inspect_hub(*bh_);
  EXPECT_LE(st.peak_queued, static_cast<std::size_t>(kObjects));
  EXPECT_EQ(st.queued, 0u);
  EXPECT_LE(st.pending, static_cast<std::size_t>(kObjects * kWatchers));
}

/// What one subscriber received, checked as it arrives: each object's resource versions
/// must increase, and an object's `Added` can only be the first change of it.
class Seen {
 public:
  void add(ChangeType type, ObjectID id, std::int64_t rv) {
    std::lock_guard lk(mu_);
    auto [it, first] = last_.try_emplace(id, 0);
    if (!first && type == ChangeType::Added)
      faults_.push_back("a second Added of " + std::to_string(id));
    if (rv <= it->second)
      faults_.push_back("object " + std::to_string(id) + ": version " + std::to_string(rv) +
                        " after " + std::to_string(it->second));
    it->second = rv;
  }
  /// It holds the newest version of every object in `stored`.
  bool caught_up(const std::map<ObjectID, std::int64_t>& stored) const {
    std::lock_guard lk(mu_);
    for (auto& [id, rv] : stored) {
      auto it = last_.find(id);
      if (it == last_.end() || it->second != rv) return false;
    }
    return true;
  }
  std::vector<std::string> faults() const {
    std::lock_guard lk(mu_);
    return faults_;
  }

 private:
  mutable std::mutex mu_;
  std::map<ObjectID, std::int64_t> last_;
  std::vector<std::string> faults_;
};

/// Reads a stream on a thread of its own into a Seen until told to stop; `pause` makes
/// it a slow reader.
class Reader {
 public:
  Reader(Stream<WidgetChange> s, std::chrono::microseconds pause = {})
      : stream_(std::move(s)), thread_([this, pause] {
          while (!stop_) {
            auto c = stream_.next_for(20ms);
            if (!c) continue;
            seen.add(c->type, c->object.id, c->object.resource_version);
            if (pause.count() > 0) std::this_thread::sleep_for(pause);
          }
        }) {}
  ~Reader() {
    stop_ = true;
    thread_.join();
  }
  Seen seen;

 private:
  Stream<WidgetChange> stream_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(WatchStressTest, EachObjectsChangesArriveInIncreasingVersionOrderForEverySubscriber) {
  auto cc = register_widgets();
  auto w = widgets();
  constexpr int kObjects = 8;
  std::vector<ObjectID> ids;
  for (int i = 0; i < kObjects; ++i) ids.push_back(w.create(ctx_, {"a", 0}).id);

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto pushed = std::make_shared<Seen>();
  auto actor = sys.spawn([pushed](caf::event_based_actor*) -> caf::behavior {
    return {[pushed](const object_change& c) {
              pushed->add(c.type, c.row.meta.id, c.row.meta.resource_version);
            },
            [](const watch_ended&) {}};
  });
  {
    caf::scoped_actor self{sys};
    self->request(bh_->watch_hub(), caf::infinite, watch_request{widget_kind, std::nullopt, actor})
        .receive([](std::uint64_t) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < 3; ++i) readers.push_back(std::make_unique<Reader>(w.watch_list(ctx_)));
  auto slow = std::make_unique<Reader>(w.watch_list(ctx_), 300us);
  auto one = std::make_unique<Reader>(w.watch(ctx_, ids[0]));

  std::atomic<int> writes{0};
  std::atomic<int> writers_left{5};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      for (int i = 1; i <= 800; ++i, ++writes)
        w.update(ctx_, ids[(i * 7 + t) % kObjects], {"a", i});
      --writers_left;
    });
  writers.emplace_back([&] {  // blocks that change two objects' status and conditions
    for (int i = 1; i <= 150; ++i, ++writes) {
      bool ready = i % 2 == 0;
      cc.within(ctx_, [&](const Context& tx) {
        for (auto id : {ids[i % kObjects], ids[(i + 3) % kObjects]}) {
          cc.update_status(tx, id, 1, {ready});
          cc.set_condition(tx, id,
                           {"Ready", ready ? ConditionStatus::True : ConditionStatus::False});
        }
      });
    }
    --writers_left;
  });
  writers.emplace_back([&] {  // objects created part-way, changed at once
    for (int i = 1; i <= 40; ++i, ++writes) {
      auto o = w.create(ctx_, {"new", 0});
      w.update(ctx_, o.id, {"new", 1});
      w.update(ctx_, o.id, {"new", 2});
    }
    --writers_left;
  });
  // Watches opened part-way through: a new one every 150 writes, each read until the
  // next opens; the last stays open.
  std::vector<std::unique_ptr<Reader>> late;
  while (writers_left > 0) {
    late.push_back(std::make_unique<Reader>(w.watch_list(ctx_)));
    int at = writes;
    while (writers_left > 0 && writes < at + 150) std::this_thread::yield();
  }
  for (auto& t : writers) t.join();

  std::map<ObjectID, std::int64_t> stored;
  for (auto& o : w.list(ctx_)) stored[o.id] = o.resource_version;
  std::map<ObjectID, std::int64_t> stored_one{{ids[0], stored[ids[0]]}};
  std::vector<Seen*> complete{&pushed.operator*(), &slow->seen, &late.back()->seen};
  for (auto& r : readers) complete.push_back(&r->seen);
  for (auto* seen : complete)  // no gap: each converges to what the store holds
    EXPECT_TRUE(eventually([&] { return seen->caught_up(stored); }, 30s));
  EXPECT_TRUE(eventually([&] { return one->seen.caught_up(stored_one); }, 30s));

  std::vector<Seen*> all = complete;
  all.push_back(&one->seen);
  for (auto& r : late) all.push_back(&r->seen);
  for (std::size_t i = 0; i < all.size(); ++i)
    for (auto& f : all[i]->faults()) ADD_FAILURE() << "subscriber " << i << ": " << f;
  EXPECT_GE(late.size(), 3u);  // watches did open part-way through
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace beehive::test
