// Deletion and relations: GC, owner cascade, finalizers, dependencies, lookups.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>

#include <SQLiteCpp/SQLiteCpp.h>

#include "controller_fixture.hpp"
#include "store/statement_count.hpp"
#include "store/write_ops.hpp"  // private: gc_pass_bytes
#include "writer_state.hpp"

namespace beehive::test {
namespace {

using WidgetChange = Change<WidgetSpec, WidgetStatus>;

class GcTest : public ControllerTest {
 protected:
  /// A widget depending on two gadgets, `here` and `there`, its controller registered
  /// and started, everything settled.
  struct DependentOfTwo {
    ObjectID here, there, dependent;
  };
  DependentOfTwo dependent_of_two(Widgets& gadgets) {
    auto cc = register_widgets();
    auto here = gadgets.create(ctx_, {"here", 1});
    auto there = gadgets.create(ctx_, {"there", 1});
    auto dependent = widgets().create(ctx_, {"dependent", 1});
    cc.add_dependency(ctx_, dependent.id, here.id);
    cc.add_dependency(ctx_, dependent.id, there.id);
    start();
    settle();
    return {here.id, there.id, dependent.id};
  }
};

/// Reads changes until `pred` holds for one; returns the changes read.
std::vector<WidgetChange> read_until(Stream<WidgetChange>& s,
                                     const std::function<bool(const WidgetChange&)>& pred) {
  std::vector<WidgetChange> seen;
  while (auto c = s.next_for(5s)) {
    seen.push_back(*c);
    if (pred(*c)) return seen;
  }
  throw std::runtime_error("the awaited change never came");
}

/// The statements `read` runs, the fewest of three tries: the store's connections also
/// run statements of their own meanwhile (on PostgreSQL, the poll for other processes'
/// commits), which only ever add to a count.
std::uint64_t statements_of(const std::function<void()>& read) {
  std::uint64_t fewest = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    auto before = store::statements_run();
    read();
    fewest = std::min(fewest, store::statements_run() - before);
  }
  return fewest;
}

/// A controller that lets a deleting object go (removes `finalizer`) once nothing with a
/// live claim points at it: a shared resource kept until its last user is gone.
Recorder::Body release_when_unclaimed(std::string finalizer) {
  return [finalizer](const Context& ctx, ControllerClient<WidgetStatus>& cc,
                     const Object<WidgetSpec, WidgetStatus>& o) {
    if (o.deletion_requested_at && !cc.has_incoming_refs(ctx, o.id))
      cc.remove_finalizer(ctx, o.id, finalizer);
    return Result{};
  };
}

bool deleted(const WidgetChange& c, ObjectID id) {
  return c.type == ChangeType::Deleted && c.object.id == id;
}

TEST_F(GcTest, AnObjectWithoutFinalizersIsCollectedAndReleasesItsSlug) {
  register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1}, with_slug("s"));
  auto s = w.watch(ctx_, o.id);
  w.remove(ctx_, o.id);
  auto seen = read_until(s, [&](auto& c) { return deleted(c, o.id); });
  EXPECT_TRUE(seen.back().object.deletion_requested_at.has_value());  // the final body
  EXPECT_EQ(seen.back().object.spec.color, "a");
  EXPECT_ERRC(w.get(ctx_, o.id), errc::not_found);
  auto again = w.create(ctx_, {"b", 1}, with_slug("s"));
  EXPECT_GT(again.id, o.id);  // ids are never reused
}

// A pass that fails (here a trigger planted in the file refuses the removal) is tried
// again a second later, then backing off, rather than only at the cadence (minutes) or at
// the next trigger: once the cause clears, the object goes though nothing else happens.
TEST_F(GcTest, AFailedPassIsTriedAgainSoonerThanTheCadence) {
  REQUIRE_SQLITE("plants a failing trigger in the SQLite file");
  LogCapture log;
  open(with_logger(log.logger()));
  register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  SQLite::Database db(dir_.file("beehive.db").string(), SQLite::OPEN_READWRITE);
  db.exec(
      "CREATE TRIGGER refuse_removal BEFORE DELETE ON objects "
      "BEGIN SELECT RAISE(ABORT, 'refused for the test'); END");
  w.remove(ctx_, o.id);
  settle();
  EXPECT_TRUE(log.contains("garbage collection failed"));
  EXPECT_TRUE(w.get(ctx_, o.id).deletion_requested_at.has_value());
  clock_->advance(1s);  // the first retry fails too
  settle();
  db.exec("DROP TRIGGER refuse_removal");
  clock_->advance(1s);  // not yet: the second waits 2 s
  settle();
  EXPECT_NO_THROW(w.get(ctx_, o.id));
  clock_->advance(1s);
  settle();
  EXPECT_ERRC(w.get(ctx_, o.id), errc::not_found);
}

TEST_F(GcTest, FinalizersHoldTheObjectUntilTheControllerRemovesThem) {
  recorder_->set_body([](auto& ctx, auto& cc, auto& o) {
    if (o.deletion_requested_at && o.spec.color == "clean up")
      cc.remove_finalizer(ctx, o.id, "acme.com/cleanup");
    return Result{};
  });
  register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"keep", 1}, with_finalizers({"acme.com/cleanup"}));
  ASSERT_TRUE(eventually([&] { return recorder_->count(o.id) == 1; }));
  auto s = w.watch(ctx_, o.id);
  w.remove(ctx_, o.id);
  EXPECT_TRUE(eventually([&] { return recorder_->count(o.id) == 2; }))
      << recorder_->count(o.id);  // reconciled to clean up
  settle();
  EXPECT_TRUE(w.get(ctx_, o.id).deletion_requested_at.has_value());  // still held
  w.update(ctx_, o.id, {"clean up", 1});
  read_until(s, [&](auto& c) { return deleted(c, o.id); });
  EXPECT_ERRC(w.get(ctx_, o.id), errc::not_found);
}

