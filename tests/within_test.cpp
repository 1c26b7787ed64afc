// within: one transaction for several writes, nested savepoints, side effects only
// after the outermost commit.

#include <map>
#include <thread>

#include "controller_fixture.hpp"
#include "writer_state.hpp"

namespace beehive::test {
namespace {

class WithinTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  }
  std::unique_ptr<ControllerClient<WidgetStatus>> cc_;
};

// Writes that waited behind a block are served as the queue serves writes: side by side,
// they commit together once the block ends, not a transaction each.
TEST_F(WithinTest, WritesThatWaitedBehindABlockCommitTogether) {
  auto w = widgets();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(w.create(ctx_, {"a", i}).id);
  std::promise<void> entered, release;
  std::thread block([&] {
    cc_->within(ctx_, [&](const Context& tx) {
      w.update(tx, ids[0], {"block", 0});
      entered.set_value();
      release.get_future().wait();
    });
  });
  entered.get_future().wait();
  std::vector<std::thread> writers;
  for (int i = 1; i < 8; ++i)
    writers.emplace_back([&, i] { w.update(ctx_, ids[i], {"after", i}); });
  bool waiting = eventually([&] { return writer_state(*bh_).deferred == 7; });
  auto before = writer_transactions(*bh_);
  release.set_value();
  block.join();
  for (auto& t : writers) t.join();
  ASSERT_TRUE(waiting);
  EXPECT_EQ(writer_transactions(*bh_) - before, 2u);  // the block's, then the seven's
  for (int i = 1; i < 8; ++i) EXPECT_EQ(w.get(ctx_, ids[i]).spec.color, "after");
}

TEST_F(WithinTest, CommitsEverythingTogether) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  ObjectID child = 0;
  cc_->within(ctx_, [&](const Context& tx) {
    cc_->update_status(tx, o.id, 1, {true});
    cc_->set_condition(tx, o.id, {"Ready", ConditionStatus::True});
    child = w.create(tx, {"child", 1}, with_slug("child")).id;
    w.update(tx, o.id, {"a", 2});
  });
  auto got = w.get(ctx_, o.id);
  EXPECT_TRUE(got.status->ready);
  EXPECT_EQ(got.conditions.size(), 1u);
  EXPECT_EQ(got.spec.size, 2);
  EXPECT_EQ(w.get_by_slug(ctx_, "child").id, child);
}

// Blocks nest at most 1000 deep: a runaway recursion overflowed the stack (a crash at
// about 2 250 levels). The block beyond the bound is refused; those around it go on.
TEST_F(WithinTest, BlocksNestAtMostAThousandDeep) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  int deepest = 0;
  std::function<void(const Context&, int)> nest = [&](const Context& tx, int level) {
    deepest = level;
    if (level == 1000) {
      EXPECT_ERRC_WITH(cc_->within(tx, [](const Context&) {}), errc::invalid_argument,
                       "at most 1000");
      w.update(tx, o.id, {"a", 2});  // the block itself goes on
      return;
    }
    cc_->within(tx, [&](const Context& inner) { nest(inner, level + 1); });
  };
  cc_->within(ctx_, [&](const Context& tx) { nest(tx, 1); });
  EXPECT_EQ(deepest, 1000);
  EXPECT_EQ(w.get(ctx_, o.id).spec.size, 2);
}

// A block's context belongs to the thread running the block. Used from another thread,
// its calls would interleave with the block's own: a nested block's release could end
// the other thread's savepoint, and a rollback then undo writes already reported done.
// Another thread's call is refused, and writes nothing; the block goes on.
// An empty function is bad input, as register_controller says of an empty controller:
// within threw std::bad_function_call after opening its block, and an empty on-create
// callback was accepted, then logged as a callback that threw.
TEST_F(WithinTest, AnEmptyBlockOrOnCreateCallbackIsInvalid) {
  EXPECT_ERRC_WITH(cc_->within(ctx_, {}), errc::invalid_argument, "empty");
  EXPECT_ERRC_WITH(with_on_create(std::function<void(const Context&)>{}), errc::invalid_argument,
                   "empty");
  auto w = widgets();  // the writer is free: no block was left open
  EXPECT_EQ(w.create(ctx_, {"a", 1}).spec.color, "a");
}

