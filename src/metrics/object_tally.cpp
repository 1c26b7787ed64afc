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

std::uint64_t ObjectTally::listing_started() {
  ++listings_in_flight_;
  return ++tickets_;
}

void ObjectTally::listing_ended() {
  if (--listings_in_flight_ > 0) return;
  listings_in_flight_ = 0;
  changed_since_.clear();
  removed_.clear();
}

void ObjectTally::listing_failed(std::uint64_t) { listing_ended(); }

void ObjectTally::listed(std::uint64_t ticket, const IdList& all, const IdList& unsettled) {
  counted_ = true;
  std::unordered_map<ObjectID, std::int64_t> lagging(unsettled.begin(), unsettled.end());
  std::unordered_set<ObjectID> present;
  present.reserve(all.size() + lagging.size());
  for (auto [id, rv] : all) present.insert(id);
  for (auto [id, rv] : unsettled) present.insert(id);
  // Rows the listing lacks are gone, their removals lost (changes another process made
  // that this one never heard of) or still on their way, unless a change of the row came
  // after the listing was asked for: that row may be newer than the read.
  for (auto it = rows_.begin(); it != rows_.end();) {
    auto since = changed_since_.find(it->first);
    bool changed_after = since != changed_since_.end() && since->second >= ticket;
    if (present.count(it->first) || changed_after) {
      ++it;
      continue;
    }
    unsettled_ -= it->second.unsettled;
    it = rows_.erase(it);
  }
  for (auto [id, rv] : all) {
    if (removed_.count(id)) continue;  // read before its removal
    auto u = lagging.find(id);
    if (u != lagging.end() && u->second >= rv)
      put(id, u->second, true);
    else
      put(id, rv, false);
    if (u != lagging.end()) lagging.erase(u);
  }
  // Created between the two reads: unsettled from birth.
  for (auto [id, rv] : lagging)
    if (!removed_.count(id)) put(id, rv, true);
  listing_ended();
}

void ObjectTally::changed(const ObjectMeta& meta, bool removed) {
  if (listings_in_flight_ > 0) {
    changed_since_[meta.id] = tickets_;
    if (removed) removed_.insert(meta.id);
  }
  if (!removed) {
    put(meta.id, meta.resource_version, is_unsettled(meta));
    return;
  }
  if (auto it = rows_.find(meta.id); it != rows_.end()) {
    unsettled_ -= it->second.unsettled;
    rows_.erase(it);
  }
}

}  // namespace beehive::detail
