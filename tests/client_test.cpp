// The Client's object writes and reads: the reference's "Writes" rules.

#include <future>
#include <thread>

#include "fixture.hpp"

namespace beehive::test {
namespace {

using namespace std::chrono_literals;

class ClientTest : public BeehiveTest {};

TEST_F(ClientTest, CreateStoresSpecAndMetadata) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"red", 3});
  EXPECT_GT(o.id, 0);
  EXPECT_EQ(o.group, "acme.com");
  EXPECT_EQ(o.kind, "Widget");
  EXPECT_FALSE(o.slug.has_value());
  EXPECT_EQ(o.spec, (WidgetSpec{"red", 3}));
  EXPECT_FALSE(o.status.has_value());
  EXPECT_EQ(o.generation, 1);
  EXPECT_FALSE(o.observed_generation.has_value());
  EXPECT_FALSE(o.deletion_requested_at.has_value());
  EXPECT_GT(o.resource_version, 0);
  EXPECT_EQ(o.created_at, o.updated_at);

  auto got = w.get(ctx_, o.id);
  EXPECT_EQ(got.spec, o.spec);
  EXPECT_EQ(got.resource_version, o.resource_version);
  EXPECT_EQ(got.created_at, o.created_at);
}

TEST_F(ClientTest, CreateWithSlugAndFinalizers) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"blue", 1}, with_slug("w1"), with_finalizers({"acme.com/cleanup"}));
  EXPECT_EQ(o.slug, "w1");
  EXPECT_EQ(o.finalizers, std::vector<std::string>{"acme.com/cleanup"});
  auto got = w.get_by_slug(ctx_, "w1");
  EXPECT_EQ(got.id, o.id);
  EXPECT_EQ(got.finalizers, o.finalizers);
}

// A read of one object, or of an owner's objects, takes load options only: a selector
// or a resume position there would be ignored, so it does not compile.
template <class Opt>
concept GetTakes = requires(const Widgets& w, const Context& ctx, const Opt& o) {
  w.get(ctx, ObjectID{1}, o);
  w.get_by_slug(ctx, "s", o);
  w.list_owned_objects(ctx, ObjectID{1}, o);
};
static_assert(GetTakes<LoadOption>);
static_assert(!GetTakes<ReadOption>);

// A change carries no relations: a watch takes read options only.
template <class Opt>
concept WatchTakes = requires(const Widgets& w, const Context& ctx, const Opt& o) {
  w.watch(ctx, ObjectID{1}, o);
  w.watch_list(ctx, o);
};
static_assert(WatchTakes<ReadOption>);
static_assert(!WatchTakes<LoadOption>);

// A resume position is a watch's: a list refuses it rather than ignore it.
TEST_F(ClientTest, AListRefusesAResumePosition) {
  Widgets w(bh(), widget_kind);
  w.create(ctx_, {"a", 1});
  EXPECT_ERRC_WITH(w.list(ctx_, with_resume_from(1)), errc::invalid_argument, "with_resume_from");
  EXPECT_ERRC_WITH(w.list_page(ctx_, 10, "", with_resume_from(1)), errc::invalid_argument,
                   "with_resume_from");
  EXPECT_EQ(w.list(ctx_, with_selector(""), load_owner()).size(), 1u);
}

// create builds the object it returns rather than reading it back: it must be what the
// store holds, field by field.
TEST_F(ClientTest, CreateReturnsWhatTheStoreHolds) {
  Widgets w(bh(), widget_kind);
  auto owner = w.create(ctx_, {"owner", 1});
  auto o = w.create(ctx_, {"blue", 7}, with_slug("w2"), with_finalizers({"a/x", "b/y"}),
                    with_owner(owner.id));
  auto got = w.get(ctx_, o.id, load_owner());
  EXPECT_EQ(o.id, got.id);
  EXPECT_EQ(o.group, got.group);
  EXPECT_EQ(o.kind, got.kind);
  EXPECT_EQ(o.slug, got.slug);
  EXPECT_EQ(o.spec, got.spec);
  EXPECT_FALSE(o.status.has_value());
  EXPECT_FALSE(got.status.has_value());
  EXPECT_EQ(o.generation, got.generation);
  EXPECT_EQ(o.observed_generation, got.observed_generation);
  EXPECT_EQ(o.observed_at, got.observed_at);
  EXPECT_EQ(o.resource_version, got.resource_version);
  EXPECT_EQ(o.deletion_requested_at, got.deletion_requested_at);
  EXPECT_EQ(o.finalizers, got.finalizers);
  EXPECT_TRUE(o.conditions.empty());
  EXPECT_TRUE(got.conditions.empty());
  EXPECT_EQ(o.created_at, got.created_at);
  EXPECT_EQ(o.updated_at, got.updated_at);
  EXPECT_EQ(got.get_owner(), (Ref{owner.id, widget_kind.group, widget_kind.kind}));
}