TEST_F(WithinTest, ABlocksContextIsRefusedOnAnotherThread) {
  auto w = widgets();
  cc_->within(ctx_, [&](const Context& tx) {
    w.create(tx, {"mine", 1}, with_slug("mine"));
    std::thread([&] {
      EXPECT_ERRC_WITH(w.create(tx, {"theirs", 1}, with_slug("theirs")), errc::invalid_argument,
                       "another thread");
      EXPECT_ERRC_WITH(cc_->within(tx, [&](const Context&) {}), errc::invalid_argument,
                       "another thread");
      EXPECT_ERRC_WITH(w.get_by_slug(tx, "mine"), errc::invalid_argument, "another thread");
    }).join();
    w.create(tx, {"mine too", 1}, with_slug("mine-too"));
  });
  EXPECT_EQ(w.list(ctx_).size(), 2u);
  EXPECT_ERRC(w.get_by_slug(ctx_, "theirs"), errc::not_found);
}

TEST_F(WithinTest, ReadsWithTheBlocksContextSeeItsOwnWrites) {
  auto w = widgets();
  cc_->within(ctx_, [&](const Context& tx) {
    auto o = w.create(tx, {"mine", 1}, with_slug("mine"));
    cc_->update_status(tx, o.id, 1, {true});
    EXPECT_EQ(w.get_by_slug(tx, "mine").id, o.id);
    EXPECT_TRUE(w.get(tx, o.id).status->ready);
    EXPECT_EQ(w.list(tx).size(), 1u);
    EXPECT_ERRC(w.get_by_slug(ctx_, "mine"), errc::not_found);  // not committed yet
  });
  EXPECT_EQ(w.list(ctx_).size(), 1u);
}

TEST_F(WithinTest, RelationAndEventReadsInsideTheBlockSeeItsOwnWrites) {
  auto w = widgets();
  auto parent = w.create(ctx_, {"parent", 1});
  cc_->within(ctx_, [&](const Context& tx) {
    auto child = w.create(tx, {"child", 1}, with_owner(parent.id));
    cc_->add_dependency(tx, parent.id, child.id);
    cc_->record_event(tx, child.id, {"", EventType::Normal, "Made"});
    auto owned = w.list_owned_objects(tx, parent.id);
    ASSERT_EQ(owned.size(), 1u);
    EXPECT_EQ(owned[0].id, child.id);
    EXPECT_EQ(w.get_owner(tx, child.id)->id, parent.id);
    EXPECT_EQ(cc_->get_owner(tx, child.id)->id, parent.id);
    EXPECT_EQ(w.list_owned(tx, parent.id).size(), 1u);
    EXPECT_EQ(cc_->list_dependencies(tx, parent.id).size(), 1u);
    EXPECT_EQ(w.list_dependents(tx, child.id).size(), 1u);
    EXPECT_TRUE(cc_->has_incoming_refs(tx, child.id));
    ASSERT_EQ(w.list_events(tx, child.id).size(), 1u);
    EXPECT_EQ(w.list_events(tx, child.id)[0].reason, "Made");
    // Outside the block, nothing of it is visible yet.
    EXPECT_TRUE(w.list_owned_objects(ctx_, parent.id).empty());
    EXPECT_TRUE(cc_->list_dependencies(ctx_, parent.id).empty());
  });
  EXPECT_EQ(w.list_owned_objects(ctx_, parent.id).size(), 1u);
  EXPECT_EQ(cc_->list_dependencies(ctx_, parent.id).size(), 1u);
}

