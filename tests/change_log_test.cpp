// The change log: every committed change of an object recorded in its transaction,
// watches resumed from a position (with_resume_from, Stream::resource_version), the
// retained horizon (watch_too_old) and the head (watch_too_new), retention trimmed by
// the gc, and other writers' commits (removals included) found through the log.

#include <map>
#include <set>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <caf/scoped_actor.hpp>

#include <beehive/actors.hpp>
#include <beehive/testing.hpp>

#include "beehive_core.hpp"
#include "controller_fixture.hpp"
#include "schema_downgrade.hpp"
#include "store/write_engine.hpp"
#include "store/write_ops.hpp"
#include "support/stepped_clock.hpp"
#include "support/test_store.hpp"
#include "writer_state.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;
using TestBeehive = KitBeehive;  // on the test store: SQLite or PostgreSQL

/// The parts column of every change-log entry, oldest first.
std::vector<unsigned> logged_parts(const std::filesystem::path& file) {
  std::vector<unsigned> out;
  for (auto& row : query_test_store(file, "SELECT parts FROM change_log ORDER BY resource_version"))
    out.push_back(static_cast<unsigned>(std::stoul(row.at(0))));
  return out;
}

std::size_t log_size(const std::filesystem::path& file) {
  return std::stoul(query_test_store(file, "SELECT count(*) FROM change_log").at(0).at(0));
}

Change<WidgetSpec, WidgetStatus> next(Stream<Change<WidgetSpec, WidgetStatus>>& s) {
  auto c = s.next_for(5s);
  if (!c) throw std::runtime_error("no change within 5 s");
  return std::move(*c);
}

/// A controller that keeps a finalizer on objects until their spec says "release".
void register_finalizing(Beehive& bh) {
  register_controller<WidgetSpec, WidgetStatus>(
      bh, widget_kind,
      [](const Context& ctx, ControllerClient<WidgetStatus>& c,
         const Object<WidgetSpec, WidgetStatus>& o) {
        if (o.deletion_requested_at) {
          c.remove_finalizer(ctx, o.id, "keep");
          return Result{};
        }
        c.update_status(ctx, o.id, o.generation, WidgetStatus{true});
        c.set_condition(ctx, o.id, {"Ready", ConditionStatus::True, "Up", ""});
        return Result{};
      });
}

TEST(ChangeLog, EveryKindOfChangeIsLoggedWithWhatChanged) {
  TestBeehive t;
  register_finalizing(t.beehive());
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto o = w.create({}, {"red", 1}, with_finalizers({"keep"}));
  t.settle();  // status, then condition
  w.update({}, o.id, {"blue", 1});
  t.settle();
  w.set_labels({}, o.id, {{"a", "b"}});
  w.remove({}, o.id);
  t.settle();  // finalizer removed, then the object collected
  using P = object_change::Part;
  std::vector<unsigned> expected{P::created, P::status,   P::conditions, P::spec,   P::status,
                                 P::labels,  P::deletion, P::finalizers, P::removed};
  EXPECT_EQ(logged_parts(t.path()), expected);
}

// What a process reads of the log (other processes' commits, a resumed watch's replay):
// each object once, with every part that changed, its earliest and latest version above
// the position, and the object as it stands now (read once, however many entries it
// has). Versions the process wrote itself are left out; the object still comes with its
// latest entry among the rest.
TEST(ChangeLog, AReadOfTheLogFoldsEachObjectOnceWithItsObjectAsItStands) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create({}, {"a", 0});
  std::vector<std::int64_t> versions;
  for (int i = 1; i <= 50; ++i) versions.push_back(w.update({}, a.id, {"a", i}).resource_version);
  auto b = w.create({}, {"b", 0});
  w.set_labels({}, b.id, {{"tier", "gold"}});
  auto last = w.update({}, a.id, {"a", 51});
  auto& backend = t.beehive().core()->backend();
  using P = object_change::Part;

  auto log = backend.reader()->changes_since(a.resource_version, {}, {}, {});
  ASSERT_EQ(log.changes.size(), 2u);
  const auto& cb = log.changes[0];  // in the order of each object's latest change
  EXPECT_EQ(cb.ref.id, b.id);
  EXPECT_EQ(cb.type, ChangeType::Added);
  EXPECT_EQ(cb.parts & (P::created | P::labels), P::created | P::labels);
  ASSERT_TRUE(cb.row.has_value());
  EXPECT_EQ(cb.row->meta.labels, (Labels{{"tier", "gold"}}));
  const auto& ca = log.changes[1];
  EXPECT_EQ(ca.ref.id, a.id);
  EXPECT_EQ(ca.type, ChangeType::Modified);
  EXPECT_EQ(ca.first_version, versions.front());
  EXPECT_EQ(ca.resource_version, last.resource_version);
  ASSERT_TRUE(ca.row.has_value());
  EXPECT_EQ(ca.row->meta.resource_version, last.resource_version);
  EXPECT_NE(ca.row->spec.find("51"), std::string::npos) << ca.row->spec;

  // The process's own latest write left out: a's change is its entries before it, with
  // the object as it stands (its latest write included: it is the current row).
  log = backend.reader()->changes_since(a.resource_version, {}, {}, {last.resource_version});
  ASSERT_EQ(log.changes.size(), 2u);
  EXPECT_EQ(log.changes[1].ref.id, b.id);  // b's change is now the later one
  const auto& own = log.changes[0];
  EXPECT_EQ(own.ref.id, a.id);
  EXPECT_EQ(own.resource_version, versions.back());
  ASSERT_TRUE(own.row.has_value());
  EXPECT_EQ(own.row->meta.resource_version, last.resource_version);
}

