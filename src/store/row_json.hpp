#pragma once

// An ObjectRow as JSON text and back: how the change log keeps a removed object's final
// body, so that a watch resuming after the removal (or another process learning of it)
// still gets the body, as a live watch does. Relations are not kept.
//
// Pure functions: safe on any thread.

#include <string>
#include <string_view>

#include <beehive/object_row.hpp>

namespace beehive::store {

std::string row_to_json(const ObjectRow& row);
/// Throws Error(errc::store) for text that row_to_json did not write.
ObjectRow row_from_json(std::string_view text);

}  // namespace beehive::store