TEST_F(WithinTest, AThrowRollsEverythingBackAndPropagates) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1});
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             cc_->update_status(tx, o.id, 1, {true});
                             w.create(tx, {"child", 1}, with_slug("child"));
                             throw std::runtime_error("changed my mind");
                           }),
               std::runtime_error);
  auto got = w.get(ctx_, o.id);
  EXPECT_FALSE(got.status.has_value());
  EXPECT_EQ(got.resource_version, o.resource_version);
  EXPECT_ERRC(w.get_by_slug(ctx_, "child"), errc::not_found);
  w.create(ctx_, {"child", 1}, with_slug("child"));  // the slug is free
}

TEST_F(WithinTest, AFailedWriteInsideRollsBackAloneWhenCaught) {
  auto w = widgets();
  w.create(ctx_, {"taken", 1}, with_slug("taken"));
  cc_->within(ctx_, [&](const Context& tx) {
    w.create(tx, {"ok", 1}, with_slug("ok"));
    EXPECT_ERRC(w.create(tx, {"dup", 1}, with_slug("taken")), errc::already_exists);
    w.create(tx, {"ok2", 1}, with_slug("ok2"));
  });
  EXPECT_EQ(w.list(ctx_).size(), 3u);
}

TEST_F(WithinTest, NestedBlocksAreSavepoints) {
  auto w = widgets();
  cc_->within(ctx_, [&](const Context& outer) {
    w.create(outer, {"outer", 1}, with_slug("outer"));
    try {
      cc_->within(outer, [&](const Context& inner) {
        w.create(inner, {"inner", 1}, with_slug("inner"));
        throw std::runtime_error("inner fails");
      });
    } catch (const std::runtime_error&) {
    }
    cc_->within(outer, [&](const Context& inner) {
      w.create(inner, {"kept", 1}, with_slug("kept"));
    });
  });
  EXPECT_NO_THROW(w.get_by_slug(ctx_, "outer"));
  EXPECT_NO_THROW(w.get_by_slug(ctx_, "kept"));
  EXPECT_ERRC(w.get_by_slug(ctx_, "inner"), errc::not_found);
}

TEST_F(WithinTest, OnCreateRunsAfterTheOutermostCommitAndNeverAfterARollback) {
  auto w = widgets();
  std::vector<std::string> log;
  cc_->within(ctx_, [&](const Context& tx) {
    w.create(tx, {"a", 1}, with_slug("a"),
             with_on_create([&](const Context&) { log.push_back("created a"); }));
    log.push_back("body done");
    try {
      cc_->within(tx, [&](const Context& inner) {
        w.create(inner, {"b", 1}, with_slug("b"),
                 with_on_create([&](const Context&) { log.push_back("created b"); }));
        throw std::runtime_error("roll b back");
      });
    } catch (const std::runtime_error&) {
    }
  });
  EXPECT_EQ(log, (std::vector<std::string>{"body done", "created a"}));
  log.clear();
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             w.get_or_create(tx, "c", {"c", 1}, with_on_create([&](const Context&) {
                                               log.push_back("created c");
                                             }));
                             throw std::runtime_error("rollback");
                           }),
               std::runtime_error);
  EXPECT_TRUE(log.empty());
}

// The context an on_create callback gets works: the block it was created in has ended
// by then (a user's within, or the one create_or_update runs in), and the callback's
// calls run outside it.
TEST_F(WithinTest, AnOnCreateCallbacksContextCanBeUsed) {
  auto w = widgets();
  std::vector<std::string> log;
  auto record = [&](const char* what, ObjectID id) {
    return with_on_create([&log, &w, what, id](const Context& c) {
      auto o = w.get_by_slug(c, what);
      w.update(c, o.id, {"seen", o.spec.size + 1});
      if (id) w.get(c, id);
      log.push_back(what);
    });
  };
  auto plain = w.create(ctx_, {"plain", 1}, with_slug("plain"), record("plain", 0));
  cc_->within(ctx_, [&](const Context& tx) {
    w.create(tx, {"in-block", 1}, with_slug("in-block"), record("in-block", plain.id));
  });
  w.create_or_update(ctx_, "upserted", {"upserted", 1}, record("upserted", plain.id));
  EXPECT_EQ(log, (std::vector<std::string>{"plain", "in-block", "upserted"}));
  EXPECT_EQ(w.get_by_slug(ctx_, "in-block").spec.size, 2);
  EXPECT_EQ(w.get_by_slug(ctx_, "upserted").spec.size, 2);
}

