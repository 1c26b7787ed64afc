// Watches: snapshot then live, conflation, the seam, endings, actor subscribers.

#include <barrier>
#include <caf/all.hpp>
#include <condition_variable>
#include <future>
#include <limits>

#include <beehive/actors.hpp>

#include "actors/reader.hpp"
#include "beehive_core.hpp"
#include "controller_fixture.hpp"
#include "held_reader.hpp"

namespace beehive::test {
namespace {

using WatchTest = ControllerTest;
using WidgetChange = Change<WidgetSpec, WidgetStatus>;

WidgetChange next(Stream<WidgetChange>& s) {
  auto c = s.next_for(5s);
  if (!c) throw std::runtime_error("no change within 5 s");
  return std::move(*c);
}

/// A watch resumed from `s`'s position hears first of an object created now: nothing
/// that came before it.
void expect_resumed_hears_only_what_follows(Widgets& w, Stream<WidgetChange>& s) {
  auto resumed = w.watch_list({}, with_resume_from(s.resource_version()));
  auto later = w.create({}, {"later", 1});
  auto r = next(resumed);
  EXPECT_EQ(r.type, ChangeType::Added);
  EXPECT_EQ(r.object.id, later.id);
}

/// Waits until object `id` is physically removed and the writer has posted its removal
/// to the hub's inbox. A read that no longer finds it proves only the commit: a write
/// after it proves the post (the writer posts each commit before it takes the next),
/// here of a kind the tests' watches do not see. False when it is not removed in time.
bool removed_and_posted(Beehive& bh, Widgets& w, ObjectID id) {
  bool removed = eventually([&] {
    try {
      w.get({}, id);
      return false;
    } catch (const Error& e) {
      return e.code() == errc::not_found;
    }
  });
  if (removed) Widgets(bh, gadget_kind).create({}, {"after", 1});
  return removed;
}

/// What an actor subscriber received: the changes, and whether its watch ended.
struct Inbox {
  std::mutex mu;
  std::vector<object_change> changes;
  bool ended = false;
};

/// An actor that records what a watch sends it.
caf::actor spawn_inbox(caf::actor_system& sys, std::shared_ptr<Inbox> inbox) {
  return sys.spawn([inbox](caf::event_based_actor*) -> caf::behavior {
    return {
        [inbox](const object_change& c) {
          std::lock_guard lk(inbox->mu);
          inbox->changes.push_back(c);
        },
        [inbox](const watch_ended&) {
          std::lock_guard lk(inbox->mu);
          inbox->ended = true;
        },
    };
  });
}

/// The watch hub's state (its watches, what their readers have not read yet).
watch_hub_state inspect_hub(Beehive& bh) {
  auto hub = bh.watch_hub();
  caf::scoped_actor self{hub->home_system()};
  watch_hub_state out;
  self->request(hub, caf::infinite, inspect_atom::value)
      .receive([&](watch_hub_state& st) { out = st; }, [](caf::error&) { FAIL(); });
  return out;
}

/// Makes the hub lag while alive: commits wait in its inbox (folded per object) until
/// `wake()` has it take them, or `release()` lets it go back to being woken by them.
class LaggingHub {
 public:
  explicit LaggingHub(Beehive& bh) : bh_(bh) {
    inbox().attach(sink_.address());
    inspect_hub(bh);  // after a wake sent to it before (it takes nothing of what follows)
  }
  ~LaggingHub() { caf::anon_send_exit(sink_, caf::exit_reason::user_shutdown); }
  detail::HubInbox& inbox() { return bh_.core()->hub_feed().inbox; }
  void wake() {
    caf::anon_send(caf::actor_cast<caf::actor>(bh_.watch_hub()), detail::hub_wake_atom::value);
  }
  void release() { inbox().attach(bh_.watch_hub()->address()); }

 private:
  Beehive& bh_;
  caf::actor_system_config cfg_;
  caf::actor_system sys_{cfg_};
  caf::actor sink_ = sys_.spawn(
      [](caf::event_based_actor*) -> caf::behavior { return {[](detail::hub_wake_atom) {}}; });
};

/// Asks the hub for a subscription (a watch_request or an event_watch_request); its id.
template <class Request>
std::uint64_t subscribe_with(caf::scoped_actor& self, const watch_hub_actor& hub, Request r) {
  std::uint64_t sub = 0;
  self->request(hub, caf::infinite, std::move(r))
      .receive([&](std::uint64_t id) { sub = id; }, [](caf::error&) { FAIL(); });
  return sub;
}

/// The application's side of an actor subscription: an actor system of its own, an
/// inbox actor subscribing, and a scoped actor asking the hub.
struct ActorSide {
  explicit ActorSide(watch_hub_actor h) : hub(std::move(h)) {}
  /// Asks the hub for a subscription (a watch_request or an event_watch_request).
  template <class Request>
  std::uint64_t subscribe(Request r) {
    return subscribe_with(self, hub, std::move(r));
  }

  watch_hub_actor hub;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::actor subscriber = spawn_inbox(sys, std::make_shared<Inbox>());
  caf::scoped_actor self{sys};
};

TEST_F(WatchTest, WatchListGivesTheSnapshotThenLiveChanges) {
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 2});
  Widgets(*bh_, gadget_kind).create(ctx_, {"other kind", 0});
  auto s = w.watch_list(ctx_);
  auto c1 = next(s), c2 = next(s);
  EXPECT_EQ(c1.type, ChangeType::Added);
  EXPECT_EQ(c1.object.id, a.id);
  EXPECT_EQ(c2.type, ChangeType::Added);
  EXPECT_EQ(c2.object.spec.size, 2);
  w.update(ctx_, a.id, {"a", 1});  // no-op: nothing
  auto c = w.create(ctx_, {"c", 3});
  auto c3 = next(s);
  EXPECT_EQ(c3.type, ChangeType::Added);
  EXPECT_EQ(c3.object.id, c.id);
  w.update(ctx_, b.id, {"b", 20});
  auto c4 = next(s);
  EXPECT_EQ(c4.type, ChangeType::Modified);
  EXPECT_EQ(c4.object.spec.size, 20);
  EXPECT_FALSE(s.next_for(30ms).has_value());
}

TEST_F(WatchTest, WatchOneObjectAndOneNotYetCreated) {
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto sa = w.watch(ctx_, a.id);
  auto future_id = a.id + 1;
  auto sf = w.watch(ctx_, future_id);
  EXPECT_EQ(next(sa).object.id, a.id);
  EXPECT_FALSE(sf.next_for(30ms).has_value());  // empty snapshot
  auto b = w.create(ctx_, {"b", 2});
  ASSERT_EQ(b.id, future_id);
  auto cb = next(sf);
  EXPECT_EQ(cb.type, ChangeType::Added);
  EXPECT_EQ(cb.object.spec.color, "b");
  EXPECT_FALSE(sa.next_for(30ms).has_value());  // b is not a's business
}