TEST_F(GcTest, CollectsAtStartForKindsWithoutAController) {
  Widgets gadgets(*bh_, gadget_kind);
  auto g = gadgets.create(ctx_, {"g", 1});
  gadgets.remove(ctx_, g.id);
  EXPECT_TRUE(gadgets.get(ctx_, g.id).deletion_requested_at.has_value());  // no GC before start
  start();
  EXPECT_TRUE(eventually([&] {
    try {
      gadgets.get(ctx_, g.id);
      return false;
    } catch (const Error& e) {
      return e.code() == errc::not_found;
    }
  }));
}

TEST_F(GcTest, AThrowingReconcileDoesNotStopCollection) {
  recorder_->set_body([](auto&, auto&, auto&) -> Result { throw std::runtime_error("broken"); });
  register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  auto s = w.watch(ctx_, o.id);
  w.remove(ctx_, o.id);
  read_until(s, [&](auto& c) { return deleted(c, o.id); });
}

TEST_F(GcTest, WithOwnerNeedsAnExistingOwner) {
  auto w = widgets();
  EXPECT_ERRC(w.create(ctx_, {"orphan", 1}, with_slug("c"), with_owner(424242)), errc::not_found);
  EXPECT_ERRC(w.get_by_slug(ctx_, "c"), errc::not_found);
  auto owner = w.create(ctx_, {"owner", 1});
  auto child = w.create(ctx_, {"child", 1}, with_slug("c"), with_owner(owner.id));
  EXPECT_EQ(w.get_owner(ctx_, child.id), (Ref{owner.id, "acme.com", "Widget"}));
}

TEST_F(GcTest, GetOrCreateAppliesTheOwnerOnlyWhenCreating) {
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 1});
  auto plain = w.create(ctx_, {"plain", 1}, with_slug("p"));
  auto [found, created] = w.get_or_create(ctx_, "p", {"x", 1}, with_owner(owner.id));
  EXPECT_FALSE(created);
  EXPECT_FALSE(w.get_owner(ctx_, found.id).has_value());  // not adopted
  auto [fresh, created2] = w.get_or_create(ctx_, "q", {"x", 1}, with_owner(owner.id));
  EXPECT_TRUE(created2);
  EXPECT_EQ(w.get_owner(ctx_, fresh.id)->id, owner.id);
  (void)plain;
}

TEST_F(GcTest, GetOrCreateAppliesFinalizersOnlyWhenCreating) {
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 1});
  auto plain = w.create(ctx_, {"plain", 1}, with_slug("p"));
  auto [found, created] =
      w.get_or_create(ctx_, "p", {"x", 2}, with_finalizers({"f"}), with_owner(owner.id));
  EXPECT_FALSE(created);
  EXPECT_EQ(found.id, plain.id);
  EXPECT_TRUE(found.finalizers.empty());
  EXPECT_EQ(found.spec, (WidgetSpec{"plain", 1}));  // untouched
  auto stored = w.get(ctx_, plain.id);
  EXPECT_TRUE(stored.finalizers.empty());  // nothing was written either
  EXPECT_EQ(stored.resource_version, plain.resource_version);
  EXPECT_FALSE(w.get_owner(ctx_, plain.id).has_value());
  auto [fresh, created2] = w.get_or_create(ctx_, "q", {"x", 1}, with_finalizers({"f", "g"}));
  EXPECT_TRUE(created2);
  EXPECT_EQ(fresh.finalizers, (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(w.get(ctx_, fresh.id).finalizers, (std::vector<std::string>{"f", "g"}));
}

TEST_F(GcTest, CollectsPromptlyAfterStartForAKindWithoutAController) {
  register_widgets();  // a controller for widgets only: gadgets have none
  start();
  Widgets gadgets(*bh_, gadget_kind);
  auto owner = gadgets.create(ctx_, {"owner", 1});
  auto child = gadgets.create(ctx_, {"child", 1}, with_owner(owner.id));
  auto g = gadgets.create(ctx_, {"g", 1}, with_slug("g"));
  gadgets.remove(ctx_, g.id);  // the clock never moves: no resync, no cadence
  EXPECT_TRUE(eventually([&] { return gone(gadgets, ctx_, g.id); }));
  gadgets.create(ctx_, {"again", 1}, with_slug("g"));  // the slug was released
  gadgets.remove(ctx_, owner.id);                      // and a cascade, too
  EXPECT_TRUE(
      eventually([&] { return gone(gadgets, ctx_, owner.id) && gone(gadgets, ctx_, child.id); }));
}

TEST_F(GcTest, HasIncomingRefsCountsOwnedChildrenAndLiveDependentsOnly) {
  auto cc = register_widgets();
  auto w = widgets();
  Widgets gadgets(*bh_, gadget_kind);
  // Nothing is started: no GC runs, so deletion-pending rows and their edges stay.
  auto lonely = w.create(ctx_, {"lonely", 1});
  EXPECT_FALSE(cc.has_incoming_refs(ctx_, lonely.id));
  // Dependents: counted while they are not being deleted themselves.
  auto target = gadgets.create(ctx_, {"target", 1});
  auto d1 = w.create(ctx_, {"d1", 1}, with_finalizers({"f"}));
  auto d2 = w.create(ctx_, {"d2", 1}, with_finalizers({"f"}));
  cc.add_dependency(ctx_, d1.id, target.id);
  cc.add_dependency(ctx_, d2.id, target.id);
  EXPECT_TRUE(cc.has_incoming_refs(ctx_, target.id));
  w.remove(ctx_, d1.id);
  EXPECT_TRUE(cc.has_incoming_refs(ctx_, target.id));  // d2 still has a live claim
  w.remove(ctx_, d2.id);
  ASSERT_EQ(w.list_dependents(ctx_, target.id).size(), 2u);  // the edges are still there
  EXPECT_FALSE(cc.has_incoming_refs(ctx_, target.id));       // but both are finalizing
  EXPECT_FALSE(cc.has_incoming_refs(ctx_, d1.id));           // an outgoing edge is not incoming
  // Owned children: counted even while being deleted.
  auto owner = w.create(ctx_, {"owner", 1});
  auto child = gadgets.create(ctx_, {"child", 1}, with_owner(owner.id), with_finalizers({"f"}));
  EXPECT_TRUE(cc.has_incoming_refs(ctx_, owner.id));
  gadgets.remove(ctx_, child.id);
  ASSERT_TRUE(gadgets.get(ctx_, child.id).deletion_requested_at.has_value());
  EXPECT_TRUE(cc.has_incoming_refs(ctx_, owner.id));
  EXPECT_FALSE(cc.has_incoming_refs(ctx_, child.id));
  // Once the last finalizing dependent is collected its edge goes, and with it the claim.
  start();
  cc.remove_finalizer(ctx_, d1.id, "f");
  cc.remove_finalizer(ctx_, d2.id, "f");
  EXPECT_TRUE(eventually([&] { return w.list_dependents(ctx_, target.id).empty(); }));
  EXPECT_FALSE(cc.has_incoming_refs(ctx_, target.id));
}

TEST_F(GcTest, ThreeLevelCascadeIsCollectedBottomUpOwnerLast) {
  recorder_->set_body(release_when_unclaimed("f"));
  register_widgets();
  start();
  auto w = widgets();
  auto root = w.create(ctx_, {"root", 0}, with_finalizers({"f"}));
  auto mid = w.create(ctx_, {"mid", 1}, with_finalizers({"f"}), with_owner(root.id));
  std::vector<ObjectID> leaves;
  for (int i = 0; i < 3; ++i)
    leaves.push_back(w.create(ctx_, {"leaf", 2}, with_finalizers({"f"}), with_owner(mid.id)).id);
  auto s = w.watch_list(ctx_);
  w.remove(ctx_, root.id);
  // The order of removal is the order of the removals' resource versions. The stream's
  // own order says nothing across objects: a reader that falls behind gets each object's
  // latest change where its first pending change stood (the root's soft delete came
  // first, so its removal may arrive first).
  std::map<std::int64_t, ObjectID> removed;  // by resource version
  read_until(s, [&](auto& c) {
    if (c.type == ChangeType::Deleted) removed[c.object.resource_version] = c.object.id;
    return removed.size() == 5;
  });
  std::vector<ObjectID> order;
  for (auto& [rv, id] : removed) order.push_back(id);
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[3], mid.id);
  EXPECT_EQ(order[4], root.id);
  EXPECT_TRUE(w.list(ctx_).empty());
}