TEST_F(WithinTest, WakesHappenAfterCommitAndNeverAfterRollback) {
  start();
  // The start's own writes (the leader's first collection and sweeps) are done first: one
  // still queued behind the block below would keep the settle inside it from settling.
  settle();
  auto w = widgets();
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             w.create(tx, {"never", 1});
                             throw std::runtime_error("rollback");
                           }),
               std::runtime_error);
  ObjectID id = 0;
  cc_->within(ctx_, [&](const Context& tx) {
    id = w.create(tx, {"a", 1}).id;
    settle();
    EXPECT_EQ(recorder_->total(), 0);  // not before the commit
  });
  EXPECT_TRUE(eventually([&] { return recorder_->count(id) == 1; }));
  settle();
  EXPECT_EQ(recorder_->total(), 1);
}

// A requeue made inside a block is one of its side effects: it sees the block's own
// writes (an object the block created), runs after the outermost commit, and never after
// a rollback.
TEST_F(WithinTest, ARequeueInsideABlockRunsAfterItsCommitAndNeverAfterARollback) {
  start();
  settle();
  auto w = widgets();
  auto existing = w.create(ctx_, {"e", 1});
  settle();
  const int before = recorder_->count(existing.id);
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             w.requeue(tx, existing.id);
                             throw std::runtime_error("rollback");
                           }),
               std::runtime_error);
  settle();
  EXPECT_EQ(recorder_->count(existing.id), before);
  ObjectID id = 0;
  cc_->within(ctx_, [&](const Context& tx) {
    id = w.create(tx, {"a", 1}).id;
    w.requeue(tx, id);
    w.requeue(tx, existing.id);
    settle();
    EXPECT_EQ(recorder_->count(existing.id), before);  // not before the commit
  });
  settle();
  EXPECT_EQ(recorder_->count(existing.id), before + 1);
  EXPECT_GE(recorder_->count(id), 1);
}

// A requeue inside a block says no_controller for a kind without one, as outside; and
// a block whose deadline passed before it returned is rolled back (deadline_exceeded):
// its requeue never runs, its writes never land.
TEST_F(WithinTest, ARequeueInsideABlockSaysNoControllerAndDiesWithTheBlocksDeadline) {
  start();
  settle();
  Widgets gadgets(*bh_, gadget_kind);  // no controller
  auto g = gadgets.create(ctx_, {"g", 1});
  cc_->within(ctx_, [&](const Context& tx) {
    EXPECT_ERRC(gadgets.requeue(tx, g.id), errc::no_controller);
  });
  auto w = widgets();
  auto e = w.create(ctx_, {"e", 1});
  settle();
  const int before = recorder_->count(e.id);
  EXPECT_ERRC(cc_->within(ctx_.with_timeout(100ms),
                          [&](const Context& tx) {
                            w.requeue(tx, e.id);
                            w.create(tx, {"late", 1}, with_slug("late"));
                            // The deadline passes inside the block.
                            while (!tx.done()) std::this_thread::yield();
                          }),
              errc::deadline_exceeded);
  settle();
  EXPECT_EQ(recorder_->count(e.id), before) << "the rolled-back block's requeue ran";
  EXPECT_ERRC(w.get_by_slug(ctx_, "late"), errc::not_found);
  // A block that returns in time commits: its requeue runs.
  cc_->within(ctx_.with_timeout(10s), [&](const Context& tx) { w.requeue(tx, e.id); });
  settle();
  EXPECT_EQ(recorder_->count(e.id), before + 1) << "the committed block's requeue was lost";
}