// A writer that crashed hands on where it stood in other processes' commits: the next
// one publishes what they committed while no writer looked, rather than starting from
// the log's head and skipping it.
TEST(ChangeLog, AWriterMadeAgainPublishesWhatOthersCommittedWhileNoneLooked) {
  TestBeehive t;  // the other process
  Widgets w(t.beehive(), widget_kind);
  auto before = w.create({}, {"before", 1});
  auto store = open_test_store(t.path());  // this process's open of the database
  auto cursor = std::make_shared<store::ForeignCursor>();
  std::set<ObjectID> published;
  auto engine = [&] {
    store::WriteEngineConfig cfg;
    cfg.writer = store::backend_of(*store).open_writer();
    cfg.clock = std::make_shared<SystemClock>();
    cfg.cursor = cursor;
    cfg.publish = [&](const commit_record& r) {
      for (auto& c : r.changes) published.insert(c.row.meta.id);
    };
    return std::make_unique<store::WriteEngine>(std::move(cfg));
  };
  engine().reset();  // stood at the head, then went
  auto missed = w.create({}, {"while none looked", 1});
  auto next = engine();
  next->publish_foreign_commits();
  EXPECT_EQ(published, std::set<ObjectID>{missed.id}) << "before: " << before.id;
}

TEST(ChangeLog, ARolledBackWriteLeavesNoEntry) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  w.create({}, {"red", 1}, with_slug("a"));
  auto before = log_size(t.path());
  EXPECT_THROW(w.create({}, {"red", 1}, with_slug("a")), Error);             // slug taken
  EXPECT_THROW(w.create({}, {"red", 1}, with_labels({{"-", "x"}})), Error);  // bad label
  EXPECT_EQ(log_size(t.path()), before);
}

TEST(ChangeLog, AResumedWatchReplaysWhatItMissedThenGoesLive) {
  TestBeehive t;
  register_finalizing(t.beehive());
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 1});
  auto b = w.create({}, {"b", 1});
  t.settle();
  std::int64_t position = 0;
  {
    auto watch = w.watch_list({});
    EXPECT_EQ(watch.resource_version(), 0);  // nothing delivered yet
    next(watch);
    EXPECT_EQ(watch.resource_version(), 0);  // half of the snapshot
    next(watch);
    position = watch.resource_version();
    EXPECT_GE(position,
              std::max(w.get({}, a.id).resource_version, w.get({}, b.id).resource_version));
  }
  // Missed while disconnected: a spec change, a create, a removal.
  w.update({}, a.id, {"a", 2});
  auto c = w.create({}, {"c", 1});
  w.remove({}, b.id);
  t.settle();
  auto resumed = w.watch_list({}, with_resume_from(position));
  // At or above the resume point, below every change still to be delivered.
  EXPECT_GE(resumed.resource_version(), position);
  EXPECT_LT(resumed.resource_version(), w.get({}, a.id).resource_version);
  std::map<ObjectID, Change<WidgetSpec, WidgetStatus>> got;
  for (int i = 0; i < 3; ++i) {
    auto ch = next(resumed);
    got[ch.object.id] = ch;
  }
  EXPECT_EQ(got.at(a.id).type, ChangeType::Modified);
  EXPECT_EQ(got.at(a.id).object.spec.size, 2);
  EXPECT_EQ(got.at(c.id).type, ChangeType::Added);
  EXPECT_EQ(got.at(b.id).type, ChangeType::Deleted);
  EXPECT_EQ(got.at(b.id).object.spec.color, "b");  // the final body
  EXPECT_FALSE(resumed.next_for(50ms));
  // Then live.
  w.update({}, c.id, {"c", 2});
  auto live = next(resumed);
  EXPECT_EQ(live.object.id, c.id);
  EXPECT_EQ(live.object.spec.size, 2);
  EXPECT_EQ(resumed.resource_version(), live.object.resource_version);
}

TEST(ChangeLog, ResumingFromAnyPositionMissesNothingAndRepeatsNothing) {
  // A writer creates objects while a reader reads some, remembers its position, drops
  // the stream and resumes: every object arrives exactly once across the two streams.
  for (int round = 0; round < 5; ++round) {
    TestBeehive t;
    Widgets w(t.beehive(), widget_kind);
    constexpr int kObjects = 300;
    auto first = w.watch_list({});
    std::thread writer([&] {
      for (int i = 0; i < kObjects; ++i) w.create({}, {"x", i});
    });
    std::multiset<ObjectID> seen;
    for (int i = 0; i < 40 + round * 30; ++i) seen.insert(next(first).object.id);
    auto position = first.resource_version();
    ASSERT_GT(position, 0);
    first.close();
    auto second = w.watch_list({}, with_resume_from(position));
    while (seen.size() < kObjects) {
      auto c = second.next_for(5s);
      ASSERT_TRUE(c) << "round " << round << ": " << seen.size() << " seen";
      EXPECT_EQ(c->type, ChangeType::Added);
      seen.insert(c->object.id);
    }
    writer.join();
    EXPECT_FALSE(second.next_for(20ms));
    std::set<ObjectID> distinct(seen.begin(), seen.end());
    EXPECT_EQ(distinct.size(), seen.size()) << "an object was delivered twice";
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kObjects));
  }
}