TEST_F(GcTest, AChildCreatedUnderAnOwnerBeingDeletedGoesTheSameWay) {
  recorder_->set_body([](auto& ctx, auto& cc, auto& o) {
    if (o.deletion_requested_at) cc.remove_finalizer(ctx, o.id, "f");
    return Result{};
  });
  auto cc = register_widgets();
  start();
  auto w = widgets();
  // Held by a finalizer of something outside (nobody here removes "hold").
  auto owner = w.create(ctx_, {"owner", 0}, with_finalizers({"hold"}));
  w.remove(ctx_, owner.id);
  settle();
  // Created after the cascade passed the owner: no later write would ever mark them.
  auto late = w.create(ctx_, {"late", 1}, with_owner(owner.id));
  auto finalized = w.create(ctx_, {"late", 2}, with_owner(owner.id), with_finalizers({"f"}));
  EXPECT_TRUE(late.deletion_requested_at.has_value());
  EXPECT_TRUE(finalized.deletion_requested_at.has_value());
  settle();
  EXPECT_ERRC(w.get(ctx_, late.id), errc::not_found);
  EXPECT_ERRC(w.get(ctx_, finalized.id), errc::not_found);
  cc.remove_finalizer(ctx_, owner.id, "hold");
  settle();
  EXPECT_ERRC(w.get(ctx_, owner.id), errc::not_found);
}

TEST_F(GcTest, AFinalizerGatedOnIncomingRefsKeepsASharedResourceUntilItsLastUser) {
  // Widgets depend on a shared gadget; the gadget's controller releases it only when
  // nothing with a live claim points at it any more.
  register_widgets();
  std::atomic<int> gadget_passes{0};
  auto stop_first = stop_before_locals();  // the locals above outlive reconciles
  register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [&](const Context& ctx, auto& cc, const auto& o) {
        if (o.deletion_requested_at && !cc.has_incoming_refs(ctx, o.id))
          cc.remove_finalizer(ctx, o.id, "shared");
        ++gadget_passes;  // counted once the pass has decided
        return Result{};
      });
  auto widget_cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, {"acme.com", "User"}, [](auto&, auto&, auto&) { return Result{}; });
  Widgets gadgets(*bh_, gadget_kind);
  Widgets users(*bh_, {"acme.com", "User"});
  auto shared = gadgets.create(ctx_, {"conn", 1}, with_finalizers({"shared"}));
  auto u1 = users.create(ctx_, {"u1", 1});
  auto u2 = users.create(ctx_, {"u2", 1});
  widget_cc.add_dependency(ctx_, u1.id, shared.id);
  widget_cc.add_dependency(ctx_, u2.id, shared.id);
  start();
  auto s = gadgets.watch(ctx_, shared.id);
  gadgets.remove(ctx_, shared.id);
  users.remove(ctx_, u1.id);
  settle();
  EXPECT_TRUE(gadgets.get(ctx_, shared.id).deletion_requested_at.has_value());  // u2 holds it
  EXPECT_EQ(gadgets.list_dependents(ctx_, shared.id).size(), 1u);
  // u1 is collected (its edge gone); a gadget pass that runs after that still finds u2's
  // live claim and keeps the finalizer. Dropped, only u2's edge would keep the row.
  ASSERT_TRUE(eventually([&] {
    try {
      users.get(ctx_, u1.id);
      return false;
    } catch (const Error& e) {
      return e.code() == errc::not_found;
    }
  }));
  int passes = gadget_passes;
  gadgets.requeue(ctx_, shared.id);
  ASSERT_TRUE(eventually([&] { return gadget_passes > passes; }));
  EXPECT_EQ(gadgets.get(ctx_, shared.id).finalizers, std::vector<std::string>{"shared"});
  users.remove(ctx_, u2.id);
  auto seen = read_until(s, [&](auto& c) { return deleted(c, shared.id); });
  close();
}

