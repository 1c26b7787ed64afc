#include "actors/hub_inbox.hpp"

#include <algorithm>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

namespace beehive::detail {

bool merge_changes(object_change& pending, object_change&& incoming) {
  auto type = pending.type == ChangeType::Added && incoming.type == ChangeType::Modified
                  ? ChangeType::Added
                  : incoming.type;
  pending.parts |= incoming.parts;
  pending.row = std::move(incoming.row);
  pending.type = type;
  return true;
}

bool merge_unread(object_change& pending, object_change&& incoming) {
  bool known = !(pending.parts & kReaderMayHaveIt);
  if (pending.type == ChangeType::Added && incoming.type == ChangeType::Deleted && known)
    return false;
  bool back = pending.type == ChangeType::Deleted && incoming.type == ChangeType::Added && known;
  merge_changes(pending, std::move(incoming));
  if (back) pending.type = ChangeType::Modified;
  return true;
}

void HubInbox::attach(caf::actor_addr hub) {
  std::lock_guard lk(mu_);
  hub_ = std::move(hub);
  batch_ = {};
  change_at_.clear();
  event_at_.clear();
  woken_ = false;
  peak_ = 0;
}

void HubInbox::post(const commit_record& rec) {
  // A commit that only wrote the change log (a requeue through it, a release) changes
  // nothing a watch shows, but the watches' positions move past it: a quiet watch's
  // position then follows the log's, and stays resumable once the log is trimmed.
  std::int64_t logged = 0;
  for (auto rv : rec.logged_versions) logged = std::max(logged, rv);
  if (rec.changes.empty() && rec.events.empty() && rec.lost_through == 0 && logged == 0) return;
  caf::actor wake;
  {
    std::lock_guard lk(mu_);
    batch_.lost_through = std::max(batch_.lost_through, rec.lost_through);
    batch_.through = std::max(batch_.through, logged);
    for (const auto& c : rec.changes)
      batch_.through = std::max(batch_.through, c.row.meta.resource_version);
    for (const auto& r : rec.events) batch_.through = std::max(batch_.through, r.resource_version);
    for (const auto& c : rec.changes) {
      auto [at, fresh] = change_at_.try_emplace(c.row.meta.id, batch_.changes.size());
      if (fresh)
        batch_.changes.push_back(
            {c, c.first_version > 0 ? c.first_version : c.row.meta.resource_version});
      else
        merge_changes(batch_.changes[at->second].change, object_change(c));
    }
    for (const auto& r : rec.events) {
      auto [at, fresh] = event_at_.try_emplace(r.event.id, batch_.events.size());
      if (fresh)
        batch_.events.push_back(r);
      else
        batch_.events[at->second] = r;
    }
    peak_ = std::max(peak_, batch_.changes.size() + batch_.events.size());
    if (woken_) return;
    woken_ = true;
    wake = caf::actor_cast<caf::actor>(hub_);
  }
  // A hub that is gone (a crash) misses it; its successor attaches and starts over.
  if (wake) caf::anon_send(wake, hub_wake_atom::value);
}

HubBatch HubInbox::take() {
  std::lock_guard lk(mu_);
  HubBatch out = std::move(batch_);
  batch_ = {};
  change_at_.clear();
  event_at_.clear();
  woken_ = false;
  return out;
}

std::size_t HubInbox::size() const {
  std::lock_guard lk(mu_);
  return batch_.changes.size() + batch_.events.size();
}

std::size_t HubInbox::peak() const {
  std::lock_guard lk(mu_);
  return peak_;
}

}  // namespace beehive::detail