TEST_F(WatchTest, SoftDeleteIsModifiedAndStatusChangesAreVisible) {
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1}, with_finalizers({"f"}));
  auto s = w.watch(ctx_, o.id);
  next(s);
  cc.update_status(ctx_, o.id, 1, {true});
  auto st = next(s);
  EXPECT_EQ(st.type, ChangeType::Modified);
  EXPECT_TRUE(st.object.status->ready);
  w.update(ctx_, o.id, {"a", 2});
  auto spec = next(s);
  EXPECT_EQ(spec.object.generation, 2);
  cc.update_status(ctx_, o.id, 2, {true});  // settles generation 2, status unchanged
  auto settled = next(s);
  EXPECT_EQ(settled.type, ChangeType::Modified);
  EXPECT_EQ(settled.object.observed_generation, settled.object.generation);
  w.remove(ctx_, o.id);
  auto del = next(s);
  EXPECT_EQ(del.type, ChangeType::Modified);
  EXPECT_TRUE(del.object.deletion_requested_at.has_value());
}

TEST_F(WatchTest, ASlowReaderConvergesToTheLatestState) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 0});
  auto s = w.watch_list(ctx_);
  Widgets gadgets(*bh_, gadget_kind);
  auto markers = gadgets.watch_list(ctx_);
  for (int i = 1; i <= 10000; ++i) w.update(ctx_, o.id, {"a", i});
  // Once a later commit reaches another stream, the hub has taken every update; once it
  // has answered a request after that, it has finished handing them to `s` too (it
  // serves a batch to one stream after another).
  gadgets.create(ctx_, {"marker", 1});
  ASSERT_TRUE(markers.next_for(10s).has_value());
  {
    auto hub = bh_->watch_hub();
    caf::scoped_actor self{hub->home_system()};
    self->request(hub, caf::infinite, inspect_atom::value)
        .receive([](const watch_hub_state&) {}, [](caf::error&) { FAIL(); });
  }
  std::vector<WidgetChange> got;
  while (auto c = s.next_for(200ms)) got.push_back(std::move(*c));
  // One change, not ten thousand: the snapshot's Added, conflated with every update.
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, ChangeType::Added);
  EXPECT_EQ(got[0].object.spec.size, 10000);
}

TEST_F(WatchTest, ACreateFollowedByUpdatesStaysOneAdded) {
  auto w = widgets();
  auto s = w.watch_list(ctx_);
  Widgets gadgets(*bh_, gadget_kind);
  auto markers = gadgets.watch_list(ctx_);  // the hub handles commits in order
  auto o = w.create(ctx_, {"a", 1});
  w.update(ctx_, o.id, {"a", 2});
  w.update(ctx_, o.id, {"a", 3});
  auto deadline = std::chrono::steady_clock::now() + 5s;
  // Let the hub deliver everything before reading, so the three writes conflate.
  ASSERT_TRUE(eventually([&] { return w.get(ctx_, o.id).spec.size == 3; }));
  settle();
  auto c = next(s);
  EXPECT_EQ(c.type, ChangeType::Added);
  EXPECT_EQ(c.object.spec.size, 3);
  EXPECT_FALSE(s.next_for(30ms).has_value());
  (void)deadline;
}

TEST_F(WatchTest, UndecodableRowsAreSkippedAndTheStreamGoesOn) {
  auto w = widgets();
  Client<nlohmann::json, nlohmann::json> raw(*bh_, widget_kind);
  raw.create(ctx_, nlohmann::json{{"not", "a widget"}});
  auto good = w.create(ctx_, {"ok", 1});
  ::testing::internal::CaptureStderr();
  auto s = w.watch_list(ctx_);
  auto c = next(s);
  EXPECT_EQ(c.object.id, good.id);
  raw.create(ctx_, nlohmann::json{{"still", "not"}});
  auto later = w.create(ctx_, {"later", 2});
  EXPECT_EQ(next(s).object.id, later.id);
  EXPECT_FALSE(s.done());
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("does not decode"), std::string::npos);
}

TEST_F(WatchTest, StreamsEndOnContextCloseAndDestruction) {
  auto w = widgets();
  auto [cctx, cancel] = ctx_.with_cancel();
  auto s1 = w.watch_list(cctx);
  cancel();
  EXPECT_FALSE(s1.next_for(1s).has_value());
  EXPECT_TRUE(s1.done());
  EXPECT_FALSE(s1.error());
  auto s2 = w.watch_list(ctx_);
  s2.close();
  EXPECT_TRUE(s2.done());
  EXPECT_FALSE(s2.error());
  { auto s3 = w.watch_list(ctx_); }  // destroyed: unsubscribed
  w.create(ctx_, {"a", 1});          // the hub copes with ended streams
  auto s4 = w.watch_list(ctx_);
  EXPECT_EQ(next(s4).object.spec.color, "a");
}

// A cancellation wakes every stream waiting on its context, or on a child of it, at once
// (waiting streams no longer look at the flag every 10 ms: a lost wake-up would leave
// them waiting for ever); a stream opened on a child after the cancel ends too (or is
// refused), and streams that went before the cancel are forgotten by it.
TEST_F(WatchTest, ACancelWakesEveryStreamWaitingOnItsContextOrAChild) {
  auto w = widgets();
  auto [cctx, cancel] = ctx_.with_cancel();
  auto child = cctx.with_timeout(std::chrono::hours(1));
  { auto gone = w.watch_list(cctx); }  // ended before the cancel
  std::vector<Stream<WidgetChange>> streams;
  for (int i = 0; i < 40; ++i) streams.push_back(w.watch_list(i % 2 ? cctx : child));
  std::vector<std::future<bool>> waits;
  for (auto& s : streams)
    waits.push_back(std::async(std::launch::async, [&s] { return !s.next().has_value(); }));
  cancel();
  for (auto& f : waits) {
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "a waiting stream was not woken";
    EXPECT_TRUE(f.get());
  }
  try {
    auto late = w.watch_list(child);
    EXPECT_FALSE(late.next().has_value());
  } catch (const Error& e) {
    EXPECT_EQ(e.value(), errc::cancelled);
  }
}

TEST_F(WatchTest, StopEndsStreamsAfterDeliveringEverythingCommitted) {
  register_widgets();
  start();
  auto w = widgets();
  auto s = w.watch_list(ctx_);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(w.create(ctx_, {"a", i}).id);
  stop_(ctx_);
  std::set<ObjectID> seen;
  while (auto c = s.next()) seen.insert(c->object.id);
  EXPECT_EQ(seen.size(), ids.size());
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.error(), errc::stopped);
  EXPECT_ERRC(w.watch_list(ctx_), errc::stopped);
}

TEST_F(WatchTest, AOneObjectWatchIsKindScoped) {
  Widgets gadgets(*bh_, gadget_kind);
  auto g = gadgets.create(ctx_, {"g", 1});
  auto s = widgets().watch(ctx_, g.id);  // a gadget's id, watched as a widget
  gadgets.update(ctx_, g.id, {"g", 2});
  gadgets.remove(ctx_, g.id);
  EXPECT_FALSE(s.next_for(100ms).has_value());
}

