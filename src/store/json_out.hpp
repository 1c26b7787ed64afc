#pragma once

// Writing JSON text straight into a string, for the documents the write path builds on
// every commit (a change log body, a commit note): a tree of nlohmann::json values first
// costs an allocation per field, and the writer holds the store's counters meanwhile.
// Read back with nlohmann::json.
//
// Pure functions: safe on any thread.

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace beehive::store::json_out {

inline void put_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      out.append("\\u00");
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
}

inline void put_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

inline void put_bool(std::string& out, bool v) { out.append(v ? "true" : "false"); }

/// `"key":`, after a comma unless it is the object's first.
inline void put_key(std::string& out, std::string_view key, bool first = false) {
  if (!first) out.push_back(',');
  put_string(out, key);
  out.push_back(':');
}

}  // namespace beehive::store::json_out
