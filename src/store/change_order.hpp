#pragma once

// The order changes reach watches in. A change folded from several commits (another
// process's, read from the change log, or a resumed watch's replay) counts from its
// earliest commit: a stream's position stays below the first version of every change
// still pending. Handed out in first-version order, a change a reader has taken never
// lies above the position of one still pending, so that a resume from that position
// replays nothing the reader took as "never seen": in latest-version order, a reader
// could take an object created at 3 while the position stayed at 1, and a resume from
// 1 then dropped the object's removal as that of one it never had.

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include <beehive/commit_record.hpp>

namespace beehive::store {

/// The version `c` counts from: its earliest folded commit's, else its own.
inline std::int64_t first_version_of(const object_change& c) {
  return c.first_version > 0 ? c.first_version : c.row.meta.resource_version;
}

/// Puts `changes` in first-version order. An object may come twice (another process's
/// fold read from the log, and this process's own commit): its entries stay in version
/// order, together at the place of its earliest (a later one merged over an earlier one
/// keeps the newest row).
inline void order_for_watches(std::vector<object_change>& changes) {
  std::unordered_map<ObjectID, std::int64_t> earliest;
  for (const auto& c : changes) {
    auto [it, fresh] = earliest.try_emplace(c.row.meta.id, first_version_of(c));
    if (!fresh) it->second = std::min(it->second, first_version_of(c));
  }
  auto key = [&](const object_change& c) {
    return std::pair{earliest.at(c.row.meta.id), c.row.meta.resource_version};
  };
  std::stable_sort(changes.begin(), changes.end(),
                   [&](const auto& a, const auto& b) { return key(a) < key(b); });
}

}  // namespace beehive::store
