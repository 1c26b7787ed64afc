#pragma once

// Text a caller gave, quoted for an error message. Long text is cut: hostile input (a
// selector, a continue token from an HTTP request) must not make a huge message.

#include <string>
#include <string_view>

namespace beehive {

inline std::string quoted_excerpt(std::string_view text) {
  constexpr std::size_t max_shown = 80;
  std::string out = "\"";
  out.append(text.substr(0, max_shown));
  if (text.size() > max_shown) out += "...";
  out += '"';
  return out;
}

}  // namespace beehive