// A nested block with a context that ended runs nothing and throws its error; one whose
// context ends inside it is undone to its savepoint, and the outer block goes on.
TEST_F(WithinTest, ANestedBlockWhoseContextEndedIsUndoneAndTheOuterBlockGoesOn) {
  auto w = widgets();
  Context cancelled;
  std::function<void()> cancel;
  std::tie(cancelled, cancel) = ctx_.with_cancel();
  cancel();
  bool ran = false;
  cc_->within(ctx_, [&](const Context& tx) {
    w.create(tx, {"outer", 1}, with_slug("outer"));
    EXPECT_ERRC(cc_->within(tx.with_timeout(0ms), [&](const Context&) { ran = true; }),
                errc::deadline_exceeded);
    EXPECT_ERRC(cc_->within(tx.with_timeout(50ms),
                            [&](const Context& inner) {
                              w.create(inner, {"inner", 1}, with_slug("inner"));
                              while (!inner.done()) std::this_thread::yield();
                            }),
                errc::deadline_exceeded);
  });
  EXPECT_FALSE(ran);
  EXPECT_EQ(w.get_by_slug(ctx_, "outer").spec.color, "outer");
  EXPECT_ERRC(w.get_by_slug(ctx_, "inner"), errc::not_found);
  EXPECT_ERRC(cc_->within(cancelled, [&](const Context&) { ran = true; }), errc::cancelled);
  EXPECT_FALSE(ran);
}

TEST_F(WithinTest, WatchChangesComeAfterTheOutermostCommitAndNeverAfterARollback) {
  auto w = widgets();
  auto existing = w.create(ctx_, {"existing", 1});
  auto s = w.watch_list(ctx_);
  auto snapshot = s.next_for(5s);
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_EQ(snapshot->object.id, existing.id);
  auto events = w.watch_events(ctx_, existing.id);
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             w.create(tx, {"never", 1});
                             w.update(tx, existing.id, {"never", 2});
                             cc_->record_event(tx, existing.id, {"", EventType::Normal, "Never"});
                             throw std::runtime_error("rollback");
                           }),
               std::runtime_error);
  EXPECT_FALSE(s.next_for(30ms).has_value());  // nothing from a rolled-back block
  EXPECT_FALSE(events.next_for(30ms).has_value());
  ObjectID a = 0, b = 0;
  cc_->within(ctx_, [&](const Context& tx) {
    a = w.create(tx, {"a", 1}).id;
    cc_->within(tx, [&](const Context& inner) {  // a released savepoint: not a commit
      b = w.create(inner, {"b", 1}).id;
      cc_->update_status(inner, existing.id, 1, {true});
    });
    try {
      cc_->within(tx, [&](const Context& inner) {
        w.create(inner, {"rolled back", 1});
        throw std::runtime_error("inner fails");
      });
    } catch (const std::runtime_error&) {
    }
    cc_->record_event(tx, existing.id, {"", EventType::Normal, "Kept"});
    EXPECT_FALSE(s.next_for(30ms).has_value());  // not before the outermost commit
    EXPECT_FALSE(events.next_for(30ms).has_value());
  });
  std::map<ObjectID, Change<WidgetSpec, WidgetStatus>> seen;
  while (seen.size() < 3) {
    auto c = s.next_for(5s);
    if (!c) break;
    seen[c->object.id] = *c;
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[a].type, ChangeType::Added);
  EXPECT_EQ(seen[b].type, ChangeType::Added);
  EXPECT_EQ(seen[existing.id].type, ChangeType::Modified);
  EXPECT_TRUE(seen[existing.id].object.status->ready);
  EXPECT_EQ(seen[existing.id].object.spec.size, 1);  // the rolled-back update never shows
  EXPECT_FALSE(s.next_for(30ms).has_value());        // nor the rolled-back creates
  auto e = events.next_for(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->reason, "Kept");
  EXPECT_EQ(e->count, 1);
  EXPECT_FALSE(events.next_for(30ms).has_value());
}

