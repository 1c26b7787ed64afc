#pragma once

// ObjectTally: a kind's stored objects and unsettled objects, counted by its controller
// actor (beehive_objects, beehive_unsettled_objects) from the start listing and then from
// every committed change of the kind, so that the gauges cost no store read after start.
// Used only with a metrics sink; owned by one actor (not thread-safe).
//
// The listing and the commits race: a commit may reach the controller before or after
// the listing that already contains it. Each id keeps the highest resource version seen,
// so the newer of the two wins; ids removed before the listing arrives are remembered
// (ids are never reused) so that an older listing does not bring them back.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <beehive/object_meta.hpp>

namespace beehive::detail {

class ObjectTally {
 public:
  using IdList = std::vector<std::pair<ObjectID, std::int64_t>>;  // id, resource version

  /// The start listing: every id of the kind, and the unsettled ones (each read may be a
  /// little newer than the other; both carry versions).
  void listed(const IdList& all, const IdList& unsettled);
  /// A committed change of the kind's object; `removed`: the row is gone.
  void changed(const ObjectMeta& meta, bool removed);

  std::size_t objects() const { return rows_.size(); }
  std::size_t unsettled() const { return unsettled_; }

 private:
  void put(ObjectID id, std::int64_t rv, bool unsettled);

  struct Row {
    std::int64_t rv = 0;
    bool unsettled = false;
  };
  std::unordered_map<ObjectID, Row> rows_;
  std::size_t unsettled_ = 0;
  bool listed_ = false;
  std::unordered_set<ObjectID> removed_before_listing_;
};

/// Unsettled as the store's listing counts it: the observed generation lags the
/// generation, or deletion was requested.
bool is_unsettled(const ObjectMeta& meta);

}  // namespace beehive::detail