TEST_F(GcTest, ALiveDependentKeepsItsTargetAndADependentBeingDeletedDoesNot) {
  auto cc = register_widgets();
  Widgets w = widgets();
  auto target = w.create(ctx_, {"target", 1});
  auto dep = w.create(ctx_, {"dep", 1}, with_finalizers({"f"}));
  cc.add_dependency(ctx_, dep.id, target.id);
  start();
  auto s = w.watch(ctx_, target.id);
  w.remove(ctx_, target.id);
  clock_->advance(30s);  // a resync and a GC pass come and go
  settle();
  EXPECT_NO_THROW(w.get(ctx_, target.id));  // RESTRICT: dep is live and depends on it
  // Once dep is being deleted its claim is gone (as has_incoming_refs says), even while
  // its finalizer holds dep itself: the target goes, and the edge with it.
  w.remove(ctx_, dep.id);
  read_until(s, [&](auto& c) { return deleted(c, target.id); });
  auto held = w.get(ctx_, dep.id, load_dependencies());
  EXPECT_TRUE(held.deletion_requested_at.has_value());
  EXPECT_TRUE(held.list_dependencies().empty());
}

TEST_F(GcTest, ASelfEdgeDoesNotKeepAnObjectBeingDeleted) {
  auto cc = register_widgets();
  start();
  auto w = widgets();
  auto o = w.create(ctx_, {"self", 1});
  cc.add_dependency(ctx_, o.id, o.id);
  ASSERT_EQ(w.list_dependents(ctx_, o.id).size(), 1u);
  auto s = w.watch(ctx_, o.id);
  w.remove(ctx_, o.id);
  read_until(s, [&](auto& c) { return deleted(c, o.id); });
  EXPECT_ERRC(w.get(ctx_, o.id), errc::not_found);
}

TEST_F(GcTest, ADependencyCycleIsCollectedOnceEveryObjectInItIsBeingDeleted) {
  auto cc = register_widgets();
  start();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  cc.add_dependency(ctx_, a.id, b.id);
  cc.add_dependency(ctx_, b.id, a.id);
  auto s = w.watch_list(ctx_);
  w.remove(ctx_, a.id);
  clock_->advance(30s);
  settle();
  EXPECT_NO_THROW(w.get(ctx_, a.id));  // b is live and depends on a
  w.remove(ctx_, b.id);
  std::set<ObjectID> removed;
  read_until(s, [&](auto& c) {
    if (c.type == ChangeType::Deleted) removed.insert(c.object.id);
    return removed.size() == 2;
  });
  EXPECT_EQ(removed, (std::set<ObjectID>{a.id, b.id}));
  EXPECT_TRUE(w.list(ctx_).empty());
}

TEST_F(GcTest, AnOwnerThatDependsOnItsChildrenIsCollectedAfterThem) {
  auto cc = register_widgets();
  start();
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 1});
  std::vector<ObjectID> children;
  for (int i = 0; i < 2; ++i) {
    children.push_back(w.create(ctx_, {"child", 1}, with_owner(owner.id)).id);
    cc.add_dependency(ctx_, owner.id, children.back());
  }
  auto s = w.watch_list(ctx_);
  w.remove(ctx_, owner.id);
  std::map<std::int64_t, ObjectID> removed;  // by resource version: the order of removal
  read_until(s, [&](auto& c) {
    if (c.type == ChangeType::Deleted) removed[c.object.resource_version] = c.object.id;
    return removed.size() == 3;
  });
  EXPECT_EQ(std::prev(removed.end())->second, owner.id);  // its children held it until gone
  EXPECT_TRUE(w.list(ctx_).empty());
}

TEST_F(GcTest, AConditionChangeWakesDependentsOfAnyKind) {
  auto cc = register_widgets();
  auto gadget_cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto w = widgets();
  auto target = Widgets(*bh_, gadget_kind).create(ctx_, {"target", 1});
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  cc.add_dependency(ctx_, a.id, target.id);
  cc.add_dependency(ctx_, a.id, target.id);  // again: nothing new
  EXPECT_EQ(w.list_dependencies(ctx_, a.id).size(), 1u);
  start();
  ASSERT_TRUE(
      eventually([&] { return recorder_->count(a.id) == 1 && recorder_->count(b.id) == 1; }));
  gadget_cc.set_condition(ctx_, target.id, {"Ready", ConditionStatus::True});
  EXPECT_TRUE(eventually([&] { return recorder_->count(a.id) == 2; }));
  gadget_cc.set_condition(ctx_, target.id, {"Ready", ConditionStatus::True});  // unchanged
  gadget_cc.update_status(ctx_, target.id, 1, {true});  // status is not a condition
  settle();
  EXPECT_EQ(recorder_->count(a.id), 2);
  EXPECT_EQ(recorder_->count(b.id), 1);
  cc.remove_dependency(ctx_, a.id, target.id);
  gadget_cc.remove_condition(ctx_, target.id, "Ready");
  settle();
  EXPECT_EQ(recorder_->count(a.id), 2);
}

