#pragma once

// Splitting beehive-ctl's output in tests: its lines, and a line's whitespace-separated
// fields.

#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace beehive::test {

/// Whitespace-separated fields of a line.
inline std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace beehive::test