// A resumed watch's replay folds each object's changes: one folded from versions 2 to 4
// counts from 2. Handed out in the order of their latest versions, the reader took an
// object created at 3 while the position stayed at 1, and a resume from there dropped
// that object's removal as one it never had: it kept the object for ever. Handed out
// from the earliest, what a reader holds after any resume is what the store holds.
TEST(ChangeLog, AReaderThatResumesFromItsPositionHoldsWhatTheStoreHolds) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();  // the gc removes what is deleted
  auto y = w.create({}, {"y", 1});
  w.update({}, y.id, {"y", 2});
  auto x = w.create({}, {"x", 1});
  w.update({}, y.id, {"y", 3});
  std::set<ObjectID> held{y.id};  // as of y's creation
  auto apply = [&](const Change<WidgetSpec, WidgetStatus>& c) {
    if (c.type == ChangeType::Deleted)
      held.erase(c.object.id);
    else
      held.insert(c.object.id);
  };
  auto first = w.watch_list({}, with_resume_from(y.resource_version));
  apply(next(first));  // one of the two folds, the other still pending
  auto position = first.resource_version();
  first.close();
  w.remove({}, x.id);
  t.settle();
  ASSERT_EQ(w.list({}).size(), 1u);  // x is gone
  auto marker = w.create({}, {"marker", 1});
  auto second = w.watch_list({}, with_resume_from(position));
  for (bool seen = false; !seen;) {
    auto c = next(second);
    apply(c);
    seen = c.object.id == marker.id;
  }
  std::set<ObjectID> stored;
  for (auto& o : w.list({})) stored.insert(o.id);
  EXPECT_EQ(held, stored);
}

// A stream reads 0 while its snapshot is delivered: a reader that stopped part-way
// holds some of the snapshot's objects, and a replay from 0 would fold away the removal
// of one of them (created and removed above 0). 0 is too old: the reader lists afresh.
TEST(ChangeLog, AResumeFromAPositionReadMidSnapshotIsTooOld) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();  // the gc removes what is deleted
  for (int i = 0; i < 3; ++i) w.create({}, {"w" + std::to_string(i), 1});
  auto first = w.watch_list({});
  auto had = next(first).object.id;
  auto position = first.resource_version();
  first.close();
  ASSERT_EQ(position, 0);  // the snapshot not all delivered
  w.remove({}, had);
  t.settle();
  ASSERT_EQ(w.list({}).size(), 2u);
  auto second = w.watch_list({}, with_resume_from(position));
  EXPECT_FALSE(second.next_for(5s));
  EXPECT_EQ(second.error(), make_error_code(errc::watch_too_old));
  // So is 0 on a store never written to, whose snapshot was empty.
  TestBeehive fresh;
  Widgets none(fresh.beehive(), widget_kind);
  auto empty = none.watch_list({});
  EXPECT_EQ(empty.resource_version(), 0);
  auto again = none.watch_list({}, with_resume_from(empty.resource_version()));
  EXPECT_FALSE(again.next_for(5s));
  EXPECT_EQ(again.error(), make_error_code(errc::watch_too_old));
}

TEST(ChangeLog, OneObjectsWatchResumesToo) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create({}, {"a", 1});
  auto other = w.create({}, {"o", 1});
  auto watch = w.watch({}, a.id);
  next(watch);
  auto position = watch.resource_version();
  watch.close();
  w.update({}, other.id, {"o", 2});
  w.update({}, a.id, {"a", 2});
  auto resumed = w.watch({}, a.id, with_resume_from(position));
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, a.id);
  EXPECT_EQ(c.object.spec.size, 2);
  EXPECT_FALSE(resumed.next_for(50ms));
}

// A stream that ended with changes still undelivered (closed, or its context ended)
// keeps the position below them: a watch resumed from it replays them.
TEST(ChangeLog, APositionReadAfterTheStreamEndedKeepsWhatItDropped) {
  for (bool by_context : {false, true}) {
    TestBeehive t;
    Widgets w(t.beehive(), widget_kind);
    auto [c, cancel] = Context{}.with_cancel();
    w.create({}, {"earlier", 1});  // a position of 0 would be too old
    auto s = w.watch_list(c);
    next(s);  // the snapshot: "earlier"
    auto a = w.create({}, {"a", 1});
    t.settle();  // a's creation is pending in s, undelivered
    auto before = s.resource_version();
    EXPECT_LT(before, a.resource_version);
    if (by_context) {
      cancel();
      EXPECT_FALSE(s.next_for(1s));  // ends, dropping a's creation
    } else {
      s.close();
    }
    EXPECT_EQ(s.resource_version(), before) << (by_context ? "context ended" : "closed");
    w.update({}, a.id, {"a", 2});  // passed on to nobody: the stream ended
    t.settle();
    EXPECT_EQ(s.resource_version(), before);
    auto resumed = w.watch_list({}, with_resume_from(s.resource_version()));
    auto got = resumed.next_for(5s);
    ASSERT_TRUE(got) << "a's creation was lost";
    EXPECT_EQ(got->type, ChangeType::Added);
    EXPECT_EQ(got->object.id, a.id);
  }
}

TEST(ChangeLog, APositionAboveTheHeadIsTooNewAtOnce) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create({}, {"a", 1});
  try {
    w.watch_list({}, with_resume_from(a.resource_version + 1000));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.value(), errc::watch_too_new);
  }
  EXPECT_THROW(w.watch_list({}, with_resume_from(-1)), Error);
  // The head itself is fine: nothing to replay, then live.
  auto at_head = w.watch_list({}, with_resume_from(a.resource_version));
  EXPECT_FALSE(at_head.next_for(20ms));
  w.update({}, a.id, {"a", 2});
  EXPECT_EQ(next(at_head).object.spec.size, 2);
}

