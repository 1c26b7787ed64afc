#pragma once

// ObjectTally: a kind's stored objects and unsettled objects, counted by its controller
// actor (beehive_objects, beehive_unsettled_objects) from a listing and then from every
// committed change of the kind, so that the gauges cost no store read after start.
// Used only with a metrics sink; owned by one actor (not thread-safe).
//
// The controller lists the kind at start and again whenever it restarts (taking over as
// the leader, or missing other processes' changes), and a listing replaces what was
// counted: a row it lacks is gone, unless a change of it arrived after the listing was
// asked for (a row created after the read). The listing and the commits race: a commit
// may reach the controller before or after the listing that already contains it. Each id
// keeps the highest resource version seen, so the newer of the two wins; ids removed
// while a listing is in flight are remembered (ids are never reused) so that the listing,
// read before the removal, does not bring them back.

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

  /// A listing is asked for now: the changes from now on are kept apart until it ends.
  /// Returns its ticket, for `listed` or `listing_failed`.
  std::uint64_t listing_started();
  /// The listing of `ticket`: every id of the kind, and the unsettled ones (each read may
  /// be a little newer than the other; both carry versions).
  void listed(std::uint64_t ticket, const IdList& all, const IdList& unsettled);
  /// The listing of `ticket` was not read: the counts stay as they are.
  void listing_failed(std::uint64_t ticket);
  /// A committed change of the kind's object; `removed`: the row is gone.
  void changed(const ObjectMeta& meta, bool removed);

  /// Whether a listing has been read: until then the counts are only the changes seen
  /// since this tally was made, not the kind's.
  bool counted() const { return counted_; }
  std::size_t objects() const { return rows_.size(); }
  std::size_t unsettled() const { return unsettled_; }

 private:
  void put(ObjectID id, std::int64_t rv, bool unsettled);
  void listing_ended();

  struct Row {
    std::int64_t rv = 0;
    bool unsettled = false;
  };
  std::unordered_map<ObjectID, Row> rows_;
  std::size_t unsettled_ = 0;
  bool counted_ = false;
  std::uint64_t tickets_ = 0;  // listings asked for so far
  int listings_in_flight_ = 0;
  // While a listing is in flight (cleared when none is): each id changed meanwhile, with
  // the newest ticket handed out when it changed, and the ids removed meanwhile.
  std::unordered_map<ObjectID, std::uint64_t> changed_since_;
  std::unordered_set<ObjectID> removed_;
};

/// Unsettled as the store's listing counts it: the observed generation lags the
/// generation, or deletion was requested.
bool is_unsettled(const ObjectMeta& meta);

}  // namespace beehive::detail
