#include "duration.hpp"

#include <cctype>
#include <cstdint>

#include "failure.hpp"

namespace beehive::ctl {

std::chrono::milliseconds parse_duration(const std::string& text) {
  std::size_t i = 0;
  std::int64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (n > (INT64_MAX / 10) / 3'600'000) throw UsageError("duration too long: " + text);
    n = n * 10 + (text[i++] - '0');
  }
  auto unit = text.substr(i);
  if (i == 0) throw UsageError("not a duration: \"" + text + "\" (e.g. 200ms, 2s, 1m)");
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s") return std::chrono::seconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  if (unit == "h") return std::chrono::hours(n);
  throw UsageError("not a duration: \"" + text + "\" (use a unit: ms, s, m or h)");
}

}  // namespace beehive::ctl
