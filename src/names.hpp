#pragma once

// The rule for the strings objects are found by: group, kind, slug, condition type and
// event category. Both backends index them, and PostgreSQL refuses an index entry larger
// than about 2.7 kB, so each is held to max_name_bytes on both: a name that works on one
// backend works on the other.

#include <cstddef>
#include <string_view>

namespace beehive {

/// The most bytes a group, kind, slug, condition type or event category may hold.
inline constexpr std::size_t max_name_bytes = 512;

/// Throws Error(errc::invalid_argument) naming `what` unless `name` is text
/// (detail::require_text) of at most max_name_bytes.
void require_name(std::string_view name, std::string_view what);

/// Throws Error(errc::invalid_argument) unless `finalizer`, one being added (at create or
/// later), is text and not empty. A removal takes any text: a store may hold an empty
/// one added before this rule.
void require_new_finalizer(std::string_view finalizer);

}  // namespace beehive