TEST_F(WatchTest, ChangesPendingBeforeARemovalBecomeOneDeletedWithTheFinalBody) {
  start();  // GC removes deletion-pending objects without finalizers promptly
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto s = w.watch_list(ctx_);
  EXPECT_EQ(next(s).type, ChangeType::Added);  // the reader has the object
  Widgets gadgets(*bh_, gadget_kind);
  auto markers = gadgets.watch_list(ctx_);  // the hub handles commits in order
  for (int i = 2; i <= 5; ++i) w.update(ctx_, o.id, {"a", i});
  w.remove(ctx_, o.id);
  ASSERT_TRUE(eventually([&] {  // physically removed
    try {
      w.get(ctx_, o.id);
      return false;
    } catch (const Error& e) {
      return e.code() == errc::not_found;
    }
  }));
  gadgets.create(ctx_, {"marker", 1});
  ASSERT_TRUE(markers.next_for(5s).has_value());
  // The hub hands one batch of commits to its streams one stream after another: the
  // marker's may reach `markers` before the removal reaches `s`. Settled, it has.
  settle();
  auto c = next(s);  // read only now: everything above is pending, conflated
  EXPECT_EQ(c.type, ChangeType::Deleted);
  EXPECT_EQ(c.object.id, o.id);
  EXPECT_EQ(c.object.spec.size, 5);
  EXPECT_TRUE(c.object.deletion_requested_at.has_value());
  EXPECT_FALSE(s.next_for(50ms).has_value());
}

TEST_F(WatchTest, AReaderKeepingUpAtTheSeamNeverSeesAnOlderVersion) {
  // Live changes at or below the snapshot's version are dropped: a reader that consumes
  // the snapshot while writers run must never see an object's version go back or repeat.
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(w.create(ctx_, {"a", 0}).id);
  for (int round = 0; round < 30; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < 2; ++t)
      writers.emplace_back([&, t] {
        for (int i = 1; !stop; ++i) w.update(ctx_, ids[(i * 3 + t) % ids.size()], {"a", i});
      });
    std::map<ObjectID, std::int64_t> last;
    bool went_back = false;
    {
      auto s = w.watch_list(ctx_);
      auto until = std::chrono::steady_clock::now() + 30ms;
      while (!went_back && std::chrono::steady_clock::now() < until) {
        auto c = s.next_for(5ms);
        if (!c) continue;
        auto& seen = last[c->object.id];
        went_back = c->object.resource_version <= seen;
        seen = c->object.resource_version;
      }
    }
    stop = true;
    for (auto& t : writers) t.join();
    ASSERT_FALSE(went_back) << "round " << round;
  }
}

TEST_F(WatchTest, AWatchOpenedWhileTheHubLagsGetsAddedThenModified) {
  // The hub folds the changes it has not fanned out yet per object. When a watch opens
  // in between, its snapshot holds an object whose creation is still waiting for the hub
  // and whose next change is not in the snapshot: the watch must see Added (the
  // snapshot), then Modified, never a second Added.
  auto w = widgets();
  auto earlier = w.watch_list(ctx_);  // a watch is open: the writer posts to the hub
  LaggingHub lag(*bh_);               // the hub takes the inbox only when told below
  auto o = w.create(ctx_, {"a", 1});
  auto s = w.watch_list(ctx_);
  auto snap = next(s);
  EXPECT_EQ(snap.type, ChangeType::Added);
  EXPECT_EQ(snap.object.spec.size, 1);
  w.update(ctx_, o.id, {"a", 2});
  EXPECT_EQ(lag.inbox().size(), 1u);  // the creation and the update, folded
  lag.wake();
  auto live = next(s);
  EXPECT_EQ(live.type, ChangeType::Modified);
  EXPECT_EQ(live.object.spec.size, 2);
  auto first = next(earlier);  // it never had the object: one Added, as committed last
  EXPECT_EQ(first.type, ChangeType::Added);
  EXPECT_EQ(first.object.spec.size, 2);
}

// A reader that falls behind holds one pending change per object that exists, not one
// per object ever written: an object created and removed while the reader never had it
// leaves nothing behind (it would otherwise wait as a Deleted of an object the reader
// never saw, for ever).
TEST_F(WatchTest, AnObjectCreatedAndRemovedWhileUnreadLeavesNothingPending) {
  start();  // GC removes the deletion-pending objects
  auto w = widgets();
  auto kept = w.create(ctx_, {"kept", 1});
  auto s = w.watch_list(ctx_);  // not read until every object below has come and gone
  for (int i = 0; i < 20; ++i) w.remove(ctx_, w.create(ctx_, {"gone", i}).id);
  settle();
  ASSERT_EQ(w.list(ctx_).size(), 1u);
  EXPECT_EQ(inspect_hub(*bh_).pending, 1u);  // `kept`, from the snapshot
  auto c = next(s);
  EXPECT_EQ(c.type, ChangeType::Added);
  EXPECT_EQ(c.object.id, kept.id);
  EXPECT_FALSE(s.next_for(30ms).has_value());
  // Everything up to the last removal is delivered: a watch resumed there replays none
  // of the objects that came and went.
  expect_resumed_hears_only_what_follows(w, s);
}

// An object created and removed between two of the hub's takes reaches a watch as one
// folded `Deleted`, which the hub drops: the stream's position still moves past it, so
// that a watch resumed from the position does not hear of its removal either.
TEST_F(WatchTest, APositionMovesPastAnObjectTheHubDroppedWhole) {
  start();  // GC removes the deletion-pending objects
  auto w = widgets();
  auto s = w.watch_list(ctx_);
  LaggingHub lag(*bh_);  // the hub takes the inbox only when told below
  auto x = w.create(ctx_, {"x", 1});
  auto y = w.create(ctx_, {"y", 1});  // between x's creation and its removal
  w.remove(ctx_, x.id);
  ASSERT_TRUE(removed_and_posted(*bh_, w, x.id));
  lag.wake();
  auto c = next(s);
  EXPECT_EQ(c.type, ChangeType::Added);
  EXPECT_EQ(c.object.id, y.id);
  settle();
  lag.release();  // the hub is woken again (nothing is lost:
                  // it has taken everything)
  EXPECT_FALSE(s.next_for(30ms).has_value());
  expect_resumed_hears_only_what_follows(w, s);
}

// An object's creation and update folded into one change (the hub took them together)
// keep the stream's position below the creation while the change is pending: a watch
// resumed from a position read meanwhile hears of the object as Added, not as a Modified
// of an object it never had.
TEST_F(WatchTest, APositionStaysBelowTheFirstCommitOfAFoldedChange) {
  auto w = widgets();
  auto s = w.watch_list(ctx_);
  auto b = w.create(ctx_, {"b", 1});
  settle();              // b's Added is pending in s
  LaggingHub lag(*bh_);  // the hub takes the inbox only when told below
  auto a = w.create(ctx_, {"a", 1});
  w.update(ctx_, a.id, {"a", 2});
  w.update(ctx_, b.id, {"b", 2});
  lag.wake();
  settle();
  lag.release();
  auto first = next(s);
  ASSERT_EQ(first.object.id, b.id);  // placed first: b changed first
  auto position = s.resource_version();
  EXPECT_LT(position, a.resource_version) << "past a's creation, which is still pending";
  s.close();
  auto resumed = w.watch_list(ctx_, with_resume_from(position));
  auto r = next(resumed);
  EXPECT_EQ(r.object.id, a.id);
  EXPECT_EQ(r.type, ChangeType::Added);
  EXPECT_EQ(r.object.spec.size, 2);
}

