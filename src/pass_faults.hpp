#pragma once

// Fault injection for the tests of a reconcile pass that begins just after its process
// stopped leading (handed to a worker while it still led). Off unless a test arms it;
// never armed by the library.

#include <functional>

namespace beehive::detail::faults {

/// Called on the worker's thread as each reconcile pass begins (`true`, before the pass
/// reads the leadership term) and as it ends (`false`). A test sets it before the beehive
/// starts and clears it once it stopped.
inline std::function<void(bool begins)> reconcile_pass;

}  // namespace beehive::detail::faults