// A resumed watch waits for a read connection (to check its position) only as long as
// its context lasts.
TEST(ChangeLog, AResumedWatchWaitsForAReadConnectionOnlyUntilItsDeadline) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create({}, {"a", 1});
  auto& backend = t.beehive().core()->backend();
  std::vector<store::ReaderLease> held;  // every connection of the read pool
  for (;;) {
    auto until = std::chrono::steady_clock::now() + 100ms;
    try {
      held.push_back(backend.reader([until] { return std::chrono::steady_clock::now() < until; }));
    } catch (const Error&) {
      break;
    }
    ASSERT_LT(held.size(), 100u);
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERRC(w.watch_list(Context{}.with_timeout(200ms), with_resume_from(a.resource_version)),
              errc::deadline_exceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  held.clear();
  auto resumed = w.watch_list({}, with_resume_from(a.resource_version));
  w.update({}, a.id, {"a", 2});
  EXPECT_EQ(next(resumed).object.spec.size, 2);
}

TEST(ChangeLog, TheGcTrimsToTheRetentionAndOlderPositionsAreTooOld) {
  TestBeehive t(with_change_log_retention(3, 1min), with_resync_interval(10s));
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 0});
  auto early = a.resource_version;
  for (int i = 1; i <= 6; ++i) w.update({}, a.id, {"a", i});
  t.settle();
  // Young entries are kept whatever their number.
  t.advance(10s);
  EXPECT_EQ(log_size(t.path()), 7u);
  // Past max_age, only the newest 3 stay.
  t.advance(1min);
  EXPECT_EQ(log_size(t.path()), 3u);
  auto too_old = w.watch_list({}, with_resume_from(early));
  EXPECT_FALSE(too_old.next_for(1s));
  EXPECT_TRUE(too_old.done());
  EXPECT_EQ(too_old.error(), make_error_code(errc::watch_too_old));
  // A position inside what is kept still resumes.
  auto head = w.get({}, a.id).resource_version;
  auto ok = w.watch_list({}, with_resume_from(head - 1));
  EXPECT_EQ(next(ok).object.spec.size, 6);
}

// A long resync does not stretch housekeeping: the trim runs every 30 s at most, so
// the log stays within its retention (with a daily resync it grew for a day).
TEST(ChangeLog, ALongResyncStillTrimsTheLogEveryHalfMinute) {
  TestBeehive t(with_change_log_retention(3, 1min), with_resync_interval(24h));
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 0});
  for (int i = 1; i <= 6; ++i) w.update({}, a.id, {"a", i});
  t.settle();
  t.advance(1min);  // the entries now old enough to go
  EXPECT_EQ(log_size(t.path()), 7u);
  t.advance(30s);  // the next housekeeping
  EXPECT_EQ(log_size(t.path()), 3u);
}

// An age bound of centuries (milliseconds::max(), the usual "for ever") with no count
// bound keeps the whole log: `now - max_age` overflowed into an arbitrary time.
// Neither bound (0, 0) keeps the whole log too, as event retention's (0, 0) keeps every
// run: it emptied the log at every trim, so that no watch could resume.
TEST(ChangeLog, AnAgeBoundOfCenturiesOrNoBoundAtAllKeepsEveryEntry) {
  for (auto max_age : {std::chrono::milliseconds::max(), 0ms}) {
    SCOPED_TRACE(max_age.count());
    TestBeehive t(with_change_log_retention(0, max_age), with_resync_interval(10s));
    Widgets w(t.beehive(), widget_kind);
    t.start();
    auto a = w.create({}, {"a", 0});
    for (int i = 1; i <= 6; ++i) w.update({}, a.id, {"a", i});
    t.settle();
    t.advance(24h * 365 * 10);
    t.advance(10s);
    EXPECT_EQ(log_size(t.path()), 7u);
    auto resumed = w.watch_list({}, with_resume_from(a.resource_version));
    EXPECT_EQ(next(resumed).object.spec.size, 6);  // not too old (conflated)
  }
}

TEST(ChangeLog, ASelectorWatchResumedSeesWhatStoppedMatching) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto gold = w.create({}, {"g", 1}, with_labels({{"tier", "gold"}}));
  auto still = w.create({}, {"s", 1}, with_labels({{"tier", "gold"}}));
  auto watch = w.watch_list({}, with_selector("tier=gold"));
  next(watch);
  next(watch);
  auto position = watch.resource_version();
  watch.close();
  w.set_labels({}, gold.id, {{"tier", "lead"}});
  w.update({}, still.id, {"s", 2});
  auto resumed = w.watch_list({}, with_selector("tier=gold"), with_resume_from(position));
  std::map<ObjectID, ChangeType> got;
  for (int i = 0; i < 2; ++i) {
    auto c = next(resumed);
    got[c.object.id] = c.type;
  }
  EXPECT_EQ(got.at(gold.id), ChangeType::Deleted);
  EXPECT_EQ(got.at(still.id), ChangeType::Modified);
  // Live after the resume: `still` stops matching too, though the resume did not list it.
  w.set_labels({}, still.id, {});
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, still.id);
  EXPECT_EQ(c.type, ChangeType::Deleted);
}

// An object that stopped matching and was then removed, both after the position: the
// resumed watch hears of its removal (its final labels no longer match, but it held it).
TEST(ChangeLog, ASelectorWatchResumedHearsOfWhatStoppedMatchingAndWasRemoved) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto gold = w.create({}, {"g", 1}, with_labels({{"tier", "gold"}}));
  auto watch = w.watch_list({}, with_selector("tier=gold"));
  next(watch);
  auto position = watch.resource_version();
  watch.close();
  w.set_labels({}, gold.id, {{"tier", "lead"}});
  w.remove({}, gold.id);
  t.settle();  // collected
  ASSERT_THROW(w.get({}, gold.id), Error);
  auto resumed = w.watch_list({}, with_selector("tier=gold"), with_resume_from(position));
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, gold.id);
  EXPECT_EQ(c.type, ChangeType::Deleted);
}

