// BeehiveCore's watches: a blocking stream is opened by handing its subscription to the
// watch hub and waiting, within the caller's context, until the hub has delivered its
// snapshot (every later commit then arrives live); schedule watches are served by the
// kind's ScheduleTable. Runs on the caller's thread.

#include "beehive_core.hpp"

#include <limits>

#include "store/label_selector.hpp"

namespace beehive::detail {

template <class Watch, class Core>
void BeehiveCore::open_watch(const Context& ctx, std::shared_ptr<Watch> w,
                             const std::shared_ptr<Core>& core) {
  w->core = core;
  w->subscription = next_subscription();
  std::weak_ptr<BeehiveCore> weak = weak_from_this();
  core->set_on_end([weak, sub = w->subscription] {
    if (auto rt = weak.lock())
      if (auto h = rt->watch_hub()) caf::anon_send(h, unsubscribe_atom::value, sub);
  });
  // No hub: the beehive stopped (a within block that outlived stop gets here), or the
  // hub is being replaced. A message to no one is dropped unsent, `w` with it untouched:
  // its caller would wait for a snapshot that never comes.
  auto hub = watch_hub();
  if (!hub) {
    core->close();
    if (auto s = state_.load(std::memory_order_acquire); s == State::created || s == State::running)
      throw Error(errc::store, "the watch hub restarted while the watch opened; open it again");
    throw Error(errc::stopped, "beehive stopped");
  }
  auto ready = w->ready;
  caf::anon_send(hub, std::move(w));
  try {
    ready->take(ctx);
  } catch (const Error& e) {
    // The caller's context ended before the snapshot was in (or the hub stopped): the
    // stream ends, and its end unsubscribes the watch the hub may still be opening.
    core->close();
    // A hub that went while the beehive runs is being replaced: that is no stop.
    if (auto s = state_.load(std::memory_order_acquire);
        e.value() == errc::stopped && (s == State::created || s == State::running))
      throw Error(errc::store, "the watch hub restarted while the watch opened; open it again");
    throw;
  }
}

std::shared_ptr<EventCore> BeehiveCore::watch_events(const Context& ctx, ObjectID id,
                                                     const EventQuery& q) {
  ensure_running(ctx);
  ctx.throw_if_done();
  auto core = std::make_shared<EventCore>(ctx);
  auto w = std::make_shared<EventStreamWatch>();
  w->filter = {id, q, nullptr};
  open_watch(ctx, std::move(w), core);
  return core;
}

std::shared_ptr<StreamCore<Schedule>> BeehiveCore::watch_schedule(const Context& ctx,
                                                                  const GroupKind& gk,
                                                                  ObjectID id) {
  ensure_running(ctx);
  ctx.throw_if_done();
  // A within block that outlived stop passes ensure_running; a watch is no part of it.
  if (state_.load(std::memory_order_acquire) == State::stopped)
    throw Error(errc::stopped, "beehive stopped");
  auto entry = kind(gk);
  if (!entry) throw Error(errc::no_controller, to_string(gk) + " has no controller");
  auto core = std::make_shared<StreamCore<Schedule>>(ctx);
  entry->schedules->watch(id, core);
  return core;
}

std::shared_ptr<ChangeCore> BeehiveCore::watch(const Context& ctx, const GroupKind& gk,
                                               std::optional<ObjectID> id,
                                               std::shared_ptr<const store::LabelSelector> selector,
                                               std::optional<std::int64_t> resume_from) {
  ensure_running(ctx);
  ctx.throw_if_done();
  if (resume_from) {
    if (*resume_from < 0)
      throw Error(errc::invalid_argument,
                  "with_resume_from takes a resource version, not " + std::to_string(*resume_from));
    // Versions only grow: a position above the head now was never handed out.
    auto head = read(ctx, [](store::Reader& r) {
      return r.changes_since(std::numeric_limits<std::int64_t>::max(), {}, {}).head;
    });
    if (*resume_from > head)
      throw Error(errc::watch_too_new, "resource version " + std::to_string(*resume_from) +
                                           " is above the store's " + std::to_string(head));
  }
  // A change folded from several commits counts from the first: the position stays below
  // every commit it carries.
  auto core = std::make_shared<ChangeCore>(ctx, merge_unread, [](const object_change& c) {
    return c.first_version > 0 ? c.first_version : c.row.meta.resource_version;
  });
  auto w = std::make_shared<StreamWatch>();
  w->gk = gk;
  w->id = id;
  w->selector = std::move(selector);
  w->resume_from = resume_from;
  open_watch(ctx, std::move(w), core);
  return core;
}

}  // namespace beehive::detail
