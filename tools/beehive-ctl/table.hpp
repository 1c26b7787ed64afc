#pragma once

// Column-aligned text tables, as kubectl prints them: a header row in capitals, two
// spaces between columns, the last column unpadded.

#include <ostream>
#include <string>
#include <vector>

namespace beehive::ctl {

/// A table whose widths come from all its rows, printed once they are all known.
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

/// A table printed a row at a time as rows arrive (watch): the widths are fixed when the
/// header is printed, so later rows line up with earlier ones. A cell wider than its
/// column is printed whole and pushes the rest of its row right (still two spaces
/// apart): misaligned beats truncated.
class StreamTable {
 public:
  /// `min_widths[i]` is column i's width at least; the header's own widths count too.
  StreamTable(std::vector<std::string> header, std::vector<std::size_t> min_widths);
  /// Widens columns to fit `row`; only before print_header (rows known up front).
  void fit(const std::vector<std::string>& row);
  void print_header(std::ostream& os) const { print_row(os, header_); }
  /// Prints and flushes the line: whoever reads the stream sees it at once.
  void print_row(std::ostream& os, const std::vector<std::string>& row) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::size_t> widths_;
};

/// Width on a terminal, counting UTF-8 code points (the timeline's ✓ and ✗).
std::size_t display_width(const std::string& s);

/// One line of cells padded to `widths`, two spaces apart, without trailing spaces; each
/// cell printable() (control characters escaped).
std::string format_row(const std::vector<std::string>& row, const std::vector<std::size_t>& widths);

}  // namespace beehive::ctl