// An event recorded in a nested block that rolls back is gone: no watcher hears of it.
// And the versions a rolled-back block took are not handed out again, though an event
// the outer block kept holds a version between them.
TEST_F(WithinTest, ANestedBlockRolledBackTakesItsEventsAndItsVersionsWithIt) {
  auto w = widgets();
  auto existing = w.create(ctx_, {"existing", 1});
  auto events = w.watch_events(ctx_, existing.id);
  cc_->within(ctx_, [&](const Context& tx) {
    cc_->record_event(tx, existing.id, {"", EventType::Normal, "Kept"});
    try {
      cc_->within(tx, [&](const Context& inner) {
        cc_->record_event(inner, existing.id, {"", EventType::Normal, "Never"});
        w.update(inner, existing.id, {"never", 2});
        throw std::runtime_error("inner fails");
      });
    } catch (const std::runtime_error&) {
    }
  });
  auto e = events.next_for(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->reason, "Kept");
  EXPECT_FALSE(events.next_for(50ms).has_value());  // "Never" was rolled back
  EXPECT_EQ(w.list_events(ctx_, existing.id).size(), 1u);
  auto after = w.update(ctx_, existing.id, {"after", 3});
  auto held = query_test_store(dir_.file("beehive.db"),
                               "SELECT resource_version FROM events ORDER BY resource_version");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_GT(after.resource_version, std::stoll(held[0][0]))
      << "a version the kept event holds was handed out again";
}

TEST_F(WithinTest, OtherWritersWaitForTheTransaction) {
  auto w = widgets();
  std::atomic<bool> other_done{false};
  std::thread other;
  cc_->within(ctx_, [&](const Context& tx) {
    w.create(tx, {"first", 1}, with_slug("first"));
    other = std::thread([&] {
      w.create(ctx_, {"second", 1}, with_slug("second"));
      other_done = true;
    });
    settle();
    EXPECT_FALSE(other_done);  // serialized behind the open transaction
  });
  other.join();
  auto all = w.list(ctx_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].slug, "first");
  EXPECT_EQ(all[1].slug, "second");
}

// Plain writes are committed in groups, and what arrives while a group is applied joins
// it; a within block arriving meanwhile must run after the group, alone, with nothing lost
// or reordered within a thread.
TEST_F(WithinTest, BlocksAndGroupedWritesFromManyThreadsAllLand) {
  auto w = widgets();
  w.create(ctx_, {"taken", 0}, with_slug("taken"));
  constexpr int plain_threads = 4, block_threads = 2, rounds = 40;
  std::atomic<int> refused{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < plain_threads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        auto o = w.create(ctx_, {"plain", i}, with_slug(std::to_string(t * 100 + i) + "p"));
        EXPECT_EQ(w.update(ctx_, o.id, {"plain", i + 1}).generation, 2);
        // A failing write in a group rolls back alone.
        if (i % 8 != 0) continue;
        try {
          w.create(ctx_, {"dup", i}, with_slug("taken"));
        } catch (const Error& e) {
          if (e.value() == errc::already_exists) ++refused;
        }
      }
    });
  for (int t = 0; t < block_threads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i)
        cc_->within(ctx_, [&](const Context& tx) {
          auto tag = std::to_string(t * 100 + i);
          auto a = w.create(tx, {"a", i}, with_slug(tag + "a"));
          w.create(tx, {"b", i}, with_slug(tag + "b"));
          EXPECT_EQ(w.get(tx, a.id).spec.size, i);
        });
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(refused.load(), plain_threads * (rounds / 8));
  auto all = w.list(ctx_);
  EXPECT_EQ(all.size(), 1u + plain_threads * rounds + block_threads * rounds * 2);
  for (auto& o : all) {
    if (o.spec.color == "plain") {
      EXPECT_EQ(o.generation, 2);
    }
  }
}