// A resumed selector watch cannot know whether the reader has an object that existed at
// the resume point and whose labels then changed: the first change of such an object
// that does not match reaches the reader as Deleted. Once it has, the watch knows the
// reader does not have the object, and its later label changes are none of its business.
TEST(ChangeLog, AResumedSelectorWatchTellsOfAnObjectThatNeverMatchedAtMostOnce) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto gold = w.create({}, {"g", 1}, with_labels({{"tier", "gold"}}));
  auto other = w.create({}, {"o", 1}, with_labels({{"tier", "silver"}}));
  auto watch = w.watch_list({}, with_selector("tier=gold"));
  EXPECT_EQ(next(watch).object.id, gold.id);
  auto position = watch.resource_version();
  watch.close();
  auto resumed = w.watch_list({}, with_selector("tier=gold"), with_resume_from(position));
  w.set_labels({}, other.id, {{"tier", "bronze"}});
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, other.id);
  EXPECT_EQ(c.type, ChangeType::Deleted);
  w.set_labels({}, other.id, {{"tier", "iron"}});
  w.set_labels({}, other.id, {{"tier", "tin"}});
  w.remove({}, other.id);
  auto marker = w.create({}, {"m", 1}, with_labels({{"tier", "gold"}}));
  c = next(resumed);
  EXPECT_EQ(c.object.id, marker.id);
  EXPECT_EQ(c.type, ChangeType::Added);
  // It remembers the other way too: once it matches, it is the reader's.
  w.set_labels({}, marker.id, {{"tier", "gold"}, {"x", "1"}});
  c = next(resumed);
  EXPECT_EQ(c.object.id, marker.id);
  EXPECT_EQ(c.type, ChangeType::Modified);
}

// A selector of only whitespace selects everything, as no selector does: a resumed watch
// tells of a relabelled object the reader has as Modified, not as one it may lack.
TEST(ChangeLog, AResumedWatchWithAWhitespaceSelectorIsOneWithout) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  auto a = w.create({}, {"a", 1}, with_labels({{"tier", "gold"}}));
  auto watch = w.watch_list({}, with_selector("  "));
  EXPECT_EQ(next(watch).object.id, a.id);
  auto position = watch.resource_version();
  watch.close();
  auto resumed = w.watch_list({}, with_selector(" "), with_resume_from(position));
  w.set_labels({}, a.id, {{"tier", "lead"}});
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, a.id);
  EXPECT_EQ(c.type, ChangeType::Modified);
}

// A resumed selector watch that told the reader of an object as Added without knowing
// whether the reader had it already (it existed at the resume point and its labels
// changed) must still tell of its removal, even when the reader reads both at once.
TEST(ChangeLog, AResumedSelectorWatchKeepsTheRemovalOfAnObjectTheReaderMayHave) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto gold = w.create({}, {"g", 1}, with_labels({{"tier", "gold"}}));
  auto watch = w.watch_list({}, with_selector("tier=gold"));
  next(watch);
  auto position = watch.resource_version();
  watch.close();
  auto resumed = w.watch_list({}, with_selector("tier=gold"), with_resume_from(position));
  w.set_labels({}, gold.id, {{"tier", "gold"}, {"x", "1"}});
  w.remove({}, gold.id);
  t.settle();  // collected
  ASSERT_THROW(w.get({}, gold.id), Error);
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, gold.id);
  EXPECT_EQ(c.type, ChangeType::Deleted);
}

/// Another writer on the same file (a second Store in this process, which SQLite treats
/// like another process): its removal reaches this beehive's watches with the final
/// body, through the change log.
TEST(ChangeLog, AnotherWritersRemovalReachesWatches) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 1});
  auto watch = w.watch_list({});
  next(watch);
  {
    Beehive other(open_test_store(t.path()));
    Widgets theirs(other, widget_kind);
    theirs.update({}, a.id, {"a", 2});
    theirs.remove({}, a.id);
    // On PostgreSQL collecting is the leader's: t's gc, woken by the removal (the
    // other beehive, not started, leads nothing). On SQLite the other one collects.
    if (!test_backend_is_postgres()) {
      caf::scoped_actor self{actor_system_of(other)};
      int removed = 0;
      self->request(other.store_writer(), 10s, collect_request{})
          .receive([&](int n) { removed = n; }, [](caf::error&) {});
      ASSERT_EQ(removed, 1);
    }
  }
  // Conflated or not, the last word is the removal with the final body.
  Change<WidgetSpec, WidgetStatus> c;
  do c = next(watch);
  while (c.type != ChangeType::Deleted);
  EXPECT_EQ(c.object.id, a.id);
  EXPECT_EQ(c.object.spec.size, 2);
}

/// Another writer commits, and this process writes right after, before it has read the
/// other's commit: the earlier commit still reaches the watch first. A position the
/// watch gives is never above a change it has yet to deliver (resumed from it, that
/// change would be skipped).
TEST(ChangeLog, AnotherWritersEarlierCommitReachesTheWatchBeforeALaterOneOfOurs) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 0});
  auto b = w.create({}, {"b", 0});
  auto watch = w.watch_list({});
  next(watch);
  next(watch);
  Beehive other(open_test_store(t.path()));
  Widgets theirs(other, widget_kind);
  std::map<ObjectID, std::int64_t> delivered;
  for (int i = 1; i <= 20; ++i) {
    SCOPED_TRACE(i);
    auto earlier = theirs.update({}, a.id, {"a", i});
    auto later = w.update({}, b.id, {"b", i});
    while (delivered[a.id] < earlier.resource_version || delivered[b.id] < later.resource_version) {
      auto c = next(watch);
      delivered[c.object.id] = c.object.resource_version;
      auto position = watch.resource_version();
      EXPECT_FALSE(position >= earlier.resource_version &&
                   delivered[a.id] < earlier.resource_version)
          << "position " << position << " passed the other writer's change at "
          << earlier.resource_version << ", not delivered yet";
    }
  }
}

// Another process creates an object, a watch opens here (its snapshot holds the object),
// and the other process changes it again before this process has read the log: the two
// commits reach this process folded into one. To the watch, which had the object from
// its snapshot, that is a modification, never a second `Added`. (Whether this process
// reads the log between the two commits is up to its poll: several rounds.)
TEST(ChangeLog, AnotherProcesssCreationFoldedWithALaterChangeIsNotAddedTwice) {
  TestBeehive t;
  Widgets w(t.beehive(), widget_kind);
  t.start();
  Beehive other(open_test_store(t.path()));
  Widgets theirs(other, widget_kind);
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(round);
    auto made = theirs.create({}, {"made", round});
    auto watch = w.watch_list({});
    auto changed = theirs.update({}, made.id, {"changed", round});
    std::map<ObjectID, int> added;
    for (;;) {
      auto c = next(watch);
      if (c.type == ChangeType::Added) ++added[c.object.id];
      if (c.object.id == made.id && c.object.resource_version >= changed.resource_version) break;
    }
    EXPECT_EQ(added[made.id], 1) << "the object was Added " << added[made.id] << " times";
  }
}

