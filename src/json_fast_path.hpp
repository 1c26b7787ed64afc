#pragma once

// A fast path for parsing and printing the JSON beehive stores: compact objects, arrays,
// ASCII strings without escapes, integers, booleans and null. Every spec and status read
// is parsed, and nlohmann's parser spends ~100 instructions per byte on such text (a
// tenth of a point read); every write prints one. Anything outside that subset (escapes,
// non-ASCII, floating point, numbers out of range, deep nesting, and every malformed text)
// returns nullopt, and the caller uses nlohmann: results and errors stay exactly
// nlohmann's, byte for byte (stored bytes are compared to detect converged writes). The
// fast path recurses at most 32 levels; what it declines, the codec bounds before
// nlohmann sees it (max_json_depth, codec.hpp).

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace beehive::detail {

/// The value nlohmann::json::parse(text) returns, or nullopt: use nlohmann's parser.
std::optional<nlohmann::json> parse_json_fast(std::string_view text);

/// What j.dump() returns, or nullopt: use j.dump().
std::optional<std::string> dump_json_fast(const nlohmann::json& j);

}  // namespace beehive::detail