TEST_F(ClientTest, NullSlugsNeverCollideButEmptySlugIsAValue) {
  Widgets w(bh(), widget_kind);
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 2});
  EXPECT_NE(a.id, b.id);
  auto e = w.create(ctx_, {"e", 3}, with_slug(""));
  EXPECT_EQ(e.slug, "");
  EXPECT_ERRC(w.create(ctx_, {"e2", 3}, with_slug("")), errc::already_exists);
  EXPECT_EQ(w.get_by_slug(ctx_, "").id, e.id);
  // An empty view without data names the same slug (SQLite would bind it as NULL).
  EXPECT_EQ(w.get_by_slug(ctx_, std::string_view{}).id, e.id);
  EXPECT_EQ(w.create_or_update(ctx_, std::string_view{}, {"e", 3}).id, e.id);
  auto [same, created] = w.get_or_create(ctx_, "", {"other", 9});
  EXPECT_FALSE(created);
  EXPECT_EQ(same.id, e.id);
  EXPECT_EQ(w.list(ctx_).size(), 3u);
}

TEST_F(ClientTest, TakenSlugIsAlreadyExistsAndWritesNothing) {
  Widgets w(bh(), widget_kind);
  auto first = w.create(ctx_, {"red", 1}, with_slug("dup"));
  EXPECT_ERRC(w.create(ctx_, {"blue", 2}, with_slug("dup")), errc::already_exists);
  auto all = w.list(ctx_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].spec, first.spec);
  EXPECT_EQ(all[0].resource_version, first.resource_version);
}

TEST_F(ClientTest, DeletionPendingRowStillHoldsItsSlug) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"red", 1}, with_slug("held"), with_finalizers({"f"}));
  w.remove(ctx_, o.id);
  EXPECT_ERRC(w.create(ctx_, {"blue", 2}, with_slug("held")), errc::already_exists);
  auto [got, created] = w.get_or_create(ctx_, "held", {"blue", 2});
  EXPECT_FALSE(created);
  EXPECT_EQ(got.id, o.id);
  EXPECT_TRUE(got.deletion_requested_at.has_value());
  EXPECT_EQ(got.spec, (WidgetSpec{"red", 1}));  // returned as it is, not resurrected
}

TEST_F(ClientTest, SlugsAreScopedByKind) {
  Widgets w(bh(), widget_kind);
  Widgets g(bh(), gadget_kind);
  auto a = w.create(ctx_, {"w", 1}, with_slug("same"));
  auto b = g.create(ctx_, {"g", 1}, with_slug("same"));
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(w.get_by_slug(ctx_, "same").spec.color, "w");
  EXPECT_EQ(g.get_by_slug(ctx_, "same").spec.color, "g");
  Widgets other_group(bh(), {"other.org", "Widget"});
  EXPECT_ERRC(other_group.get_by_slug(ctx_, "same"), errc::not_found);
}

TEST_F(ClientTest, IdsAreKindScoped) {
  Widgets w(bh(), widget_kind);
  Widgets g(bh(), gadget_kind);
  auto gadget = g.create(ctx_, {"g", 1}, with_slug("g1"));
  EXPECT_ERRC(w.get(ctx_, gadget.id), errc::not_found);
  EXPECT_ERRC(w.update(ctx_, gadget.id, {"x", 2}), errc::not_found);
  EXPECT_ERRC(w.remove(ctx_, gadget.id), errc::not_found);
  EXPECT_ERRC(w.get(ctx_, 999999), errc::not_found);
  EXPECT_EQ(g.get(ctx_, gadget.id).spec.color, "g");  // untouched
  EXPECT_FALSE(g.get(ctx_, gadget.id).deletion_requested_at.has_value());
  w.remove_by_slug(ctx_, "g1");  // another kind's slug: not found, which is success
  EXPECT_FALSE(g.get(ctx_, gadget.id).deletion_requested_at.has_value());
}

