#include "actors/record_inbox.hpp"

#include <algorithm>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "actors/atoms.hpp"
#include "actors/hub_inbox.hpp"

namespace beehive::detail {

namespace {

/// Appends the refs of `from` whose ids `seen` does not hold yet.
void add_refs(std::vector<Ref>& to, std::unordered_set<ObjectID>& seen,
              const std::vector<Ref>& from) {
  for (const auto& r : from)
    if (seen.insert(r.id).second) to.push_back(r);
}

}  // namespace

void RecordInbox::attach(caf::actor_addr controller) {
  caf::actor wake;
  {
    std::lock_guard lk(mu_);
    controller_ = std::move(controller);
    // What was posted before found nobody to wake.
    woken_ = !batch_.changes.empty() || !batch_.wakes.empty() || !batch_.requeues.empty() ||
             !batch_.backoff_resets.empty() || batch_.edges_removed || batch_.lost_through > 0;
    if (woken_) wake = caf::actor_cast<caf::actor>(controller_);
  }
  if (wake) caf::anon_send(wake, records_atom::value);
}

void RecordInbox::post(const commit_record& rec) {
  caf::actor wake;
  {
    std::lock_guard lk(mu_);
    for (const auto& c : rec.changes) {
      auto [at, fresh] = change_at_.try_emplace(c.row.meta.id, batch_.changes.size());
      if (fresh) {
        batch_.changes.push_back(c);
        continue;
      }
      // What the commits did together (as the hub folds them), and an owner once known
      // (ids are never reused, nor owners changed).
      auto& pending = batch_.changes[at->second];
      merge_changes(pending, object_change(c));
      if (c.owner) pending.owner = c.owner;
    }
    add_refs(batch_.wakes, woken_ids_, rec.wakes);
    add_refs(batch_.requeues, requeued_ids_, rec.requeues);
    add_refs(batch_.backoff_resets, reset_ids_, rec.backoff_resets);
    batch_.edges_removed = batch_.edges_removed || rec.edges_removed;
    batch_.lost_through = std::max(batch_.lost_through, rec.lost_through);
    if (woken_) return;
    woken_ = true;
    wake = caf::actor_cast<caf::actor>(controller_);
  }
  // A controller that is gone (a crash) misses it; its successor lists its kind.
  if (wake) caf::anon_send(wake, records_atom::value);
}

commit_record RecordInbox::take() {
  std::lock_guard lk(mu_);
  commit_record out = std::move(batch_);
  batch_ = {};
  change_at_.clear();
  woken_ids_.clear();
  requeued_ids_.clear();
  reset_ids_.clear();
  woken_ = false;
  return out;
}

std::size_t RecordInbox::size() const {
  std::lock_guard lk(mu_);
  return batch_.changes.size() + batch_.wakes.size() + batch_.requeues.size() +
         batch_.backoff_resets.size();
}

}  // namespace beehive::detail
