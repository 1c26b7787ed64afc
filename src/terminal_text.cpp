#include "terminal_text.hpp"

#include <cstdio>

namespace beehive {

namespace {

std::string hex_escape(const char* format, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

std::string printable(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      if (c == '\n')
        out += keep_newlines ? "\n" : "\\n";
      else if (c == '\r')
        out += "\\r";
      else if (c == '\t')
        out += keep_newlines ? "\t" : "\\t";
      else
        out += hex_escape("\\x%02x", c);
      continue;
    }
    // C1 controls: U+0080-U+009F, encoded C2 80 - C2 9F.
    if (c == 0xC2 && i + 1 < text.size()) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F) {
        out += hex_escape("\\u%04x", next);
        ++i;
        continue;
      }
    }
    // Bidirectional controls: U+202A-U+202E (E2 80 AA-AE), U+2066-U+2069 (E2 81 A6-A9).
    if (c == 0xE2 && i + 2 < text.size()) {
      auto b1 = static_cast<unsigned char>(text[i + 1]);
      auto b2 = static_cast<unsigned char>(text[i + 2]);
      if ((b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)) {
        out += hex_escape("\\u%04x", 0x2000u + ((b1 & 0x3Fu) << 6) + (b2 & 0x3Fu));
        i += 2;
        continue;
      }
    }
    out += static_cast<char>(c);
  }
  return out;
}

}  // namespace beehive
