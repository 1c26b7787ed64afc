#pragma once

// Column-aligned text tables, as kubectl prints them: a header row in capitals, two
// spaces between columns, the last column unpadded.

#include <ostream>
#include <string>
#include <vector>

namespace beehive::ctl {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.size() == 1; }
  /// Every line starts with `indent`.
  void print(std::ostream& os, const std::string& indent = "") const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

/// Width on a terminal, counting UTF-8 code points (the timeline's ✓ and ✗).
std::size_t display_width(const std::string& s);

}  // namespace beehive::ctl
