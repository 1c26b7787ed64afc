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
#include <vector>

#include <beehive/commit_record.hpp>

namespace beehive::store {

/// The version `c` counts from: its earliest folded commit's, else its own.
inline std::int64_t first_version_of(const object_change& c) {
  return c.first_version > 0 ? c.first_version : c.row.meta.resource_version;
}

/// Puts `changes` in first-version order (stable: equal ones keep theirs).
inline void order_for_watches(std::vector<object_change>& changes) {
  std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) {
    return first_version_of(a) < first_version_of(b);
  });
}

}  // namespace beehive::store
