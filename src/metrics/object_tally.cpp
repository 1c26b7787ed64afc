#include "metrics/object_tally.hpp"

#include <unordered_map>

namespace beehive::detail {

bool is_unsettled(const ObjectMeta& meta) {
  return meta.deletion_requested_at.has_value() ||
         meta.observed_generation.value_or(0) < meta.generation;
}

void ObjectTally::put(ObjectID id, std::int64_t rv, bool unsettled) {
  auto [it, fresh] = rows_.try_emplace(id, Row{rv, unsettled});
  if (fresh) {
    unsettled_ += unsettled;
    return;
  }
  if (rv < it->second.rv) return;  // an older view of the row
  unsettled_ -= it->second.unsettled;
  unsettled_ += unsettled;
  it->second = {rv, unsettled};
}

void ObjectTally::listed(const IdList& all, const IdList& unsettled) {
  std::unordered_map<ObjectID, std::int64_t> lagging(unsettled.begin(), unsettled.end());
  for (auto [id, rv] : all) {
    if (removed_before_listing_.count(id)) continue;
    auto u = lagging.find(id);
    if (u != lagging.end() && u->second >= rv)
      put(id, u->second, true);
    else
      put(id, rv, false);
    if (u != lagging.end()) lagging.erase(u);
  }
  // Created between the two reads: unsettled from birth.
  for (auto [id, rv] : lagging)
    if (!removed_before_listing_.count(id)) put(id, rv, true);
  listed_ = true;
  removed_before_listing_.clear();
}

void ObjectTally::changed(const ObjectMeta& meta, bool removed) {
  if (!removed) {
    put(meta.id, meta.resource_version, is_unsettled(meta));
    return;
  }
  if (!listed_) removed_before_listing_.insert(meta.id);
  if (auto it = rows_.find(meta.id); it != rows_.end()) {
    unsettled_ -= it->second.unsettled;
    rows_.erase(it);
  }
}

}  // namespace beehive::detail