// The gc trims only what its process has read of the log: another writer's change that
// the process has not published yet stays until it has, and reaches the watches; they
// do not end for it.
TEST(ChangeLog, TheGcNeverTrimsAnotherWritersChangeBeforeTheWatchesHaveIt) {
  TestBeehive t(with_change_log_retention(0, 1ms), with_resync_interval(10s));
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 1});
  auto watch = w.watch_list({});
  next(watch);
  // Its entries are old by t's clock: the next trim takes them.
  Beehive other(open_test_store(t.path()),
                with_clock(std::make_shared<ManualClock>(Time{} + std::chrono::hours(24))));
  Widgets(other, widget_kind).update({}, a.id, {"a", 2});
  t.advance(10s);  // the gc trims now, before or after t has read the update
  auto c = next(watch);
  EXPECT_EQ(c.object.id, a.id);
  EXPECT_EQ(c.object.spec.size, 2);
  EXPECT_FALSE(watch.done()) << watch.error().message();
}

TEST(ChangeLog, AnUpgradedDatabaseStartsItsLogAtTheUpgrade) {
  REQUIRE_SQLITE("downgrades a SQLite file to schema 6");
  TempDir dir;
  auto file = dir.file("v6.db");
  ObjectID id;
  std::int64_t rv;
  {
    Beehive bh(sqlite::open(file));
    auto o = Widgets(bh, widget_kind).create({}, {"a", 1});
    id = o.id;
    rv = o.resource_version;
  }
  {  // back to schema 6
    SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
    downgrade_schema(db, 6);
  }
  Beehive bh(sqlite::open(file));
  Widgets w(bh, widget_kind);
  EXPECT_TRUE(w.get({}, id).labels.empty());
  auto before = w.watch_list({}, with_resume_from(rv - 1));
  EXPECT_FALSE(before.next_for(1s));
  EXPECT_EQ(before.error(), make_error_code(errc::watch_too_old));
  auto from_upgrade = w.watch_list({}, with_resume_from(rv));
  w.set_labels({}, id, {{"a", "b"}});
  EXPECT_EQ(next(from_upgrade).object.labels, (Labels{{"a", "b"}}));
}

TEST(ChangeLog, AnActorResumesAndIsToldWhenItsPositionIsGone) {
  TestBeehive t(with_change_log_retention(1, 0ms), with_resync_interval(10s));
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 1});
  auto early = a.resource_version;
  w.update({}, a.id, {"a", 2});
  caf::scoped_actor self{actor_system_of(t.beehive())};
  auto subscribe = [&](std::int64_t from) {
    watch_request req{widget_kind, std::nullopt, caf::actor_cast<caf::actor>(self)};
    req.resume_from = from;
    std::uint64_t sub = 0;
    self->request(t.beehive().watch_hub(), 10s, req)
        .receive([&](std::uint64_t id) { sub = id; }, [](caf::error&) {});
    return sub;
  };
  // Still in the log: the update arrives.
  subscribe(early);
  self->receive([&](const object_change& c) { EXPECT_EQ(c.row.meta.id, a.id); },
                caf::after(5s) >> [] { ADD_FAILURE() << "no replay"; });
  // Trimmed to the newest entry (the change right after `early` goes): the subscription
  // ends at once.
  w.update({}, a.id, {"a", 3});
  self->receive([](const object_change&) {}, caf::after(5s) >> [] { ADD_FAILURE(); });
  t.advance(10s);
  auto sub = subscribe(early);
  std::optional<watch_ended> ended;
  self->receive([&](const watch_ended& e) { ended = e; }, caf::after(5s) >> [] {});
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->subscription, sub);
  EXPECT_EQ(ended->reason, errc::watch_too_old);  // not a stop: subscribe afresh
  // Pulled, the same: told why, and its pulls find no subscription.
  watch_request pulled{widget_kind, std::nullopt, caf::actor_cast<caf::actor>(self), true};
  pulled.resume_from = early;
  std::uint64_t pulled_sub = 0;
  self->request(t.beehive().watch_hub(), 10s, pulled)
      .receive([&](std::uint64_t id) { pulled_sub = id; }, [](caf::error&) {});
  ended.reset();
  self->receive([&](const watch_ended& e) { ended = e; }, caf::after(5s) >> [] {});
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->subscription, pulled_sub);
  EXPECT_EQ(ended->reason, errc::watch_too_old);
  std::optional<errc> pulled_error;
  self->request(t.beehive().watch_hub(), 10s, pull_atom::value, pulled_sub)
      .receive([](const std::vector<object_change>&) {},
               [&](caf::error& e) { pulled_error = to_errc(e); });
  EXPECT_EQ(pulled_error, errc::not_found);
}

