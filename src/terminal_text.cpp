#include "terminal_text.hpp"

#include <cstdio>

namespace beehive {

namespace {

std::string hex_escape(const char* format, unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

namespace {

/// The length of the well-formed UTF-8 sequence at `text[i]` (2 to 4), 0 when there is
/// none (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut
/// short); its code point in `cp`.
std::size_t utf8_sequence(std::string_view text, std::size_t i, unsigned& cp) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  unsigned c = byte(0);
  std::size_t n = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 0;
  if (n == 0 || i + n > text.size()) return 0;
  // The second byte's range depends on the first (RFC 3629's table).
  unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
  unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  cp = c & (0x7Fu >> n);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (byte(k) & 0x3Fu);
  return n;
}

/// Code points that steer how text is laid out rather than show: the C1 controls, the
/// bidirectional marks, embeddings, overrides and isolates, and the line and paragraph
/// separators (a log viewer may break a line there).
bool steers_layout(unsigned cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/// printable(), or with `json` printable_json(): the same code points escaped, but as
/// JSON writes them (\u00NN for the controls and DEL).
std::string escaped(std::string_view text, bool keep_newlines, bool json) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c >= 0x20 && c != 0x7F)
        out += static_cast<char>(c);
      else if (c == '\n')
        out += keep_newlines ? "\n" : "\\n";
      else if (json)
        out += hex_escape("\\u%04x", c);
      else if (c == '\r')
        out += "\\r";
      else if (c == '\t')
        out += keep_newlines ? "\t" : "\\t";
      else
        out += hex_escape("\\x%02x", c);
      continue;
    }
    unsigned cp = 0;
    auto n = utf8_sequence(text, i, cp);
    if (n == 0) {  // not UTF-8: a terminal may take a lone byte for a C1 control
      out += hex_escape("\\x%02x", c);
      continue;
    }
    if (steers_layout(cp))
      out += hex_escape("\\u%04x", cp);
    else
      out.append(text.substr(i, n));
    i += n - 1;
  }
  return out;
}

}  // namespace

std::string printable(std::string_view text, bool keep_newlines) {
  return escaped(text, keep_newlines, false);
}

std::string printable_json(std::string_view json) { return escaped(json, true, true); }

}  // namespace beehive
