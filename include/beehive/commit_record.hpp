#pragma once

/// `commit_record`: what one committed transaction changed, as the store_writer actor
/// publishes it to its subscribers (the watch hub, controllers, gc) after the commit.

#include <vector>

#include <beehive/change.hpp>
#include <beehive/object_row.hpp>

namespace beehive {

/// One object a commit changed, with its new row (for `Deleted`, the final body).
struct object_change {
  ChangeType type = ChangeType::Added;
  ObjectRow row;
};

struct commit_record {
  std::vector<object_change> changes;
};

}  // namespace beehive