TEST_F(WithinTest, AWriteOutsideTheBlockFromItsOwnThreadIsRefused) {
  auto w = widgets();
  cc_->within(ctx_, [&](const Context&) {
    EXPECT_ERRC(w.create(ctx_, {"a", 1}), errc::invalid_argument);  // would deadlock
  });
}

// The same for a write that would change nothing (the stored row already says so), which
// skips the writer: refused all the same, rather than pass or fail by the stored data.
// Before, it returned, and the block's own write of another value then committed.
TEST_F(WithinTest, AConvergedWriteOutsideTheBlockFromItsOwnThreadIsRefusedToo) {
  auto w = widgets();
  auto o = w.create(ctx_, {"a", 1}, with_slug("a"), with_finalizers({"f"}));
  cc_->set_condition(ctx_, o.id, {"Ready", ConditionStatus::True});
  cc_->update_status(ctx_, o.id, 1, WidgetStatus{true});
  cc_->add_dependency(ctx_, o.id, o.id);
  cc_->within(ctx_, [&](const Context&) {
    EXPECT_ERRC(w.update(ctx_, o.id, {"a", 1}), errc::invalid_argument);
    EXPECT_ERRC(w.create_or_update(ctx_, "a", {"a", 1}), errc::invalid_argument);
    EXPECT_ERRC(cc_->set_condition(ctx_, o.id, {"Ready", ConditionStatus::True}),
                errc::invalid_argument);
    EXPECT_ERRC(cc_->update_status(ctx_, o.id, 1, WidgetStatus{true}), errc::invalid_argument);
    EXPECT_ERRC(cc_->add_finalizer(ctx_, o.id, "f"), errc::invalid_argument);
    EXPECT_ERRC(cc_->add_dependency(ctx_, o.id, o.id), errc::invalid_argument);
  });
}

TEST_F(WithinTest, ABlockOnOneBeehiveNeitherHoldsUpNorJoinsAnother) {
  Beehive other(open_test_store(dir_.file("other.db")));
  auto their_cc = register_controller<WidgetSpec, WidgetStatus>(
      other, widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets theirs(other, widget_kind);
  auto stop_other = other.start(ctx_);
  auto w = widgets();
  cc_->within(ctx_, [&](const Context& tx) {
    // The other beehive's writer does not wait for this block: a plain write lands.
    theirs.create(ctx_, {"plain", 1}, with_slug("outside"));
    // This block's context carries a transaction the other beehive does not have; it must
    // not run there under a session of the same number.
    EXPECT_ERRC(theirs.create(tx, {"joined", 2}, with_slug("joined")), errc::invalid_argument);
    EXPECT_ERRC(theirs.get_by_slug(tx, "outside"), errc::invalid_argument);
    EXPECT_ERRC(their_cc.within(tx, [](const Context&) {}), errc::invalid_argument);
    w.create(tx, {"mine", 3}, with_slug("mine"));
  });
  EXPECT_EQ(w.get_by_slug(ctx_, "mine").spec.size, 3);
  EXPECT_EQ(theirs.get_by_slug(ctx_, "outside").spec.size, 1);
  EXPECT_ERRC(theirs.get_by_slug(ctx_, "joined"), errc::not_found);
  EXPECT_ERRC(w.get_by_slug(ctx_, "joined"), errc::not_found);
  stop_other(ctx_);
}

TEST_F(WithinTest, AContextUsedAfterItsBlockEndedIsRefused) {
  auto w = widgets();
  Context leaked;
  cc_->within(ctx_, [&](const Context& tx) { leaked = tx; });
  EXPECT_ERRC(w.create(leaked, {"a", 1}), errc::invalid_argument);
}

// A block hands its caller the ids and resource versions of its writes as it goes; rolled
// back, they name nothing, and must never name anything else: neither this writer nor
// another (another process's) hands them out again, so that an id kept outside never
// names another object and a version kept as a precondition never matches another state.
TEST_F(WithinTest, IdsAndVersionsARolledBackBlockHandedOutAreNeverHandedOutAgain) {
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  ObjectID ghost = 0;
  std::int64_t seen = 0;
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             ghost = w.create(tx, {"ghost", 1}).id;
                             seen = w.update(tx, x.id, {"mine", 1}).resource_version;
                             throw std::runtime_error("changed my mind");
                           }),
               std::runtime_error);
  EXPECT_ERRC(w.get(ctx_, ghost), errc::not_found);
  {
    Beehive other(open_test_store(dir_.file("beehive.db"), store_options_));
    Widgets theirs(other, widget_kind);
    EXPECT_GT(theirs.create(ctx_, {"theirs", 1}).id, ghost);
    EXPECT_GT(theirs.update(ctx_, x.id, {"theirs", 2}).resource_version, seen);
  }
  EXPECT_ERRC(w.update(ctx_, x.id, {"mine", 2}, with_resource_version(seen)), errc::conflict);
  EXPECT_EQ(w.get(ctx_, x.id).spec.color, "theirs");
  EXPECT_GT(w.create(ctx_, {"mine", 1}).id, ghost);
}

