#include "duration.hpp"

#include <cctype>
#include <cstdint>

#include "failure.hpp"

namespace beehive::ctl {

std::chrono::milliseconds parse_duration(const std::string& text) {
  std::size_t i = 0;
  std::int64_t n = 0;
  auto too_long = [&] { return UsageError("duration too long: " + text); };
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    int digit = text[i++] - '0';
    if (n > (INT64_MAX - digit) / 10) throw too_long();
    n = n * 10 + digit;
  }
  auto unit = text.substr(i);
  if (i == 0) throw UsageError("not a duration: \"" + text + "\" (e.g. 200ms, 2s, 1m)");
  std::int64_t ms_per_unit = 0;
  if (unit == "ms") ms_per_unit = 1;
  if (unit == "s") ms_per_unit = 1000;
  if (unit == "m") ms_per_unit = 60'000;
  if (unit == "h") ms_per_unit = 3'600'000;
  if (ms_per_unit == 0)
    throw UsageError("not a duration: \"" + text + "\" (use a unit: ms, s, m or h)");
  // Every value whose milliseconds fit, and none that would wrap.
  if (n > INT64_MAX / ms_per_unit) throw too_long();
  return std::chrono::milliseconds(n * ms_per_unit);
}

}  // namespace beehive::ctl