// The same for a resumed watch's replay, which folds each object's changes since the
// resume point: x created and updated, y updated between the two. The folds come in
// the order of their first commits (x's, then y's); read up to x, the position stays
// below y's update, so that resuming from it replays y's update.
TEST_F(WatchTest, AReplayedFoldKeepsThePositionBelowItsFirstCommit) {
  auto w = widgets();
  auto y = w.create(ctx_, {"y", 1});
  auto s = w.watch_list(ctx_);
  ASSERT_EQ(next(s).object.id, y.id);
  auto from = s.resource_version();
  s.close();
  auto x = w.create(ctx_, {"x", 1});
  auto y2 = w.update(ctx_, y.id, {"y", 2});
  w.update(ctx_, x.id, {"x", 2});
  auto resumed = w.watch_list(ctx_, with_resume_from(from));
  auto first = next(resumed);
  ASSERT_EQ(first.object.id, x.id);  // placed first: x's first change came first
  EXPECT_EQ(first.type, ChangeType::Added);
  EXPECT_EQ(first.object.spec.size, 2);
  auto position = resumed.resource_version();
  EXPECT_GE(position, x.resource_version);
  EXPECT_LT(position, y2.resource_version) << "past y's update, which is still pending";
  resumed.close();
  auto again = w.watch_list(ctx_, with_resume_from(position));
  auto r = next(again);
  if (r.object.id == x.id) r = next(again);  // x's update, above the position, again
  EXPECT_EQ(r.object.id, y.id);
  EXPECT_EQ(r.type, ChangeType::Modified);
  EXPECT_EQ(r.object.spec.size, 2);
}

// A fold whose first commit is in a selector watch's snapshot (the object did not match
// then) and whose last is not: the object arrives as Added, and while it waits for the
// reader the stream's position stays at the snapshot, not at 0 (which reads as "the
// snapshot is not all delivered yet", though it was empty).
TEST_F(WatchTest, AFoldStraddlingASelectorSnapshotKeepsThePositionAtTheSnapshot) {
  auto w = widgets();
  auto earlier = w.watch_list(ctx_);  // a watch is open: the writer posts to the hub
  LaggingHub lag(*bh_);               // the hub takes the inbox only when told below
  auto o = w.create(ctx_, {"o", 1}, with_labels({{"tier", "lead"}}));
  auto s = w.watch_list(ctx_, with_selector("tier=gold"));  // nothing matches yet
  auto opened_at = s.resource_version();
  ASSERT_GE(opened_at, o.resource_version);
  w.set_labels(ctx_, o.id, {{"tier", "gold"}});
  EXPECT_EQ(lag.inbox().size(), 1u);  // the creation and the relabelling, folded
  lag.wake();
  settle();  // handed to s, not read
  lag.release();
  EXPECT_GE(s.resource_version(), opened_at);
  auto c = next(s);
  EXPECT_EQ(c.type, ChangeType::Added);
  EXPECT_EQ(c.object.id, o.id);
  EXPECT_GT(s.resource_version(), o.resource_version);
}

// A watch hands its snapshot over at open: an object in it that is removed before the
// reader reads anything arrives as Deleted, with its final body, rather than as nothing.
// Nothing would leave a reader that waits for the removal of the object it watches
// waiting for ever, or not, depending on whether it read the snapshot in time.
TEST_F(WatchTest, ASnapshotsObjectRemovedBeforeTheReaderReadsArrivesAsDeleted) {
  start();  // GC removes the deletion-pending objects
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 1});
  auto one = w.watch(ctx_, o.id);
  auto all = w.watch_list(ctx_);
  w.remove(ctx_, o.id);
  ASSERT_TRUE(removed_and_posted(*bh_, w, o.id));
  settle();  // and handed out
  for (auto* s : {&one, &all}) {
    auto c = s->next_for(5s);
    ASSERT_TRUE(c) << "the removal never arrived";
    EXPECT_EQ(c->type, ChangeType::Deleted);
    EXPECT_EQ(c->object.id, o.id);
    EXPECT_EQ(c->object.spec.color, "o");  // the final body
    EXPECT_TRUE(c->object.deletion_requested_at.has_value());
    EXPECT_FALSE(s->next_for(30ms).has_value());
  }
}

// The same for a selector watch: an object that starts and stops matching while the
// reader never had it leaves nothing pending.
TEST_F(WatchTest, AnObjectThatMatchedOnlyWhileUnreadLeavesNothingPending) {
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 1});
  auto s = w.watch_list(ctx_, with_selector("tier=gold"));
  for (int i = 0; i < 10; ++i) {
    w.set_labels(ctx_, o.id, {{"tier", "gold"}});
    w.set_labels(ctx_, o.id, {});
  }
  settle();
  EXPECT_EQ(inspect_hub(*bh_).pending, 0u);
  auto gold = w.create(ctx_, {"gold", 1}, with_labels({{"tier", "gold"}}));
  auto c = next(s);
  EXPECT_EQ(c.type, ChangeType::Added);
  EXPECT_EQ(c.object.id, gold.id);
}

// A pulled actor subscription conflates as a stream does.
TEST_F(WatchTest, APulledSubscriptionDropsAnObjectCreatedAndRemovedWhileUnpulled) {
  start();
  auto w = widgets();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<Inbox>();
  auto subscriber = spawn_inbox(sys, seen);
  struct Quit {
    caf::actor a;
    ~Quit() { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); }
  } quit{subscriber};
  auto hub = bh_->watch_hub();
  caf::scoped_actor self{sys};
  std::uint64_t sub = 0;
  self->request(hub, caf::infinite, watch_request{widget_kind, std::nullopt, subscriber, true})
      .receive([&](std::uint64_t id) { sub = id; }, [](caf::error&) { FAIL(); });
  for (int i = 0; i < 5; ++i) w.remove(ctx_, w.create(ctx_, {"gone", i}).id);
  auto kept = w.create(ctx_, {"kept", 1});
  settle();
  EXPECT_EQ(inspect_hub(*bh_).pending, 1u);
  std::vector<object_change> got;
  self->request(hub, std::chrono::seconds(5), pull_atom::value, sub)
      .receive([&](std::vector<object_change>& cs) { got = std::move(cs); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, ChangeType::Added);
  EXPECT_EQ(got[0].row.meta.id, kept.id);
}

// A selector watch whose reader has an object: the object stops matching and matches
// again before the reader reads. The reader still has it, so it hears Modified, never a
// second Added without a Deleted between.
TEST_F(WatchTest, ASlowSelectorReaderHearsModifiedForAnObjectThatLeftAndCameBack) {
  auto w = widgets();
  auto gold = w.create(ctx_, {"g", 1}, with_labels({{"tier", "gold"}}));
  auto s = w.watch_list(ctx_, with_selector("tier=gold"));
  auto first = next(s);
  EXPECT_EQ(first.type, ChangeType::Added);
  w.set_labels(ctx_, gold.id, {{"tier", "lead"}});
  w.update(ctx_, gold.id, {"g", 2});
  w.set_labels(ctx_, gold.id, {{"tier", "gold"}});
  settle();
  auto c = next(s);
  EXPECT_EQ(c.type, ChangeType::Modified);
  EXPECT_EQ(c.object.id, gold.id);
  EXPECT_EQ(c.object.spec.size, 2);
  EXPECT_EQ(c.object.labels.at("tier"), "gold");
  EXPECT_FALSE(s.next_for(30ms).has_value());
  // And a reader that read the Deleted hears the return as Added.
  w.set_labels(ctx_, gold.id, {});
  EXPECT_EQ(next(s).type, ChangeType::Deleted);
  w.set_labels(ctx_, gold.id, {{"tier", "gold"}});
  EXPECT_EQ(next(s).type, ChangeType::Added);
}

