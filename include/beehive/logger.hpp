#pragma once

/// Logging: beehive reports what an operator should know (a quarantined row, a failed
/// reconcile and its next retry, an actor restarted by the supervisor, a failed garbage
/// collection) through a `Logger`, with structured fields (object id, kind, reason,
/// ...). Give one with `with_logger` to the Beehive; the default writes warnings and
/// errors to stderr as "beehive: <message> key=value ...", one line each: a value that is
/// not one plain word is quoted ("a b"), with `"` and `\` escaped, and control and
/// bidirectional characters are written as escapes (`\n`, `\x1b`, `\u202e`). A message
/// holding `=` or `"` is quoted as a value is, so that it never reads as fields; a key is
/// written as one word (a space, `=`, `"` or `\` in it as `_`).
///
/// A logger is called from beehive's threads, possibly several at once: it must be
/// thread-safe and should not block for long. An exception it throws is swallowed:
/// a faulty logger never takes down a controller, a write or the supervisor.

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace beehive {

enum class LogLevel { debug, info, warning, error };

/// "debug", "info", "warning" or "error".
const char* to_string(LogLevel level) noexcept;

using LogFields = std::vector<std::pair<std::string, std::string>>;

using Logger = std::function<void(LogLevel, std::string_view message, const LogFields& fields)>;

/// Writes entries at `min` or above to stderr, one line each.
Logger stderr_logger(LogLevel min = LogLevel::warning);

}  // namespace beehive