// The store's version is kept in the log's newest entry as much as in its counter: a
// trim that empties the log must not move it back, nor must events (not logged).
TEST(ChangeLog, VersionsNeverGoBackWhateverTheLogHolds) {
  TestBeehive t(with_change_log_retention(0, 1ms), with_resync_interval(10s));
  Widgets w(t.beehive(), widget_kind);
  register_controller<WidgetSpec, WidgetStatus>(
      t.beehive(), widget_kind,
      [](const Context& ctx, ControllerClient<WidgetStatus>& c,
         const Object<WidgetSpec, WidgetStatus>& o) {
        c.record_event(ctx, o.id, {"probe", EventType::Normal, "Seen", "", {}});
        return Result{};
      });
  t.start();
  auto a = w.create({}, {"a", 1});
  t.settle();  // the pass recorded an event: a version above the create's
  ASSERT_EQ(w.list_events({}, a.id).size(), 1u);
  auto head = w.watch_list({});
  next(head);
  auto position = head.resource_version();
  EXPECT_GT(position, a.resource_version);  // the event's version
  head.close();
  t.advance(10s);  // the gc trims everything
  EXPECT_EQ(log_size(t.path()), 0u);
  // The old head is still the head: resuming there is neither too new nor too old.
  auto resumed = w.watch_list({}, with_resume_from(position));
  auto b = w.create({}, {"b", 1});
  EXPECT_GT(b.resource_version, position);
  ASSERT_FALSE(resumed.done()) << resumed.error().message();
  auto c = next(resumed);
  EXPECT_EQ(c.object.id, b.id);
}