TEST_F(ClientTest, UpdateBumpsGenerationOnlyOnRealChange) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"red", 1});
  auto same = w.update(ctx_, o.id, {"red", 1});
  EXPECT_EQ(same.generation, 1);
  EXPECT_EQ(same.resource_version, o.resource_version);
  EXPECT_EQ(same.updated_at, o.updated_at);
  auto changed = w.update(ctx_, o.id, {"red", 2});
  EXPECT_EQ(changed.generation, 2);
  EXPECT_GT(changed.resource_version, o.resource_version);
  auto stored = w.get(ctx_, o.id);  // the returned object is what the store holds
  EXPECT_EQ(stored.spec.size, 2);
  EXPECT_EQ(stored.generation, changed.generation);
  EXPECT_EQ(stored.resource_version, changed.resource_version);
  EXPECT_EQ(stored.updated_at, changed.updated_at);
  EXPECT_EQ(stored.created_at, changed.created_at);
  auto again = w.update(ctx_, o.id, {"red", 2});
  EXPECT_EQ(again.generation, 2);
  EXPECT_EQ(again.resource_version, changed.resource_version);
}

TEST_F(ClientTest, ResourceVersionIsGlobalAndStrictlyIncreasing) {
  Widgets w(bh(), widget_kind);
  Widgets g(bh(), gadget_kind);
  std::int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto a = w.create(ctx_, {"w", i});
    EXPECT_GT(a.resource_version, last);
    auto b = g.create(ctx_, {"g", i});
    EXPECT_GT(b.resource_version, a.resource_version);
    auto c = w.update(ctx_, a.id, {"w", i + 100});
    EXPECT_GT(c.resource_version, b.resource_version);
    last = c.resource_version;
  }
}

TEST_F(ClientTest, CreateOrUpdateCreatesThenUpdates) {
  Widgets w(bh(), widget_kind);
  auto a = w.create_or_update(ctx_, "cu", {"red", 1});
  EXPECT_EQ(a.slug, "cu");
  EXPECT_EQ(a.generation, 1);
  auto b = w.create_or_update(ctx_, "cu", {"red", 2});
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.generation, 2);
  auto c = w.create_or_update(ctx_, "cu", {"red", 2});
  EXPECT_EQ(c.generation, 2);
  EXPECT_EQ(c.resource_version, b.resource_version);
}

TEST_F(ClientTest, CreateOrUpdateUpdatesADeletionPendingRow) {
  Widgets w(bh(), widget_kind);
  auto a = w.create(ctx_, {"red", 1}, with_slug("dp"), with_finalizers({"f"}));
  w.remove(ctx_, a.id);
  auto b = w.create_or_update(ctx_, "dp", {"red", 7});
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.spec.size, 7);
  EXPECT_TRUE(b.deletion_requested_at.has_value());
  auto c = w.update(ctx_, a.id, {"red", 8});
  EXPECT_EQ(c.spec.size, 8);
}

TEST_F(ClientTest, GetOrCreateAppliesOptionsOnlyWhenCreating) {
  Widgets w(bh(), widget_kind);
  int callbacks = 0;
  auto [a, created] = w.get_or_create(ctx_, "goc", {"red", 1}, with_finalizers({"f1"}),
                                      with_on_create([&](const Context&) { ++callbacks; }));
  EXPECT_TRUE(created);
  EXPECT_EQ(a.finalizers, std::vector<std::string>{"f1"});
  EXPECT_EQ(callbacks, 1);
  auto [b, created2] = w.get_or_create(ctx_, "goc", {"blue", 9}, with_finalizers({"f2"}),
                                       with_on_create([&](const Context&) { ++callbacks; }));
  EXPECT_FALSE(created2);
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.spec, (WidgetSpec{"red", 1}));
  EXPECT_EQ(b.finalizers, std::vector<std::string>{"f1"});
  EXPECT_EQ(b.resource_version, a.resource_version);
  EXPECT_EQ(callbacks, 1);
}

// create_or_update writes over whatever is stored: a resource version precondition is
// refused, not dropped in silence (which would overwrite another writer's change).
TEST_F(ClientTest, CreateOrUpdateRefusesAResourceVersion) {
  Widgets w(bh(), widget_kind);
  auto a = w.create_or_update(ctx_, "s", {"red", 1});
  w.update(ctx_, a.id, {"red", 2});  // another writer
  EXPECT_ERRC(w.create_or_update(ctx_, "s", {"red", 3}, with_resource_version(a.resource_version)),
              errc::conflicting_option);
  EXPECT_EQ(w.get(ctx_, a.id).spec.size, 2);
  EXPECT_ERRC(w.create_or_update(ctx_, "new", {"red", 1}, with_resource_version(1)),
              errc::conflicting_option);
  EXPECT_EQ(w.list(ctx_).size(), 1u);
}