// A watch given up while its snapshot waited for the reader costs no read: a caller
// retrying with short deadlines does not queue read after read of the kind ahead of the
// controllers' own reads.
TEST_F(WatchTest, AWatchGivenUpBeforeItsSnapshotWasReadReadsNothing) {
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto& feed = bh_->core()->hub_feed();
  const auto before = feed.snapshot_reads.load();
  {
    HeldReader held(*bh_->core(), 10s);
    for (int i = 0; i < 20; ++i)
      EXPECT_ERRC(w.watch_list(ctx_.with_timeout(1ms)), errc::deadline_exceeded);
    for (int i = 0; i < 5; ++i)
      EXPECT_ERRC(w.watch_events(ctx_.with_timeout(1ms), a.id), errc::deadline_exceeded);
    inspect_hub(*bh_);  // the hub has had every open and every unsubscribe sent before
    ASSERT_EQ(feed.watches.load(), 0u);
  }
  // Read after the given-up ones' turns (the reader reads in order): only its own read.
  auto s = w.watch_list(ctx_);
  EXPECT_EQ(next(s).object.id, a.id);
  EXPECT_EQ(feed.snapshot_reads.load(), before + 1);
}

// A stop does not wait for the snapshots of watches still opening (a crowd of watchers
// reconnecting to a large kind held a stop for seconds past its deadline): they end as
// stopped at once, and their reads are skipped.
TEST_F(WatchTest, AStopEndsTheWatchesStillOpeningAtOnceAndSkipsTheirReads) {
  start();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto& feed = bh_->core()->hub_feed();
  const auto reads = feed.snapshot_reads.load();
  auto open_and_read = [](auto open) {
    try {
      auto s = open();
      EXPECT_FALSE(s.next_for(5s).has_value());
      return s.error();
    } catch (const Error& e) {
      return e.code();
    }
  };
  std::vector<std::future<std::error_code>> openers;
  std::future<void> stopped;
  {
    HeldReader held(*bh_->core(), 10s);
    for (int i = 0; i < 2; ++i) {
      openers.push_back(std::async(
          std::launch::async, [&] { return open_and_read([&] { return w.watch_list(ctx_); }); }));
      openers.push_back(std::async(std::launch::async, [&] {
        return open_and_read([&] { return w.watch_events(ctx_, a.id); });
      }));
    }
    ASSERT_TRUE(eventually([&] { return feed.watches.load() == 4; }));
    stopped = std::async(std::launch::async, [stop = std::exchange(stop_, nullptr)] {
      stop(Context{}.with_timeout(10s));
    });
    for (auto& o : openers) {
      ASSERT_EQ(o.wait_for(5s), std::future_status::ready) << "a watch waited for its snapshot";
      EXPECT_EQ(o.get(), make_error_code(errc::stopped));
    }
  }  // the reader goes on
  stopped.get();
  EXPECT_EQ(feed.snapshot_reads.load(), reads);
}

// A stream whose context is cancelled is over though nobody reads it again: the hub lets
// it go at the next commit it would have carried. Before, it stayed subscribed, keeping a
// copy of every change, until its reader called next or dropped it.
TEST_F(WatchTest, AStreamWhoseContextIsCancelledIsLetGoUnread) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  std::vector<decltype(w.watch_list(ctx_))> streams;
  std::vector<std::function<void()>> cancels;
  for (int i = 0; i < 20; ++i) {
    auto [c, cancel] = ctx_.with_cancel();
    streams.push_back(i % 2 ? w.watch_list(c) : w.watch(c, o.id));
    cancels.push_back(cancel);
  }
  settle();
  EXPECT_EQ(inspect_hub(*bh_).object_watches, 20u);
  for (auto& cancel : cancels) cancel();
  w.update(ctx_, o.id, {"b", 2});
  settle();
  EXPECT_EQ(inspect_hub(*bh_).object_watches, 0u);
  EXPECT_EQ(bh_->core()->hub_feed().watches.load(), 0u);
  for (auto& s : streams) EXPECT_FALSE(s.next().has_value());  // over, nothing left
}

// Opening a watch waits for its snapshot within the caller's context: behind a snapshot
// that is slow to come, the call ends at the deadline or on cancel, as other blocking
// calls do, and the watch it began is unsubscribed.
TEST_F(WatchTest, OpeningAWatchEndsWithItsContextAndLeavesNoWatchBehind) {
  auto w = widgets();
  w.create(ctx_, {"a", 1});
  {
    HeldReader held(*bh_->core(), 3s);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_ERRC(w.watch_list(ctx_.with_timeout(50ms)), errc::deadline_exceeded);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    EXPECT_ERRC(w.watch_events(ctx_.with_timeout(20ms), 1), errc::deadline_exceeded);
    ASSERT_TRUE(eventually([&] { return bh_->core()->hub_feed().watches.load() == 0; }));
    auto [cctx, cancel] = ctx_.with_cancel();
    std::thread canceller([&, cancel = cancel] {
      // Once the hub has the second watch (its snapshot waiting behind the held reader).
      eventually([&] { return bh_->core()->hub_feed().watches.load() >= 1; });
      cancel();
    });
    EXPECT_ERRC(w.watch(cctx, 1), errc::cancelled);
    canceller.join();
  }
  settle();
  EXPECT_EQ(inspect_hub(*bh_).object_watches, 0u);
  EXPECT_EQ(bh_->core()->hub_feed().watches.load(), 0u);
  auto s = w.watch_list(ctx_.with_timeout(5s));  // the reader serves again
  EXPECT_EQ(next(s).type, ChangeType::Added);
}

// The hub reads its snapshots on the reader actor. When the reader is restarted after a
// crash, the hub goes with it: the watches it served end with errc::store (where a user
// resumes) instead of staying open with nothing reaching them, and new watches work.
TEST_F(WatchTest, WatchesOfAReaderThatCrashedEndWithStoreAndNewOnesSeeChanges) {
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto s = w.watch_list(ctx_);
  EXPECT_EQ(next(s).object.id, a.id);
  caf::anon_send_exit(bh_->core()->reader(), caf::exit_reason::kill);
  auto after = s.next_for(10s);
  EXPECT_FALSE(after.has_value());
  EXPECT_EQ(s.error(), errc::store);
  std::optional<Stream<WidgetChange>> again;
  ASSERT_TRUE(eventually([&] {
    try {  // until the new hub is in place (opening meanwhile fails with store)
      again.emplace(w.watch_list(ctx_, with_resume_from(s.resource_version())));
      return true;
    } catch (const Error& e) {
      EXPECT_EQ(e.value(), errc::store);
      return false;
    }
  }));
  auto b = w.create(ctx_, {"b", 1});
  EXPECT_EQ(next(*again).object.id, b.id);
}

