#pragma once

// A fast path for parsing the JSON beehive stores: compact objects, arrays, ASCII strings
// without escapes, integers, booleans and null. Every spec and status read is parsed, and
// nlohmann's parser spends ~100 instructions per byte on such text (a tenth of a point
// read). Anything outside that subset (escapes, non-ASCII, fractions and exponents,
// numbers out of range, deep nesting, and every malformed text) returns nullopt, and the
// caller parses with nlohmann::json::parse: results and errors stay exactly nlohmann's.

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace beehive::detail {

/// The value nlohmann::json::parse(text) returns, or nullopt: use nlohmann's parser.
std::optional<nlohmann::json> parse_json_fast(std::string_view text);

}  // namespace beehive::detail
