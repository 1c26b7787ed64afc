#pragma once

/// `Change`: one notification from an object watch. `Added` for the snapshot and for
/// creations, `Modified` for any later change (a deletion request included), `Deleted`
/// for the physical removal, which carries the object's final body.
///
/// A plain value: copyable, thread-compatible.

#include <beehive/object.hpp>

namespace beehive {

enum class ChangeType { Added, Modified, Deleted };

/// "Added", "Modified" or "Deleted".
const char* to_string(ChangeType t) noexcept;

template <class Spec, class Status>
struct Change {
  ChangeType type = ChangeType::Added;
  Object<Spec, Status> object;
};

}  // namespace beehive