// A watch opened just as the hub died reaches no hub. The beehive is still running (a
// new hub is on its way), so that is a transient store error, never stopped.
TEST_F(WatchTest, AWatchOpenedAsTheHubDiesFailsWithStoreNotStopped) {
  auto w = widgets();
  caf::anon_send_exit(bh_->watch_hub(), caf::exit_reason::kill);
  try {
    auto s = w.watch_list(ctx_);  // the new hub may already serve it
  } catch (const Error& e) {
    EXPECT_EQ(e.value(), errc::store) << e.what();
  }
  std::optional<Stream<WidgetChange>> s;
  ASSERT_TRUE(eventually([&] {
    try {
      s.emplace(w.watch_list(ctx_));
      return true;
    } catch (const Error& e) {
      EXPECT_EQ(e.value(), errc::store) << e.what();
      return false;
    }
  }));
  auto a = w.create(ctx_, {"a", 1});
  EXPECT_EQ(next(*s).object.id, a.id);
}

TEST_F(WatchTest, WatchesWorkWithoutAController) {
  Widgets gadgets(*bh_, gadget_kind);
  auto s = gadgets.watch_list(ctx_);
  gadgets.create(ctx_, {"g", 1});
  EXPECT_EQ(next(s).object.spec.color, "g");
  register_widgets();  // a started beehive with controllers for other kinds only
  start();
  auto one = gadgets.watch(ctx_, gadgets.create(ctx_, {"h", 1}).id);
  EXPECT_EQ(next(one).object.spec.color, "h");
  gadgets.create(ctx_, {"i", 1});
  EXPECT_EQ(next(s).object.spec.color, "h");
  EXPECT_EQ(next(s).object.spec.color, "i");
}

TEST_F(WatchTest, TheSeamHasNoGapAndNoDuplicateUnderConcurrentWriters) {
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(w.create(ctx_, {"a", 0}).id);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      for (int i = 1; !stop; ++i) w.update(ctx_, ids[(i * 7 + t) % ids.size()], {"a", i});
    });
  std::this_thread::sleep_for(5ms);
  auto s = w.watch_list(ctx_);
  std::this_thread::sleep_for(20ms);
  stop = true;
  for (auto& t : writers) t.join();
  std::map<ObjectID, int> latest, added;
  while (auto c = s.next_for(300ms)) {
    latest[c->object.id] = c->object.spec.size;
    if (c->type == ChangeType::Added) ++added[c->object.id];
  }
  for (auto& o : w.list(ctx_)) {
    EXPECT_EQ(latest[o.id], o.spec.size) << o.id;
    EXPECT_EQ(added[o.id], 1) << o.id;
  }
}

TEST_F(WatchTest, AWatchOpenedWhileNoneWasOpenMissesNoConcurrentWrite) {
  // With no watch open, the writer sends the hub no commit records at all; opening the
  // first one while writers run must still leave no gap at the seam. Many short rounds,
  // so that writes land right at the snapshot. Conflation orders nothing across objects,
  // so each round reads until every object has converged to what the store holds: a
  // write lost at the seam never arrives.
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(w.create(ctx_, {"a", 0}).id);
  for (int round = 1; round <= 150; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < 2; ++t)
      writers.emplace_back([&, t] {
        for (int i = 1; !stop; ++i)
          w.update(ctx_, ids[(i + t) % ids.size()], {"a", round * 100000 + i});
      });
    std::optional<Stream<WidgetChange>> s;
    s.emplace(w.watch_list(ctx_));
    stop = true;
    for (auto& t : writers) t.join();
    std::map<ObjectID, int> latest, stored;
    for (auto id : ids) stored[id] = w.get(ctx_, id).spec.size;
    auto until = std::chrono::steady_clock::now() + 5s;
    while (latest != stored) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "round " << round;
      if (auto c = s->next_for(50ms)) latest[c->object.id] = c->object.spec.size;
    }
    s.reset();  // closed: the next round opens the first watch again
    ASSERT_TRUE(eventually([&] { return bh_->core()->hub_feed().watches.load() == 0; }));
  }
}

/// Whether a widget's status and its Ready condition tell the same story, as every
/// `within` block of the two tests below commits them together.
bool status_matches_condition(const Object<WidgetSpec, WidgetStatus>& o) {
  bool ready = o.status && o.status->ready;
  for (auto& c : o.conditions)
    if (c.type == "Ready") return (c.status == ConditionStatus::True) == ready;
  return false;
}

TEST_F(WatchTest, AWithinBlockReachesAStreamAsOneChangePerObjectAsCommitted) {
  // Each block writes the status of `o`, then those of other widgets, then the condition
  // that goes with `o`'s status. A reader that takes changes as they come must never see
  // `o`'s status without its condition: that state was never committed.
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  std::vector<ObjectID> others;
  for (int i = 0; i < 40; ++i) others.push_back(w.create(ctx_, {"other", i}).id);
  auto s = w.watch_list(ctx_);
  for (std::size_t i = 0; i <= others.size(); ++i) next(s);  // the snapshot
  constexpr int kBlocks = 50;
  std::atomic<std::int64_t> target{std::numeric_limits<std::int64_t>::max()};
  std::vector<WidgetChange> got;  // of `o`
  std::thread reader([&] {
    // Polls without waiting, so that it takes each change as soon as it lands.
    auto until = std::chrono::steady_clock::now() + 30s;
    std::int64_t last = 0;
    while (last < target && std::chrono::steady_clock::now() < until)
      if (auto c = s.next_for(0ms); c && c->object.id == o.id) {
        last = c->object.resource_version;
        got.push_back(std::move(*c));
      }
  });
  for (int i = 1; i <= kBlocks; ++i) {
    bool ready = i % 2 == 1;
    cc.within(ctx_, [&](const Context& tx) {
      cc.update_status(tx, o.id, 1, {ready});
      for (auto id : others) cc.update_status(tx, id, 1, {ready});
      cc.set_condition(tx, o.id, {"Ready", ready ? ConditionStatus::True : ConditionStatus::False});
    });
  }
  target = w.get(ctx_, o.id).resource_version;
  reader.join();
  ASSERT_FALSE(got.empty());
  ASSERT_EQ(got.back().object.resource_version, target) << "the last block never arrived";
  for (auto& c : got) {
    EXPECT_EQ(c.type, ChangeType::Modified);
    ASSERT_TRUE(status_matches_condition(c.object))
        << "resource version " << c.object.resource_version << ": a half-applied block";
  }
}