// The same for a block a stop rolled back (its deadline passed while the block was open):
// the writer that knew what it handed out is gone with the stop.
TEST_F(WithinTest, IdsAndVersionsOfABlockAStopRolledBackAreNeverHandedOutAgain) {
  start();
  auto w = widgets();
  auto x = w.create(ctx_, {"x", 1});
  ObjectID ghost = 0;
  std::int64_t seen = 0;
  std::promise<void> wrote, release;
  std::thread block([&] {
    try {
      cc_->within(ctx_, [&](const Context& tx) {
        ghost = w.create(tx, {"ghost", 1}).id;
        seen = w.update(tx, x.id, {"mine", 1}).resource_version;
        wrote.set_value();
        release.get_future().wait();
      });
    } catch (const Error&) {  // rolled back by the stop
    }
  });
  wrote.get_future().wait();
  EXPECT_ERRC(stop_(Context{}.with_timeout(300ms)), errc::deadline_exceeded);
  stop_ = nullptr;
  release.set_value();
  block.join();
  cc_.reset();
  open();
  auto again = widgets();
  EXPECT_ERRC(again.get(ctx_, ghost), errc::not_found);
  EXPECT_GT(again.create(ctx_, {"after", 1}).id, ghost);
  EXPECT_GT(again.update(ctx_, x.id, {"after", 1}).resource_version, seen);
}

// The same for the first object a store ever had, and for a nested block rolled back
// inside one that commits, across restarts (nothing a writer remembered survives them).
TEST_F(WithinTest, IdsRolledBackBlocksHandedOutStayUsedAcrossARestart) {
  auto restart = [&] {
    cc_.reset();
    open();
    cc_ = std::make_unique<ControllerClient<WidgetStatus>>(register_widgets());
  };
  ObjectID ghost = 0;
  EXPECT_THROW(cc_->within(ctx_,
                           [&](const Context& tx) {
                             ghost = widgets().create(tx, {"ghost", 1}).id;
                             throw std::runtime_error("changed my mind");
                           }),
               std::runtime_error);
  restart();
  EXPECT_GT(widgets().create(ctx_, {"after", 1}).id, ghost);
  // The first id after a restart raises the store's id counter: here, in the nested
  // block that rolls back, inside one that commits.
  restart();
  cc_->within(ctx_, [&](const Context& tx) {
    try {
      cc_->within(tx, [&](const Context& inner) {
        ghost = widgets().create(inner, {"ghost", 2}).id;
        throw std::runtime_error("not this one");
      });
    } catch (const std::runtime_error&) {
    }
  });
  restart();
  EXPECT_GT(widgets().create(ctx_, {"after", 2}).id, ghost);
}

}  // namespace
}  // namespace beehive::test
