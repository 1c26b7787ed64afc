#pragma once

// Text a caller gave, quoted for an error message. Long text is cut: hostile input (a
// selector, a continue token from an HTTP request) must not make a huge message. The
// excerpt is UTF-8 whatever the input (a cut at a character's end, each byte that starts
// none replaced), so that the message can go on into JSON, an event or a log as text.

#include <string>
#include <string_view>

#include "storable_text.hpp"

namespace beehive {

inline std::string quoted_excerpt(std::string_view text) {
  constexpr std::size_t max_shown = 80;
  return '"' + detail::storable_text(text, max_shown) + '"';
}

}  // namespace beehive
