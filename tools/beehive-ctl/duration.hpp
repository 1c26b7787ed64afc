#pragma once

// Durations on the command line: "200ms", "2s", "1m", "1h".

#include <chrono>
#include <string>

namespace beehive::ctl {

/// Throws UsageError for anything but a non-negative integer followed by ms, s, m or h
/// (a unit is required: a bare "5" would be ambiguous between seconds and milliseconds).
std::chrono::milliseconds parse_duration(const std::string& text);

}  // namespace beehive::ctl
