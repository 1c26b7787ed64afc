#include <beehive/logger.hpp>

#include <cstdio>
#include <mutex>

#include "terminal_text.hpp"

namespace beehive {

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "info";
}

namespace {

/// A field's value as logfmt writes it: bare when it is one plain word, else quoted,
/// with quotes and backslashes escaped (so that an escape printable() writes is never
/// taken for text that looked like one).
std::string logfmt_value(std::string_view v) {
  auto shown = printable(v);
  if (!v.empty() && shown == v && v.find_first_of(" \"=\\") == std::string_view::npos) return shown;
  std::string quoted;
  for (char c : v) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return '"' + printable(quoted) + '"';
}

/// A field's key as logfmt reads one: a plain word, each character that would end it or
/// break the line written as `_`.
std::string logfmt_key(std::string_view k) {
  auto shown = printable(k);
  for (auto& c : shown)
    if (c == ' ' || c == '=' || c == '"' || c == '\\') c = '_';
  return shown.empty() ? std::string("_") : shown;
}

}  // namespace

Logger stderr_logger(LogLevel min) {
  return [min](LogLevel level, std::string_view message, const LogFields& fields) {
    if (level < min) return;
    // One line per entry, whatever the text: a newline or an escape sequence in a
    // reason (an exception's message) is written as an escape. A message that a reader
    // would take for fields (`x=y`) is quoted.
    std::string line = "beehive: ";
    line += message.find_first_of("=\"") == std::string_view::npos ? printable(message)
                                                                   : logfmt_value(message);
    for (auto& [k, v] : fields)
      line.append(" ").append(logfmt_key(k)).append("=").append(logfmt_value(v));
    line += "\n";
    static std::mutex mu;  // whole lines, even from several threads
    std::lock_guard lk(mu);
    std::fputs(line.c_str(), stderr);
  };
}

}  // namespace beehive
