#pragma once

// Fault injection for the tests of a reconcile pass that begins just after its process
// stopped leading (handed to a worker while it still led), and of a controller's listing
// that other processes' changes overtake. Off unless a test arms it; never armed by the
// library.

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <beehive/group_kind.hpp>

namespace beehive::detail::faults {

/// Called on the worker's thread as each reconcile pass begins (`true`, before the pass
/// reads the leadership term) and as it ends (`false`). A test sets it before the beehive
/// starts and clears it once it stopped.
inline std::function<void(bool begins)> reconcile_pass;

/// Called on the reader's thread with the ids (and resource versions) each controller
/// listing read, before they go to the controller; it may change them, as if the
/// listing had been read at another moment. Set and cleared as `reconcile_pass` is.
inline std::function<void(std::vector<std::pair<ObjectID, std::int64_t>>& ids)> listing_read;

}  // namespace beehive::detail::faults
