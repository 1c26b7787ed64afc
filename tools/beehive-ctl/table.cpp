#include "table.hpp"

#include <algorithm>

#include "terminal_text.hpp"

namespace beehive::ctl {

std::size_t display_width(const std::string& s) {
  return std::count_if(s.begin(), s.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

namespace {

/// A cell as printed: stored text (a slug, a message) with its control characters escaped.
std::size_t cell_width(const std::string& cell) { return display_width(printable(cell)); }

}  // namespace

std::string format_row(const std::vector<std::string>& row,
                       const std::vector<std::size_t>& widths) {
  std::string line;
  // A cell starts at its column, or two spaces after an overflowing cell before it; the
  // cells after that one are back in their columns as soon as there is room.
  std::size_t column = 0, end = 0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i > 0) {
      auto start = std::max(column, end + 2);
      line.append(start - end, ' ');
      end = start;
    }
    auto cell = printable(row[i]);
    line += cell;
    end += display_width(cell);
    column += (i < widths.size() ? widths[i] : 0) + 2;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

void Table::print(std::ostream& os, const std::string& indent) const {
  std::vector<std::size_t> widths;
  for (auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], cell_width(row[i]));
  }
  for (auto& row : rows_) os << indent << format_row(row, widths) << '\n';
}

StreamTable::StreamTable(std::vector<std::string> header, std::vector<std::size_t> min_widths)
    : header_(std::move(header)), widths_(std::move(min_widths)) {
  fit(header_);
}

void StreamTable::fit(const std::vector<std::string>& row) {
  if (widths_.size() < row.size()) widths_.resize(row.size(), 0);
  for (std::size_t i = 0; i < row.size(); ++i)
    widths_[i] = std::max(widths_[i], cell_width(row[i]));
}

void StreamTable::print_row(std::ostream& os, const std::vector<std::string>& row) const {
  os << format_row(row, widths_) << std::endl;
}

}  // namespace beehive::ctl