TEST_F(WatchTest, AWithinBlockReachesAnActorSubscriberAsOneChangePerObject) {
  auto cc = register_widgets();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto marker = w.create(ctx_, {"marker", 1});
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<Inbox>();
  auto subscriber = spawn_inbox(sys, seen);
  struct Quit {  // however the test ends: the actor system waits for its actors
    caf::actor a;
    ~Quit() { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); }
  } quit{subscriber};
  caf::scoped_actor self{sys};
  self->request(bh_->watch_hub(), caf::infinite,
                watch_request{widget_kind, std::nullopt, subscriber})
      .receive([](std::uint64_t) {}, [](caf::error&) { FAIL(); });
  cc.within(ctx_, [&](const Context& tx) {
    cc.update_status(tx, o.id, 1, {true});
    cc.set_condition(tx, o.id, {"Ready", ConditionStatus::True});
  });
  w.update(ctx_, marker.id, {"marker", 2});  // the hub sends in commit order
  auto marked = [&] {
    std::lock_guard lk(seen->mu);
    return !seen->changes.empty() && seen->changes.back().row.meta.id == marker.id &&
           seen->changes.back().type == ChangeType::Modified;
  };
  ASSERT_TRUE(eventually(marked));
  std::vector<object_change> block;
  {
    std::lock_guard lk(seen->mu);
    for (auto& c : seen->changes)
      if (c.row.meta.id == o.id && c.type == ChangeType::Modified) block.push_back(c);
  }
  ASSERT_EQ(block.size(), 1u) << "the block reached the subscriber in pieces";
  auto obj = decode_row<WidgetSpec, WidgetStatus>(block[0].row);
  EXPECT_TRUE(obj.status && obj.status->ready);
  EXPECT_TRUE(status_matches_condition(obj));
  EXPECT_EQ(block[0].parts & (object_change::status | object_change::conditions),
            object_change::status | object_change::conditions);
}

TEST_F(WatchTest, AnActorSubscribesAndReceivesChanges) {
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<Inbox>();
  auto hub = bh_->watch_hub();
  auto subscriber = spawn_inbox(sys, seen);
  caf::scoped_actor self{sys};
  std::uint64_t sub = 0;
  self->request(hub, caf::infinite, watch_request{widget_kind, std::nullopt, subscriber})
      .receive([&](std::uint64_t id) { sub = id; }, [](caf::error&) { FAIL(); });
  EXPECT_GT(sub, 0u);
  auto b = w.create(ctx_, {"b", 2});
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lk(seen->mu);
    return seen->changes.size() == 2;
  }));
  {
    std::lock_guard lk(seen->mu);
    EXPECT_EQ(seen->changes[0].type, ChangeType::Added);
    EXPECT_EQ(seen->changes[0].row.meta.id, a.id);
    EXPECT_EQ((decode_row<WidgetSpec, WidgetStatus>(seen->changes[1].row).spec.color), "b");
    EXPECT_EQ(seen->changes[1].row.meta.id, b.id);
  }
  close();  // the beehive stops: the subscriber hears it
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lk(seen->mu);
    return seen->ended;
  }));
  caf::anon_send_exit(subscriber, caf::exit_reason::user_shutdown);
}

TEST_F(WatchTest, AnActorSubscriptionEndsOnUnsubscribeAndWhenTheActorDies) {
  auto w = widgets();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<std::atomic<int>>(0);
  auto spawn_subscriber = [&] {
    return sys.spawn([seen](caf::event_based_actor*) -> caf::behavior {
      return {[seen](const object_change&) { ++*seen; }, [](const watch_ended&) {}};
    });
  };
  auto hub = bh_->watch_hub();
  caf::scoped_actor self{sys};
  auto subscribe = [&](const caf::actor& a) {
    std::uint64_t sub = 0;
    self->request(hub, caf::infinite, watch_request{widget_kind, std::nullopt, a})
        .receive([&](std::uint64_t id) { sub = id; }, [](caf::error&) { FAIL(); });
    return sub;
  };
  auto watches = [&] {
    std::size_t n = 99;
    self->request(hub, caf::infinite, inspect_atom::value)
        .receive([&](const watch_hub_state& st) { n = st.object_watches; },
                 [](caf::error&) { FAIL(); });
    return n;
  };
  auto a = spawn_subscriber();
  auto sub = subscribe(a);
  w.create(ctx_, {"x", 1});
  ASSERT_TRUE(eventually([&] { return *seen == 1; }));
  EXPECT_EQ(watches(), 1u);
  self->send(hub, unsubscribe_atom::value, sub);
  ASSERT_TRUE(eventually([&] { return watches() == 0; }));
  w.create(ctx_, {"y", 1});
  settle();
  EXPECT_EQ(*seen, 1);  // nothing after the unsubscribe
  auto b = spawn_subscriber();
  subscribe(b);
  EXPECT_EQ(watches(), 1u);
  caf::anon_send_exit(b, caf::exit_reason::kill);  // the subscriber dies
  EXPECT_TRUE(eventually([&] { return watches() == 0; }));
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

// An actor that subscribes and unsubscribes all its life is monitored once at most: the
// hub does not collect a monitor per subscription until it exits.
TEST_F(WatchTest, AnActorSubscribingAgainAndAgainIsMonitoredOnce) {
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 0});
  ActorSide side(bh_->watch_hub());
  auto subscribe_all = [&] {
    return std::vector<std::uint64_t>{
        side.subscribe(watch_request{widget_kind, std::nullopt, side.subscriber}),
        side.subscribe(watch_request{widget_kind, o.id, side.subscriber, true}),
        side.subscribe(event_watch_request{o.id, {}, side.subscriber}),
    };
  };
  auto unsubscribe = [&](const std::vector<std::uint64_t>& subs) {
    for (auto id : subs) side.self->send(side.hub, unsubscribe_atom::value, id);
  };
  auto subs = subscribe_all();
  auto st = inspect_hub(*bh_);
  EXPECT_EQ(st.object_watches + st.event_watches, 3u);
  EXPECT_EQ(st.monitored, 1u);
  for (int i = 0; i < 50; ++i) {
    unsubscribe(subs);
    subs = subscribe_all();
  }
  EXPECT_EQ(inspect_hub(*bh_).monitored, 1u);
  unsubscribe(subs);
  st = inspect_hub(*bh_);  // after the unsubscribes: one sender, in order
  EXPECT_EQ(st.object_watches + st.event_watches, 0u);
  EXPECT_EQ(st.monitored, 0u);
  // Subscribed again and gone: its down message ends its watches and the monitor.
  subscribe_all();
  caf::anon_send_exit(side.subscriber, caf::exit_reason::kill);
  EXPECT_TRUE(eventually([&] {
    st = inspect_hub(*bh_);
    return st.object_watches + st.event_watches == 0 && st.monitored == 0;
  }));
}