TEST_F(ClientTest, GetOrCreateRejectsWithSlug) {
  Widgets w(bh(), widget_kind);
  EXPECT_ERRC(w.get_or_create(ctx_, "x", {"red", 1}, with_slug("y")), errc::conflicting_option);
  EXPECT_TRUE(w.list(ctx_).empty());
}

TEST_F(ClientTest, OnCreateRunsAfterCreate) {
  Widgets w(bh(), widget_kind);
  ObjectID seen = 0;
  auto o = w.create(ctx_, {"red", 1}, with_slug("cb"), with_on_create([&](const Context&) {
                      seen = w.get_by_slug(ctx_, "cb").id;  // already committed
                    }));
  EXPECT_EQ(seen, o.id);
}

TEST_F(ClientTest, RemoveIsASoftDeleteAndIdempotent) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"red", 1}, with_finalizers({"f"}));
  w.remove(ctx_, o.id);
  auto d = w.get(ctx_, o.id);
  ASSERT_TRUE(d.deletion_requested_at.has_value());
  EXPECT_GT(d.resource_version, o.resource_version);
  EXPECT_EQ(d.generation, o.generation);
  w.remove(ctx_, o.id);
  auto d2 = w.get(ctx_, o.id);
  EXPECT_EQ(d2.resource_version, d.resource_version);
  EXPECT_EQ(d2.deletion_requested_at, d.deletion_requested_at);
  EXPECT_ERRC(w.remove(ctx_, o.id + 1000), errc::not_found);
}

TEST_F(ClientTest, RemoveBySlugIsIdempotent) {
  Widgets w(bh(), widget_kind);
  w.remove_by_slug(ctx_, "absent");
  auto o = w.create(ctx_, {"red", 1}, with_slug("rs"), with_finalizers({"f"}));
  w.remove_by_slug(ctx_, "rs");
  auto d = w.get(ctx_, o.id);
  ASSERT_TRUE(d.deletion_requested_at.has_value());
  w.remove_by_slug(ctx_, "rs");
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, d.resource_version);
}

TEST_F(ClientTest, EveryCallThatTakesTextRefusesTextThatIsNotUtf8) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"red", 1}, with_slug("ok"));
  const std::string bad = "ok\xff";
  EXPECT_ERRC(w.remove_by_slug(ctx_, bad), errc::invalid_argument);
  EXPECT_ERRC(w.get_by_slug(ctx_, bad), errc::invalid_argument);
  EXPECT_ERRC(w.list_events(ctx_, o.id, with_event_category(bad)), errc::invalid_argument);
  EXPECT_ERRC(w.list_events(ctx_, o.id, with_event_reason(bad)), errc::invalid_argument);
  EXPECT_ERRC(w.get_latest_event(ctx_, o.id, bad), errc::invalid_argument);
  EXPECT_ERRC(w.watch_events(ctx_, o.id, with_event_category(bad)), errc::invalid_argument);
  EXPECT_ERRC((register_controller<WidgetSpec, WidgetStatus>(
                  bh(), {"acme.com", "Widget\xc0"}, [](auto&, auto&, auto&) { return Result{}; })),
              errc::invalid_argument);
  EXPECT_FALSE(w.get(ctx_, o.id).deletion_requested_at.has_value());  // nothing written
}

TEST_F(ClientTest, ListReturnsTheKindByIdOnly) {
  Widgets w(bh(), widget_kind);
  Widgets g(bh(), gadget_kind);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(w.create(ctx_, {"w", i}).id);
    g.create(ctx_, {"g", i});
  }
  auto all = w.list(ctx_);
  ASSERT_EQ(all.size(), 4u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].id, ids[i]);
    EXPECT_EQ(all[i].spec.size, static_cast<int>(i));
  }
}

TEST_F(ClientTest, IdsAreNeverReused) {
  Widgets w(bh(), widget_kind);
  auto a = w.create(ctx_, {"a", 1});
  auto b = w.create(ctx_, {"b", 1});
  EXPECT_GT(b.id, a.id);
}

TEST_F(ClientTest, ClientsAreCheapCopies) {
  Widgets w(bh(), widget_kind);
  Widgets copy = w;
  auto o = copy.create(ctx_, {"red", 1});
  EXPECT_EQ(w.get(ctx_, o.id).id, o.id);
}

