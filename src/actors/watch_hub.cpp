#include "actors/watch_hub.hpp"

#include <iostream>

#include "runtime.hpp"

namespace beehive::detail {

namespace {

using Self = watch_hub_impl::stateful_pointer<WatchHubState>;

bool matches(const WatchHubState::Sub& s, const ObjectRow& row) {
  if (s.id) return row.meta.id == *s.id;
  return row.meta.group == s.gk.group && row.meta.kind == s.gk.kind;
}

/// Delivers to one subscriber; false when the subscriber is gone.
bool deliver(const WatchHubState::Sub& s, const object_change& c) {
  if (s.core) return s.core->push(c.row.meta.id, c);
  caf::anon_send(s.actor, c);
  return true;
}

std::uint64_t add(Self self, std::uint64_t id, WatchHubState::Sub sub) {
  auto& st = self->state;
  if (st.stopped) {
    if (sub.core) sub.core->finish(errc::stopped);
    if (sub.actor) caf::anon_send(sub.actor, watch_ended{id});
    return id;
  }
  try {
    for (auto& row : st.rt->backend().reader()->snapshot(sub.gk, sub.id, sub.floor))
      deliver(sub, {ChangeType::Added, std::move(row), object_change::created});
  } catch (const std::exception& e) {
    // The store failed to read the snapshot: end the watch rather than hide a gap.
    std::cerr << "beehive: watch snapshot failed: " << e.what() << "\n";
    if (sub.core) sub.core->finish(errc::store);
    return id;
  }
  if (sub.actor) self->monitor(sub.actor);
  st.subs.emplace(id, std::move(sub));
  return id;
}

}  // namespace

bool merge_changes(object_change& pending, object_change&& incoming) {
  auto type = pending.type == ChangeType::Added && incoming.type == ChangeType::Modified
                  ? ChangeType::Added
                  : incoming.type;
  pending.parts |= incoming.parts;
  pending.row = std::move(incoming.row);
  pending.type = type;
  return true;
}

watch_hub_impl::behavior_type watch_hub(Self self, Runtime* rt) {
  self->state.rt = rt;
  self->set_down_handler([self](caf::down_msg& m) {
    std::erase_if(self->state.subs, [&](auto& kv) { return kv.second.actor.address() == m.source; });
  });
  return {
      [self](const watch_request& r) -> std::uint64_t {
        return add(self, self->state.rt->next_subscription(), {r.gk, r.id, nullptr, r.subscriber, 0});
      },
      [self](const StreamWatchPtr& w) {
        w->served = true;
        add(self, w->subscription, {w->gk, w->id, w->core, nullptr, 0});
        w->ready->deliver(true);
      },
      [self](unsubscribe_atom, std::uint64_t id) { self->state.subs.erase(id); },
      [self](const commit_record& rec) {
        auto& subs = self->state.subs;
        for (auto it = subs.begin(); it != subs.end();) {
          bool alive = true;
          for (auto& c : rec.changes)
            if (c.row.meta.resource_version > it->second.floor && matches(it->second, c.row))
              alive = deliver(it->second, c) && alive;
          it = alive ? std::next(it) : subs.erase(it);
        }
      },
      [self](shutdown_atom) {
        auto& st = self->state;
        st.stopped = true;
        for (auto& [id, s] : st.subs) {
          if (s.core) s.core->finish(errc::stopped);
          if (s.actor) caf::anon_send(s.actor, watch_ended{id});
        }
        st.subs.clear();
        self->quit();
      },
  };
}

}  // namespace beehive::detail