// A dependent that read its target before it added the edge runs once more when the
// edge is new: the target may have changed in between, when no edge woke anyone, and the
// resync does not run a settled dependent.
TEST_F(GcTest, ADependentThatAddsANewEdgeReadsItsTargetAgain) {
  Widgets gadgets(*bh_, gadget_kind);
  auto gadget_cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, gadget_kind, [](auto&, auto&, auto&) { return Result{}; });
  auto target = gadgets.create(ctx_, {"target", 1});
  Gate gate;
  std::atomic<bool> saw_ready{false};
  recorder_->set_body([&](auto& ctx, auto& cc, auto& o) {
    bool ready = !gadgets.get(ctx, target.id).conditions.empty();
    gate.pass();  // the target changes here, before the edge exists
    cc.add_dependency(ctx, o.id, target.id);
    cc.update_status(ctx, o.id, o.generation, WidgetStatus{ready});
    saw_ready = ready;
    return Result{};
  });
  auto cc = register_widgets();
  auto stop_first = stop_before_locals();
  auto dependent = widgets().create(ctx_, {"dependent", 1});
  start();
  gate.wait_entered();
  gadget_cc.set_condition(ctx_, target.id, {"Ready", ConditionStatus::True});
  gate.open();
  settle();
  EXPECT_EQ(recorder_->count(dependent.id), 2);
  EXPECT_TRUE(saw_ready);
  EXPECT_TRUE(widgets().get(ctx_, dependent.id).status->ready);
  // An edge that exists already wakes no one: no pass for ever.
  cc.add_dependency(ctx_, dependent.id, target.id);
  settle();
  EXPECT_EQ(recorder_->count(dependent.id), 2);
}

// A target's deletion request wakes its dependents, as a condition change does, from
// this process or another: a settled dependent is skipped by the resync, and its edge
// would hold the target for ever.
TEST_F(GcTest, ATargetsDeletionRequestWakesItsDependents) {
  Widgets gadgets(*bh_, gadget_kind);
  recorder_->set_body([&gadgets](auto& ctx, auto& cc, auto& o) {
    for (auto& d : cc.list_dependencies(ctx, o.id)) {
      try {
        if (gadgets.get(ctx, d.id).deletion_requested_at) cc.remove_dependency(ctx, o.id, d.id);
      } catch (const Error& e) {
        if (e.code() != errc::not_found) throw;
      }
    }
    return Result{};
  });
  auto stop_first = stop_before_locals();
  auto [here, there, dependent] = dependent_of_two(gadgets);  // settled: no resync runs it
  gadgets.remove(ctx_, here);
  settle();  // the clock never moves
  EXPECT_TRUE(gone(gadgets, ctx_, here));
  Beehive other(open_test_store(dir_.file("beehive.db")));
  Widgets(other, gadget_kind).remove(ctx_, there);
  EXPECT_TRUE(eventually([&] { return gone(gadgets, ctx_, there); }, 5s));
  EXPECT_TRUE(widgets().list_dependencies(ctx_, dependent).empty());
}

// A dependent that failed for good (TerminalError) is still woken by its target's
// deletion request, whichever process made it: it must drop its edge, or the target
// would be held for ever (a terminal mark is lifted only by a new spec or a requeue).
TEST_F(GcTest, ATargetsDeletionRequestWakesADependentThatFailedForGood) {
  Widgets gadgets(*bh_, gadget_kind);
  recorder_->set_body([&gadgets](auto& ctx, auto& cc, auto& o) -> Result {
    for (auto& d : cc.list_dependencies(ctx, o.id))
      if (gadgets.get(ctx, d.id).deletion_requested_at) cc.remove_dependency(ctx, o.id, d.id);
    // Every pass fails for good, the ones that drop an edge too: only a lifting wake
    // runs it again.
    throw TerminalError("its targets are not what it needs");
  });
  auto stop_first = stop_before_locals();
  // Failed for good: only a new spec or a requeue would run it again.
  auto [here, there, dependent] = dependent_of_two(gadgets);
  const auto passes = recorder_->count(dependent);
  gadgets.remove(ctx_, here);
  settle();
  EXPECT_EQ(recorder_->count(dependent), passes + 1);
  EXPECT_TRUE(gone(gadgets, ctx_, here));
  Beehive other(open_test_store(dir_.file("beehive.db")));  // another process's request
  Widgets(other, gadget_kind).remove(ctx_, there);
  EXPECT_TRUE(eventually([&] { return gone(gadgets, ctx_, there); }, 5s));
  EXPECT_EQ(recorder_->count(dependent), passes + 2);
  EXPECT_TRUE(widgets().list_dependencies(ctx_, dependent).empty());
}

// A dependent's deletion request ends its claim at once (has_incoming_refs no longer
// counts it), so a deleting target waiting for its last claim hears of it then, not
// when the dependent is finally removed.
TEST_F(GcTest, ADependentsDeletionRequestWakesATargetWaitingForItsLastClaim) {
  recorder_->set_body(release_when_unclaimed("shared"));
  register_widgets();
  auto user_cc = register_controller<WidgetSpec, WidgetStatus>(
      *bh_, {"acme.com", "User"}, [](auto&, auto&, auto&) { return Result{}; });
  auto w = widgets();
  Widgets users(*bh_, {"acme.com", "User"});
  auto shared = w.create(ctx_, {"conn", 1}, with_finalizers({"shared"}));
  auto user = users.create(ctx_, {"u", 1}, with_finalizers({"hold"}));  // nothing removes it
  user_cc.add_dependency(ctx_, user.id, shared.id);
  start();
  w.remove(ctx_, shared.id);
  settle();
  ASSERT_FALSE(gone(w, ctx_, shared.id));  // the user's live claim holds it
  users.remove(ctx_, user.id);
  settle();  // the clock never moves: no resync
  EXPECT_TRUE(gone(w, ctx_, shared.id));
  EXPECT_TRUE(users.get(ctx_, user.id).deletion_requested_at.has_value());
}

