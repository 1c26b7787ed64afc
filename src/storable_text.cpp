#include "storable_text.hpp"

#include <algorithm>

namespace beehive::detail {

std::size_t utf8_char_at(std::string_view text, std::size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + i;
  const std::size_t left = text.size() - i;
  unsigned c = p[0];
  if (c == 0) return 0;
  if (c < 0x80) return 1;
  std::size_t more = (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : 0;
  if (more == 0 || left <= more) return 0;
  unsigned cp = more == 1 ? (c & 0x1F) : more == 2 ? (c & 0x0F) : (c & 0x07);
  for (std::size_t k = 1; k <= more; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[k] & 0x3F);
  }
  if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return more + 1;
}

std::string storable_text(std::string_view text, std::size_t max_bytes) {
  static constexpr std::string_view replacement = "\xEF\xBF\xBD", ellipsis = "\xE2\x80\xA6";
  std::string out;
  out.reserve(std::min(text.size(), max_bytes + 1));
  for (std::size_t i = 0; i < text.size() && out.size() <= max_bytes;) {
    std::size_t n = utf8_char_at(text, i);
    out += n ? text.substr(i, n) : replacement;
    i += n ? n : 1;
  }
  if (out.size() <= max_bytes) return out;
  // Too long: cut at the last character boundary that leaves room for the mark.
  std::size_t end = max_bytes - ellipsis.size();
  while (end > 0 && (static_cast<unsigned char>(out[end]) & 0xC0) == 0x80) --end;
  out.resize(end);
  out += ellipsis;
  return out;
}

}  // namespace beehive::detail