/// Trims the change log through the store_writer, as the gc does; the entries removed.
int trim(Beehive& bh, trim_change_log_request r) {
  caf::scoped_actor self{actor_system_of(bh)};
  int removed = -1;
  self->request(bh.store_writer(), 10s, r)
      .receive([&](int n) { removed = n; },
               [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  return removed;
}

/// A beehive on `file` whose wall clock the test steps, back as well as forward.
struct SteppedBeehive {
  /// Starts with its clock stepped by `step`.
  explicit SteppedBeehive(const std::filesystem::path& file, std::chrono::milliseconds step = {})
      : store(open_test_store(file)), bh(store, with_clock(clock)) {
    clock->step(step);
    stop = bh.start(Context{});  // trimming is the leader's (PostgreSQL)
  }
  ~SteppedBeehive() { stop(Context{}); }
  std::shared_ptr<SteppedClock> clock = std::make_shared<SteppedClock>();
  std::shared_ptr<Store> store;
  Beehive bh;
  Stop stop;
};

// A trim request with neither bound (the default one, or an application's retention of
// (0, 0) sent as is) keeps the whole log, as with_change_log_retention(0, 0) does: it
// emptied the log, ending every later resume with watch_too_old.
TEST(ChangeLog, ATrimRequestWithNeitherBoundRemovesNothing) {
  TempDir dir;
  SteppedBeehive s(dir.file("beehive.db"));
  Widgets w(s.bh, widget_kind);
  auto first = w.create({}, {"first", 0});
  for (const char* color : {"b", "c", "d"}) w.create({}, {color, 0});
  s.clock->step(1h);
  EXPECT_EQ(trim(s.bh, {}), 0);
  EXPECT_EQ(trim(s.bh, {0, -1ms}), 0);
  EXPECT_EQ(log_size(dir.file("beehive.db")), 4u);
  auto resumed = w.watch_list({}, with_resume_from(first.resource_version));
  EXPECT_EQ(next(resumed).object.spec.color, "b");
  EXPECT_EQ(trim(s.bh, {2, 0ms}), 2);  // one bound: the count alone
}

// A clock stepped back by more than the age bound: the entries it left in the future
// do not hold the ones logged after them once those are old (the log is cut as a
// prefix, so one young entry would keep everything behind it until the clock caught up).
TEST(ChangeLog, AClockSteppedBackFurtherThanTheAgeBoundDoesNotHoldLaterEntries) {
  TempDir dir;
  SteppedBeehive s(dir.file("beehive.db"));
  Widgets w(s.bh, widget_kind);
  auto a = w.create({}, {"a", 0});
  for (int i = 1; i < 4; ++i) w.update({}, a.id, {"a", i});
  s.clock->step(-24h);
  for (int i = 4; i < 10; ++i) w.update({}, a.id, {"a", i});
  s.clock->step(30s);
  EXPECT_EQ(trim(s.bh, {0, 1min}), 0);  // nothing is a minute old yet
  s.clock->step(1min);
  EXPECT_EQ(trim(s.bh, {0, 1min}), 10);
  EXPECT_EQ(log_size(dir.file("beehive.db")), 0u);
}

// The same when the clock stepped back while no process ran.
TEST(ChangeLog, AClockSteppedBackBetweenRunsDoesNotHoldLaterEntries) {
  TempDir dir;
  ObjectID id;
  {
    SteppedBeehive s(dir.file("beehive.db"));
    Widgets w(s.bh, widget_kind);
    id = w.create({}, {"a", 0}).id;
    for (int i = 1; i < 4; ++i) w.update({}, id, {"a", i});
  }
  SteppedBeehive s(dir.file("beehive.db"), -24h);
  Widgets w(s.bh, widget_kind);
  for (int i = 4; i < 10; ++i) w.update({}, id, {"a", i});
  s.clock->step(2min);
  EXPECT_EQ(trim(s.bh, {0, 1min}), 10);
}

// Entries ahead of the trimming process's clock that its own writes never saw (another
// writer, here a tool whose clock stepped back first, wrote after them): once a trim
// reaches them, they count as logged at that trim.
TEST(ChangeLog, EntriesAheadOfTheClockThatOnlyAnotherWriterSawDoNotHoldLaterOnes) {
  TempDir dir;
  auto file = dir.file("beehive.db");
  ObjectID id;
  {
    SteppedBeehive s(file);
    Widgets w(s.bh, widget_kind);
    id = w.create({}, {"a", 0}).id;
    for (int i = 1; i < 4; ++i) w.update({}, id, {"a", i});
  }
  {
    auto clock = std::make_shared<SteppedClock>();
    clock->step(-24h);
    Beehive tool(open_test_store(file), with_clock(clock));  // never started
    Widgets(tool, widget_kind).update({}, id, {"a", 4});
  }
  SteppedBeehive s(file, -24h);
  Widgets w(s.bh, widget_kind);
  for (int i = 5; i < 10; ++i) w.update({}, id, {"a", i});
  s.clock->step(2min);
  // The gc's trim at start or this one finds the four ahead: counted as logged then.
  int removed = trim(s.bh, {0, 1min});
  s.clock->step(2min);
  removed += trim(s.bh, {0, 1min});
  EXPECT_EQ(removed, 10);
  EXPECT_EQ(log_size(file), 0u);
}

// A quiet watch's position follows the other kinds' commits: resumed once the log was
// trimmed past where it opened, it is not too old, and misses nothing.
TEST(ChangeLog, AQuietWatchsPositionFollowsTheStoresCommits) {
  TestBeehive t(with_change_log_retention(3, 1min));
  Widgets w(t.beehive(), widget_kind);
  Widgets busy_kind(t.beehive(), GroupKind{"other.example", "Gadget"});
  t.start();
  auto quiet = w.create({}, {"q", 1});
  auto watch = w.watch({}, quiet.id);
  next(watch);
  auto busy = busy_kind.create({}, {"b", 0});
  for (int i = 1; i <= 10; ++i) busy_kind.update({}, busy.id, {"b", i});
  t.settle();
  auto head = busy_kind.get({}, busy.id).resource_version;
  EXPECT_EQ(watch.resource_version(), head);
  auto position = watch.resource_version();
  watch.close();
  t.advance(2min);  // the gc trims the log to its newest 3 entries
  auto resumed = w.watch({}, quiet.id, with_resume_from(position));
  EXPECT_FALSE(resumed.next_for(50ms));
  EXPECT_FALSE(resumed.done());
  w.update({}, quiet.id, {"q", 2});
  EXPECT_EQ(next(resumed).object.spec.size, 2);
}

// The same for commits that only write the log (a requeue through it: here from another
// beehive on the file, which has not started, and from this one before it starts): they
// change nothing the watch shows, and its position moves past them all the same.
TEST(ChangeLog, AQuietWatchsPositionFollowsCommitsThatOnlyWriteTheLog) {
  auto noop = [](auto&, auto&, auto&) { return Result{}; };
  TestBeehive t;
  register_controller<WidgetSpec, WidgetStatus>(t.beehive(), widget_kind, noop);
  Widgets w(t.beehive(), widget_kind);
  auto quiet = w.create({}, {"q", 1});
  auto other = w.create({}, {"o", 1});
  auto watch = w.watch({}, quiet.id);
  next(watch);
  w.requeue({}, other.id);  // not started: through the log
  t.settle();
  auto own = watch.resource_version();
  EXPECT_GT(own, other.resource_version);
  t.start();
  Beehive client_only(open_test_store(t.path()));
  register_controller<WidgetSpec, WidgetStatus>(client_only, widget_kind, noop);
  // Another process's, say: a label change and a requeue of one object, which a read of
  // the log folds into one entry (at the requeue's version, with the labelled row).
  Widgets theirs(client_only, widget_kind);
  auto labeled = theirs.set_labels({}, other.id, {{"tier", "web"}});
  theirs.requeue({}, other.id);
  EXPECT_GT(labeled.resource_version, own);
  EXPECT_TRUE(eventually([&] { return watch.resource_version() > labeled.resource_version; }));
  EXPECT_FALSE(watch.next_for(0ms));
}

/// Lowers the entries one change-log trim removes per transaction, for a test's length.
class TrimPage {
 public:
  explicit TrimPage(std::int64_t entries) : was_(store::change_log_trim_page.exchange(entries)) {}
  ~TrimPage() { store::change_log_trim_page = was_; }

 private:
  std::int64_t was_;
};

// A trim with much to remove commits it a page at a time (another process's writes wait
// behind a page, not behind the whole trim), and removes what one transaction would.
TEST(ChangeLog, ATrimWithMuchToRemoveCommitsPageByPage) {
  TrimPage small(4);
  TempDir dir;
  SteppedBeehive s(dir.file("beehive.db"));
  Widgets w(s.bh, widget_kind);
  auto a = w.create({}, {"a", 0});
  for (int i = 1; i < 10; ++i) w.update({}, a.id, {"a", i});
  s.clock->step(2min);
  auto young = w.create({}, {"young", 0});
  auto before = writer_transactions(s.bh);
  EXPECT_EQ(trim(s.bh, {0, 1min}), 10);
  EXPECT_GE(writer_transactions(s.bh) - before, 3u);  // 4, 4 and 2 entries
  EXPECT_EQ(log_size(dir.file("beehive.db")), 1u);
  // The horizon moved with the last page: a resume from before it is too old.
  auto too_old = w.watch_list({}, with_resume_from(a.resource_version));
  EXPECT_FALSE(too_old.next_for(5s));
  EXPECT_EQ(too_old.error(), make_error_code(errc::watch_too_old));
  auto resumed = w.watch_list({}, with_resume_from(young.resource_version - 1));
  EXPECT_EQ(resumed.next_for(5s)->object.id, young.id);
}

// Idle stays idle: old entries the count bound keeps are looked at on every gc cadence,
// and no write transaction is taken for them.
TEST(ChangeLog, ATrimWithNothingToRemoveWritesNothing) {
  TestBeehive t(with_change_log_retention(10, 1min), with_resync_interval(10s));
  Widgets w(t.beehive(), widget_kind);
  t.start();
  auto a = w.create({}, {"a", 0});
  for (int i = 1; i < 5; ++i) w.update({}, a.id, {"a", i});
  t.settle();
  auto before = writer_transactions(t.beehive());
  for (int i = 0; i < 10; ++i) t.advance(10s);  // far past max_age: only the count keeps them
  EXPECT_EQ(writer_transactions(t.beehive()), before);
  EXPECT_EQ(log_size(t.path()), 5u);
}

}  // namespace
}  // namespace beehive::test