TEST_F(ClientTest, CallsAfterTheBeehiveIsGoneAreStopped) {
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"red", 1});
  bh_.reset();
  EXPECT_ERRC(w.get(ctx_, o.id), errc::stopped);
  EXPECT_ERRC(w.create(ctx_, {"red", 1}), errc::stopped);
  EXPECT_ERRC(w.list(ctx_), errc::stopped);
}

TEST_F(ClientTest, EndedContextFailsTheCallAndWritesNothing) {
  Widgets w(bh(), widget_kind);
  auto [cctx, cancel] = ctx_.with_cancel();
  cancel();
  EXPECT_ERRC(w.create(cctx, {"red", 1}), errc::cancelled);
  EXPECT_ERRC(w.get(cctx, 1), errc::cancelled);
  auto expired = ctx_.with_deadline(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_ERRC(w.create(expired, {"red", 1}), errc::deadline_exceeded);
  EXPECT_TRUE(w.list(ctx_).empty());
}

/// Runs `body` inside a `within` block on another thread, holding the block (and with it
/// the writer's transaction) open until the returned guard is released or destroyed.
class OpenBlock {
 public:
  OpenBlock(ControllerClient<WidgetStatus>& cc, std::function<void(const Context&)> body) {
    thread_ = std::thread([this, &cc, body] {
      cc.within(Context{}, [&](const Context& tx) {
        body(tx);
        entered_.set_value();
        leave_.get_future().wait();
      });
    });
    entered_.get_future().wait();
  }
  void release() {
    if (!thread_.joinable()) return;
    leave_.set_value();
    thread_.join();
  }
  ~OpenBlock() { release(); }

 private:
  std::promise<void> entered_, leave_;
  std::thread thread_;
};

TEST_F(ClientTest, ReadsNeverWaitForTheWriter) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"before", 1}, with_slug("o"));
  // The writer is inside an open transaction that has already changed `o`.
  OpenBlock block(cc, [&](const Context& tx) { w.update(tx, o.id, {"uncommitted", 2}); });
  auto quick = ctx_.with_timeout(5s);  // a read waiting for the block would time out
  EXPECT_EQ(w.get(quick, o.id).spec.color, "before");
  EXPECT_EQ(w.get_by_slug(quick, "o").spec.color, "before");
  EXPECT_EQ(w.list(quick).at(0).spec.color, "before");
  block.release();
  EXPECT_EQ(w.get(ctx_, o.id).spec.color, "uncommitted");
}

TEST_F(ClientTest, ReapplyingTheStoredSpecInsideWithinWritesNothing) {
  // Inside a transaction the caller-side shortcut is off (the block must see its own
  // writes): the writer itself finds the spec unchanged.
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  auto o = w.create(ctx_, {"same", 1}, with_slug("o"));
  cc.within(ctx_, [&](const Context& tx) {
    auto u = w.update(tx, o.id, {"same", 1});
    EXPECT_EQ(u.generation, 1);
    EXPECT_EQ(u.resource_version, o.resource_version);
    auto c = w.create_or_update(tx, "o", {"same", 1});
    EXPECT_EQ(c.resource_version, o.resource_version);
  });
  EXPECT_EQ(w.get(ctx_, o.id).resource_version, o.resource_version);
}

TEST_F(ClientTest, AWriteWhoseContextEndsWhileItWaitsIsNotWritten) {
  auto cc = register_controller<WidgetSpec, WidgetStatus>(
      bh(), widget_kind, [](auto&, auto&, auto&) { return Result{}; });
  Widgets w(bh(), widget_kind);
  OpenBlock block(cc, [](const Context&) {});  // the writer is busy with the block
  auto [ctx, cancel] = ctx_.with_cancel();
  auto waiting = std::async(std::launch::async, [&, ctx = ctx] {
    try {
      w.create(ctx, {"late", 1}, with_slug("late"));
      return errc{};
    } catch (const Error& e) {
      return static_cast<errc>(e.code().value());
    }
  });
  std::this_thread::sleep_for(50ms);  // let it queue behind the block
  cancel();
  EXPECT_EQ(waiting.get(), errc::cancelled);  // answered without waiting for the block
  block.release();
  EXPECT_ERRC(w.get_by_slug(ctx_, "late"), errc::not_found);
  auto timed = w.create(ctx_.with_timeout(5s), {"ok", 1});  // the writer is free again
  EXPECT_EQ(w.get(ctx_, timed.id).spec.color, "ok");
}

}  // namespace
}  // namespace beehive::test
