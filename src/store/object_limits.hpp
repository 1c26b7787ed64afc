#pragma once

// The bounds a write is checked against (WriteEngine::check_size): with_max_object_bytes'
// default, and the bounds on event runs and conditions (a message of either, the reason
// of either: a short machine-readable token; an object's conditions together). Apart from the
// engine so that beehive-ctl checks its input against them before it writes anything.

#include <cstddef>

namespace beehive::store {

inline constexpr std::size_t default_max_object_bytes = 8 * 1024 * 1024;
inline constexpr std::size_t max_event_message_bytes = 64 * 1024;
inline constexpr std::size_t max_event_detail_bytes = 1024 * 1024;
inline constexpr std::size_t max_reason_bytes = 1024;
/// An object's finalizers together (each a name of at most 512 bytes): stored as one
/// value and read with every row, they are bounded as the object is.
inline constexpr std::size_t max_finalizers_bytes = 64 * 1024;
/// An object's conditions together, as stored (their types, reasons and messages as JSON
/// text, and condition_overhead_bytes each for the rest): read with every row as one
/// value, they are bounded as the object is, whatever their number.
inline constexpr std::size_t max_conditions_bytes = 1024 * 1024;
inline constexpr std::size_t condition_overhead_bytes = 64;

}  // namespace beehive::store