// A deleting dependent whose teardown waits for its target to go hears of the target's
// removal (its claim dropped with it), not only of its deletion request, when the target
// still existed: with no resync, nothing else would reconcile it. (The target's own
// finalizer keeps it until the dependent has looked and waits.)
TEST_F(GcTest, ATargetsRemovalWakesTheDeletingDependentsWaitingForIt) {
  auto w = widgets();
  ObjectID target_id = 0;
  recorder_->set_body([&](auto& ctx, auto& cc, auto& o) {
    if (o.spec.color == "dependent" && o.deletion_requested_at) {
      try {
        w.get(ctx, target_id);
        return Result{};  // detaches once the target is gone
      } catch (const Error& e) {
        if (e.code() != errc::not_found) throw;
      }
      cc.remove_finalizer(ctx, o.id, "detach");
    }
    return Result{};
  });
  auto stop_first = stop_before_locals();
  auto cc = register_widgets(with_resync_interval(0ms));
  auto target = w.create(ctx_, {"target", 1}, with_finalizers({"hold"}));
  target_id = target.id;
  auto dependent = w.create(ctx_, {"dependent", 1}, with_finalizers({"detach"}));
  cc.add_dependency(ctx_, dependent.id, target.id);
  start();
  w.remove(ctx_, dependent.id);
  w.remove(ctx_, target.id);  // wakes the dependent, which finds it there
  settle();
  ASSERT_FALSE(gone(w, ctx_, dependent.id));  // the target is there: it waits
  cc.remove_finalizer(ctx_, target.id, "hold");
  settle();  // the clock never moves: no resync
  EXPECT_TRUE(gone(w, ctx_, target.id));
  EXPECT_TRUE(gone(w, ctx_, dependent.id));
}

// An object being deleted takes no new dependent (a claim that would hold it while its
// teardown may already have begun), as it takes no new finalizer; an edge it already had
// is repeated as a no-op.
TEST_F(GcTest, AnObjectBeingDeletedTakesNoNewDependent) {
  auto cc = register_widgets();
  auto w = widgets();
  auto target = w.create(ctx_, {"target", 1}, with_finalizers({"f"}));
  auto old_user = w.create(ctx_, {"old", 1});
  auto new_user = w.create(ctx_, {"new", 1});
  cc.add_dependency(ctx_, old_user.id, target.id);
  w.remove(ctx_, target.id);
  EXPECT_NO_THROW(cc.add_dependency(ctx_, old_user.id, target.id));
  EXPECT_ERRC_WITH(cc.add_dependency(ctx_, new_user.id, target.id), errc::invalid_argument,
                   "being deleted");
  EXPECT_ERRC(
      cc.within(ctx_, [&](const Context& tx) { cc.add_dependency(tx, new_user.id, target.id); }),
      errc::invalid_argument);
  EXPECT_TRUE(w.list_dependencies(ctx_, new_user.id).empty());
  EXPECT_EQ(w.list_dependents(ctx_, target.id).size(), 1u);
}

TEST_F(GcTest, DependencyWritesJoinWithinAndCheckTheirIds) {
  auto cc = register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  auto gadget = Widgets(*bh_, gadget_kind).create(ctx_, {"g", 1});
  EXPECT_THROW(cc.within(ctx_,
                         [&](const Context& tx) {
                           cc.add_dependency(tx, a.id, b.id);
                           throw std::runtime_error("rollback");
                         }),
               std::runtime_error);
  EXPECT_TRUE(w.list_dependencies(ctx_, a.id).empty());
  EXPECT_ERRC(cc.add_dependency(ctx_, gadget.id, a.id), errc::wrong_kind);
  EXPECT_ERRC(cc.add_dependency(ctx_, a.id, 999999), errc::not_found);
  cc.add_dependency(ctx_, a.id, gadget.id);  // the target may be any kind
  EXPECT_EQ(cc.list_dependencies(ctx_, a.id),
            (std::vector<Ref>{{gadget.id, "acme.com", "Gadget"}}));
  EXPECT_EQ(cc.list_dependents(ctx_, gadget.id), (std::vector<Ref>{{a.id, "acme.com", "Widget"}}));
}

TEST_F(GcTest, RemoveDependencyJoinsWithinAndRollsBackWithIt) {
  auto cc = register_widgets();
  auto w = widgets();
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  cc.add_dependency(ctx_, a.id, b.id);
  EXPECT_THROW(cc.within(ctx_,
                         [&](const Context& tx) {
                           cc.remove_dependency(tx, a.id, b.id);
                           EXPECT_EQ(w.list_dependencies(ctx_, a.id).size(), 1u);
                           throw std::runtime_error("rollback");
                         }),
               std::runtime_error);
  EXPECT_EQ(w.list_dependencies(ctx_, a.id), (std::vector<Ref>{{b.id, "acme.com", "Widget"}}));
  EXPECT_EQ(w.list_dependents(ctx_, b.id), (std::vector<Ref>{{a.id, "acme.com", "Widget"}}));
  cc.within(ctx_, [&](const Context& tx) { cc.remove_dependency(tx, a.id, b.id); });
  EXPECT_TRUE(w.list_dependencies(ctx_, a.id).empty());
  EXPECT_TRUE(w.list_dependents(ctx_, b.id).empty());
}

TEST_F(GcTest, ControllerClientLookupsAreNotKindScopedAndReadMissingIdsAsEmpty) {
  auto cc = register_widgets();
  auto w = widgets();
  Widgets g(*bh_, gadget_kind);
  auto owner = g.create(ctx_, {"owner", 1});  // another kind's owner
  auto c1 = w.create(ctx_, {"c1", 1}, with_owner(owner.id));
  auto c2 = g.create(ctx_, {"c2", 1}, with_owner(owner.id));
  EXPECT_EQ(cc.get_owner(ctx_, c1.id), (Ref{owner.id, "acme.com", "Gadget"}));
  EXPECT_EQ(cc.get_owner(ctx_, c2.id), (Ref{owner.id, "acme.com", "Gadget"}));  // a gadget's
  EXPECT_FALSE(cc.get_owner(ctx_, owner.id).has_value());
  EXPECT_EQ(cc.list_owned(ctx_, owner.id),
            (std::vector<Ref>{{c1.id, "acme.com", "Widget"}, {c2.id, "acme.com", "Gadget"}}));
  EXPECT_TRUE(cc.list_owned(ctx_, c1.id).empty());
  EXPECT_FALSE(cc.get_owner(ctx_, 999999).has_value());
  EXPECT_TRUE(cc.list_owned(ctx_, 999999).empty());
  EXPECT_TRUE(cc.list_dependencies(ctx_, 999999).empty());
  EXPECT_TRUE(cc.list_dependents(ctx_, 999999).empty());
  EXPECT_FALSE(cc.has_incoming_refs(ctx_, 999999));
}