TEST_F(WatchTest, AnActorPullsConflatedChanges) {
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 0});
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<Inbox>();
  auto subscriber = spawn_inbox(sys, seen);
  auto hub = bh_->watch_hub();
  caf::scoped_actor self{sys};
  std::uint64_t sub = 0;
  self->request(hub, caf::infinite, watch_request{widget_kind, std::nullopt, subscriber, true})
      .receive([&](std::uint64_t id) { sub = id; }, [](caf::error&) { FAIL(); });
  auto pull = [&] {
    std::vector<object_change> got;
    self->request(hub, std::chrono::seconds(5), pull_atom::value, sub)
        .receive([&](std::vector<object_change>& cs) { got = std::move(cs); },
                 [](caf::error& e) { FAIL() << caf::to_string(e); });
    return got;
  };
  auto snapshot = pull();
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_EQ(snapshot[0].type, ChangeType::Added);

  Widgets gadgets(*bh_, gadget_kind);
  auto markers = gadgets.watch_list(ctx_);
  for (int i = 1; i <= 1000; ++i) w.update(ctx_, o.id, {"o", i});
  auto p = w.create(ctx_, {"p", 1});
  gadgets.create(ctx_, {"marker", 1});
  ASSERT_TRUE(markers.next_for(10s).has_value());  // the hub has handled every write
  watch_hub_state st;
  self->request(hub, caf::infinite, inspect_atom::value)
      .receive([&](watch_hub_state& x) { st = x; }, [](caf::error&) { FAIL(); });
  EXPECT_EQ(st.pending, 2u);  // one per object, not one per write
  auto changes = pull();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].type, ChangeType::Modified);
  EXPECT_EQ((decode_row<WidgetSpec, WidgetStatus>(changes[0].row).spec.size), 1000);
  EXPECT_EQ(changes[1].type, ChangeType::Added);
  EXPECT_EQ(changes[1].row.meta.id, p.id);

  // A pull with nothing pending waits for the next change.
  std::vector<object_change> later;
  auto pending = self->request(hub, std::chrono::seconds(5), pull_atom::value, sub);
  w.update(ctx_, p.id, {"p", 2});
  std::move(pending).receive([&](std::vector<object_change>& cs) { later = std::move(cs); },
                             [](caf::error& e) { FAIL() << caf::to_string(e); });
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].row.meta.id, p.id);

  // A stop hands over what was not pulled, then ends the subscription.
  w.update(ctx_, o.id, {"o", 1001});
  close();
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lk(seen->mu);
    return seen->ended;
  }));
  {
    std::lock_guard lk(seen->mu);
    ASSERT_EQ(seen->changes.size(), 1u);
    EXPECT_EQ((decode_row<WidgetSpec, WidgetStatus>(seen->changes[0].row).spec.size), 1001);
  }
  caf::anon_send_exit(subscriber, caf::exit_reason::user_shutdown);
}

// A pull whose requester gave up does not lock the subscription: the next pull takes
// its place. A pull waiting when the subscription ends is told so rather than left
// waiting; a watch without a subscriber is refused.
TEST_F(WatchTest, APullReplacesOneGivenUpAndOneWaitingHearsTheEnd) {
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 0});
  ActorSide side(bh_->watch_hub());
  auto subscribe = [&] {
    return side.subscribe(watch_request{widget_kind, std::nullopt, side.subscriber, true});
  };
  auto sub = subscribe();
  side.self->request(side.hub, 5s, pull_atom::value, sub)
      .receive([](std::vector<object_change>&) {}, [](caf::error&) { FAIL(); });  // the snapshot
  std::optional<errc> gave_up;
  side.self->request(side.hub, 50ms, pull_atom::value, sub)
      .receive([](std::vector<object_change>&) { FAIL() << "nothing was pending"; },
               [&](caf::error& e) { gave_up = to_errc(e); });
  EXPECT_EQ(gave_up, errc::deadline_exceeded);
  auto next = side.self->request(side.hub, 5s, pull_atom::value, sub);
  w.update(ctx_, o.id, {"o", 1});
  std::vector<object_change> got;
  std::move(next).receive([&](std::vector<object_change>& cs) { got = std::move(cs); },
                          [](caf::error& e) { FAIL() << caf::to_string(e); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].row.meta.id, o.id);

  auto waiting = side.self->request(side.hub, 5s, pull_atom::value, sub);
  caf::anon_send(side.hub, unsubscribe_atom::value, sub);
  std::optional<errc> ended;
  std::move(waiting).receive([](std::vector<object_change>&) { FAIL() << "nothing changed"; },
                             [&](caf::error& e) { ended = to_errc(e); });
  EXPECT_EQ(ended, errc::not_found);

  std::optional<errc> refused;
  side.self->request(side.hub, 5s, watch_request{widget_kind, std::nullopt, caf::actor{}, true})
      .receive([](std::uint64_t) { FAIL(); }, [&](caf::error& e) { refused = to_errc(e); });
  EXPECT_EQ(refused, errc::invalid_argument);
  caf::anon_send_exit(side.subscriber, caf::exit_reason::user_shutdown);
}

// An actor that unsubscribes naming an id not its own (here the next ones: a blocking
// event stream's) ends that stream with not_found, as it would an object watch, rather
// than leave it waiting for ever, the beehive's stop included.
TEST_F(WatchTest, AnUnsubscribeNamingABlockingEventStreamEndsIt) {
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 0});
  ActorSide side(bh_->watch_hub());
  auto mine = side.subscribe(event_watch_request{o.id, {}, side.subscriber});
  auto s = w.watch_events(ctx_, o.id);
  for (std::uint64_t id = mine + 1; id <= mine + 3; ++id)
    caf::anon_send(side.hub, unsubscribe_atom::value, id);
  EXPECT_FALSE(s.next_for(5s).has_value());
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.error(), make_error_code(errc::not_found));
  caf::anon_send_exit(side.subscriber, caf::exit_reason::user_shutdown);
}

// `unsubscribe_atom` + an actor to the writer ends an application's commit-record
// subscription, never one of beehive's own: a controller's handle sent there by mistake
// leaves its wakes alone.
TEST_F(WatchTest, TheWritersUnsubscribeLeavesBeehivesOwnSubscribersAlone) {
  auto seen = std::make_shared<std::atomic<int>>(0);
  register_controller<WidgetSpec, WidgetStatus>(*bh_, widget_kind, [seen](auto&, auto&, auto&) {
    ++*seen;
    return Result{};
  });
  auto w = widgets();
  auto o = w.create(ctx_, {"o", 0});
  auto stop = bh_->start(ctx_);
  beehive::testing::settle(*bh_, ctx_);
  caf::anon_send(bh_->store_writer(), unsubscribe_atom::value,
                 caf::actor_cast<caf::actor>(*bh_->controller(widget_kind)));
  int before = *seen;
  w.update(ctx_, o.id, {"o", 1});
  beehive::testing::settle(*bh_, ctx_);  // the clock never moves: only a wake runs it
  EXPECT_GT(*seen, before);
  EXPECT_EQ(to_errc(caf::make_error(caf::sec::unexpected_message)), errc::invalid_argument);
  stop(ctx_);
}

// The watch count the writer reads (it skips the hub while 0) is the current hub's: a
// hub that a successor replaced (restarted with the reader), still ending, publishes no
// count over the successor's.
TEST_F(WatchTest, AHubThatWasReplacedPublishesNoWatchCount) {
  auto w = widgets();
  auto& feed = bh_->core()->hub_feed();
  auto first = w.watch_list(ctx_);
  ASSERT_TRUE(eventually([&] { return feed.watches.load() == 1; }));
  // A successor takes over (here a stand-in address): the hub's later counts are ignored.
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto successor = sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {}; });
  feed.start_publisher(successor.address(), [] {});
  EXPECT_EQ(feed.watches.load(), 0u);
  auto second = w.watch_list(ctx_);
  EXPECT_EQ(inspect_hub(*bh_).object_watches, 2u);           // the hub has both
  EXPECT_EQ(feed.watches.load(), 0u);                        // but publishes neither
  feed.start_publisher(bh_->watch_hub()->address(), [] {});  // back, for the stop
  caf::anon_send_exit(successor, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace beehive::test
