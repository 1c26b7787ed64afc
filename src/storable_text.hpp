#pragma once

// Text as both backends store it: UTF-8 without NUL (PostgreSQL's text holds neither
// invalid sequences nor NUL). One decoder serves the check that refuses other text
// (detail::require_text) and the repair of text beehive writes on its own account, such
// as an exception's message, which may hold any bytes (a file name in Latin-1, say).
//
// Pure functions: any thread.

#include <cstddef>
#include <string>
#include <string_view>

namespace beehive::detail {

/// The length (1 to 4) of the UTF-8 character that starts at `text[i]`, or 0 when none
/// does there: a NUL, a byte that cannot start one, a truncated or overlong sequence, a
/// surrogate or a code point above U+10FFFF.
std::size_t utf8_char_at(std::string_view text, std::size_t i);

/// `text` with each byte that starts no character replaced by U+FFFD, cut at a
/// character's end to at most `max_bytes` (at least 3), "…" marking a cut.
std::string storable_text(std::string_view text, std::size_t max_bytes);

}  // namespace beehive::detail