TEST_F(GcTest, LazyLookupsAreNotKindScoped) {
  auto w = widgets();
  Widgets g(*bh_, gadget_kind);
  auto owner = g.create(ctx_, {"owner", 1});
  auto c1 = w.create(ctx_, {"c1", 1}, with_owner(owner.id));
  auto c2 = g.create(ctx_, {"c2", 1}, with_owner(owner.id));
  EXPECT_EQ(w.list_owned(ctx_, owner.id).size(), 2u);  // a gadget's children, from widgets
  EXPECT_EQ(w.get_owner(ctx_, c2.id)->id, owner.id);
  EXPECT_FALSE(w.get_owner(ctx_, 999999).has_value());
  EXPECT_TRUE(w.list_owned(ctx_, 999999).empty());
  auto owned_widgets = w.list_owned_objects(ctx_, owner.id, load_owner());
  ASSERT_EQ(owned_widgets.size(), 1u);  // this kind only
  EXPECT_EQ(owned_widgets[0].id, c1.id);
  EXPECT_EQ(owned_widgets[0].get_owner()->id, owner.id);
  EXPECT_ERRC(owned_widgets[0].list_dependencies(), errc::not_loaded);
}

TEST_F(GcTest, ListOwnedObjectsIncludesDeletionPendingChildrenById) {
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 1});
  std::vector<ObjectID> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(w.create(ctx_, {"c", i}, with_owner(owner.id), with_finalizers({"f"})).id);
  w.remove(ctx_, ids[1]);
  auto children = w.list_owned_objects(ctx_, owner.id);
  ASSERT_EQ(children.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(children[i].id, ids[i]);
  EXPECT_TRUE(children[1].deletion_requested_at.has_value());
}

TEST_F(GcTest, ListOwnedObjectsIsByIdInOneQueryAndTakesEveryLoad) {
  auto cc = register_widgets();
  auto w = widgets();
  Widgets g(*bh_, gadget_kind);
  auto a = w.create(ctx_, {"owner a", 0});
  auto b = w.create(ctx_, {"owner b", 0});
  // Children of a and b interleaved, a gadget among them; then the earliest ones are
  // written last, so resource-version and updated_at order is the reverse of id order.
  std::vector<ObjectID> of_a, of_b;
  for (int i = 0; i < 4; ++i) {
    of_a.push_back(w.create(ctx_, {"a", i}, with_owner(a.id)).id);
    of_b.push_back(w.create(ctx_, {"b", i}, with_owner(b.id)).id);
    g.create(ctx_, {"gadget", i}, with_owner(a.id));
  }
  for (auto it = of_a.rbegin(); it != of_a.rend(); ++it) {
    clock_->advance(1s);
    w.update(ctx_, *it, {"a updated", 1});
  }
  cc.add_dependency(ctx_, of_a[2], b.id);
  auto grandchild = w.create(ctx_, {"grandchild", 0}, with_owner(of_a[1]));
  EXPECT_EQ(statements_of([&] { w.list_owned_objects(ctx_, a.id); }), 1u);
  auto plain = w.list_owned_objects(ctx_, a.id);
  ASSERT_EQ(plain.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(plain[i].id, of_a[i]);
  EXPECT_GT(plain[0].resource_version, plain[3].resource_version);  // not by version
  EXPECT_ERRC(plain[0].get_owner(), errc::not_loaded);
  auto load_three = [&] {
    return w.list_owned_objects(ctx_, a.id, load_dependencies(), load_dependents(), load_owned());
  };
  EXPECT_LE(statements_of(load_three), 6u);  // three relations + read transaction
  auto loaded = load_three();
  ASSERT_EQ(loaded.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(loaded[i].id, of_a[i]);
  EXPECT_EQ(loaded[2].list_dependencies(), (std::vector<Ref>{{b.id, "acme.com", "Widget"}}));
  EXPECT_TRUE(loaded[0].list_dependencies().empty());
  EXPECT_TRUE(loaded[2].list_dependents().empty());
  EXPECT_EQ(loaded[1].list_owned(), (std::vector<Ref>{{grandchild.id, "acme.com", "Widget"}}));
  EXPECT_TRUE(loaded[3].list_owned().empty());
  EXPECT_ERRC(loaded[0].get_owner(), errc::not_loaded);
  cc.record_event(ctx_, of_b[3], {"", EventType::Normal, "Seen"});
  auto with_events = w.list_owned_objects(ctx_, b.id, load_dependents(), load_events());
  ASSERT_EQ(with_events.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(with_events[i].id, of_b[i]);
  EXPECT_TRUE(with_events[0].list_events().empty());
  ASSERT_EQ(with_events[3].list_events().size(), 1u);
  EXPECT_EQ(with_events[3].list_events()[0].reason, "Seen");
  EXPECT_TRUE(w.list_owned_objects(ctx_, 999999).empty());
}

TEST_F(GcTest, EagerLoadsAreOneQueryPerRelationForAWholeList) {
  auto cc = register_widgets();
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 0});
  cc.within(ctx_, [&](const Context& tx) {
    for (int i = 0; i < 9999; ++i) w.create(tx, {"c", i}, with_owner(owner.id));
  });
  auto plain_cost = statements_of([&] { w.list(ctx_); });
  auto load_all = [&] {
    return w.list(ctx_, load_owner(), load_dependencies(), load_dependents(), load_owned());
  };
  auto loaded_cost = statements_of(load_all);
  auto loaded = load_all();
  ASSERT_EQ(loaded.size(), 10000u);
  EXPECT_LE(loaded_cost, plain_cost + 6);  // four relations, plus the read transaction
  EXPECT_EQ(loaded[1].get_owner()->id, owner.id);
  EXPECT_EQ(loaded[0].list_owned().size(), 9999u);
}

/// A dependency another writer (another process; here a second store on the database)
/// removes from a deletion-pending object: the running beehive's controller reconciles the object
/// (its finalizer waited for the last dependent), and its collector removes one that only the
/// dependency kept.
TEST_F(GcTest, ADependencyAnotherWriterReleasesWakesTheDeletingTargetAndTheCollector) {
  recorder_->set_body(release_when_unclaimed("acme.com/last-dependent"));
  auto cc = register_widgets();
  auto w = widgets();
  auto gated = w.create(ctx_, {"gated", 1}, with_finalizers({"acme.com/last-dependent"}));
  auto kept = w.create(ctx_, {"kept", 1});
  auto dependent = w.create(ctx_, {"dependent", 1});
  cc.add_dependency(ctx_, dependent.id, gated.id);
  cc.add_dependency(ctx_, dependent.id, kept.id);
  start();
  w.remove(ctx_, gated.id);
  w.remove(ctx_, kept.id);
  settle();  // the clock never moves: no resync, no collector cadence
  ASSERT_TRUE(w.get(ctx_, gated.id).deletion_requested_at.has_value());
  ASSERT_TRUE(w.get(ctx_, kept.id).deletion_requested_at.has_value());
  const int passes = recorder_->count(gated.id);

  auto other_store = open_test_store(dir_.file("beehive.db"));
  Beehive other(other_store);
  auto theirs = register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  theirs.remove_dependency(ctx_, dependent.id, gated.id);
  theirs.remove_dependency(ctx_, dependent.id, kept.id);
  EXPECT_TRUE(eventually([&] { return gone(w, ctx_, gated.id); }, 5s));
  EXPECT_TRUE(eventually([&] { return gone(w, ctx_, kept.id); }, 5s));
  EXPECT_GT(recorder_->count(gated.id), passes);
}

/// An owner another writer removes: the running beehive's collector learns of the
/// deletion request from the log and cascades to the children, with the clock standing
/// still (a pass that only collects, as after a finalizer's release, would leave them).
TEST_F(GcTest, AnOwnerAnotherWriterRemovesIsCascadedByTheRunningCollector) {
  register_widgets();
  auto w = widgets();
  auto held = w.create(ctx_, {"held", 1}, with_finalizers({"f"}));
  start();
  w.remove(ctx_, held.id);
  settle();
  auto other_store = open_test_store(dir_.file("beehive.db"));
  Beehive other(other_store);
  Widgets theirs(other, widget_kind);
  auto owner = theirs.create(ctx_, {"owner", 1});
  auto child = theirs.create(ctx_, {"child", 1}, with_owner(owner.id));
  // A release first: the pass it brings does not cascade.
  register_controller<WidgetSpec, WidgetStatus>(other, widget_kind, [](auto&, auto&, auto&) {
    return Result{};
  }).remove_finalizer(ctx_, held.id, "f");
  EXPECT_TRUE(eventually([&] { return gone(w, ctx_, held.id); }, 5s));
  theirs.remove(ctx_, owner.id);
  EXPECT_TRUE(eventually([&] { return gone(w, ctx_, child.id) && gone(w, ctx_, owner.id); }, 5s));
}

/// A pass whose removals spend its whole budget still cascades: the children of an owner
/// whose deletion was requested with a thousand and more collectible objects are marked and
/// collected, and then the owner, without the clock moving.
TEST_F(GcTest, AnOwnerRemovedBesideAFullPassOfCollectibleObjectsIsStillCascaded) {
  auto cc = register_widgets();
  auto w = widgets();
  ObjectID owner = 0;
  std::vector<ObjectID> children;
  cc.within(ctx_, [&](const Context& tx) {
    for (int i = 0; i < 1200; ++i) w.remove(tx, w.create(tx, {"loose", i}).id);
    owner = w.create(tx, {"owner", 0}).id;
    for (int i = 0; i < 3; ++i)
      children.push_back(w.create(tx, {"child", i}, with_owner(owner)).id);
    w.remove(tx, owner);
  });
  start();
  settle();
  for (auto id : children) EXPECT_TRUE(gone(w, ctx_, id)) << id;
  EXPECT_TRUE(gone(w, ctx_, owner));
  EXPECT_TRUE(w.list(ctx_).empty());
}

/// A pass stops at a byte budget as well as a row count: the children of an owner, each
/// large, are marked and collected over several transactions (other writes between
/// them), not in one that holds every child whole in memory and the others waiting.
TEST_F(GcTest, ACascadeOfLargeChildrenSpansPassesOfBoundedBytes) {
  struct PassBytes {
    std::int64_t was = store::gc_pass_bytes.exchange(1000);
    ~PassBytes() { store::gc_pass_bytes = was; }
  } small;
  register_widgets();
  auto w = widgets();
  auto owner = w.create(ctx_, {"owner", 0});
  const std::string large(600, 'x');
  for (int i = 0; i < 10; ++i) w.create(ctx_, {large, i}, with_owner(owner.id));
  start();
  settle();
  const auto before = writer_transactions(*bh_);
  w.remove(ctx_, owner.id);
  settle();
  EXPECT_TRUE(w.list(ctx_).empty());
  // Two children a pass (the second takes the budget past 1 000 bytes): five passes mark
  // them, five collect them, one the owner; and the removal's own commit.
  EXPECT_GE(writer_transactions(*bh_) - before, 11u);
}

}  // namespace
}  // namespace beehive::test
