#include "json_fast_path.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace beehive::detail {

namespace {

// Deeper values go to nlohmann, whose parser does not recurse (its printer does: the codec
// refuses values nested beyond max_json_depth before printing them).
constexpr int max_depth = 32;

// Printable ASCII that needs no escape is printed as it is; nlohmann escapes the rest.
bool print_string(const std::string& s, std::string& out) {
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7F) return false;
  }
  out += '"';
  out += s;
  out += '"';
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool document(nlohmann::json& out) {
    skip_ws();
    if (!value(out, 0)) return false;
    skip_ws();
    return p_ == end_;
  }

 private:
  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  bool value(nlohmann::json& out, int depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{':
        return object(out, depth + 1);
      case '[':
        return array(out, depth + 1);
      case '"': {
        std::string s;
        if (!string(s)) return false;
        out = std::move(s);
        return true;
      }
      case 't':
        out = true;
        return literal("true");
      case 'f':
        out = false;
        return literal("false");
      case 'n':
        out = nullptr;
        return literal("null");
      default:
        return number(out);
    }
  }

  // Printable ASCII without escapes; anything else is left to nlohmann (which decodes
  // escapes, checks UTF-8 and rejects control characters).
  bool string(std::string& out) {
    const char* start = ++p_;
    while (p_ != end_) {
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.assign(start, p_);
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    return false;
  }

  // Integers as nlohmann stores them: negative ones as number_integer, the others as
  // number_unsigned. Fractions, exponents and out-of-range values are left to it.
  bool number(nlohmann::json& out) {
    bool negative = p_ != end_ && *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    std::uint64_t v = 0;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
        auto digit = static_cast<std::uint64_t>(*p_ - '0');
        if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
        v = v * 10 + digit;
        ++p_;
      }
    }
    if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E' || (*p_ >= '0' && *p_ <= '9')))
      return false;
    if (!negative) {
      out = v;
      return true;
    }
    constexpr auto min_magnitude =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1;
    if (v > min_magnitude) return false;
    out = v == min_magnitude ? std::numeric_limits<std::int64_t>::min()
                             : -static_cast<std::int64_t>(v);
    return true;
  }

  bool array(nlohmann::json& out, int depth) {
    out = nlohmann::json::array();
    auto& items = out.get_ref<nlohmann::json::array_t&>();
    return sequence(']', depth, [&] { return value(items.emplace_back(), depth); });
  }

  bool object(nlohmann::json& out, int depth) {
    out = nlohmann::json::object();
    auto& members = out.get_ref<nlohmann::json::object_t&>();
    return sequence('}', depth, [&] {
      std::string key;
      if (p_ == end_ || *p_ != '"' || !string(key)) return false;
      skip_ws();
      if (p_ == end_ || *p_++ != ':') return false;
      skip_ws();
      // A repeated key keeps its last value, as nlohmann's parser does.
      return value(members[std::move(key)], depth);
    });
  }

  // The bracket after the opening one: `item`s separated by commas up to `close`.
  template <class Item>
  bool sequence(char close, int depth, Item item) {
    if (depth > max_depth) return false;
    ++p_;
    skip_ws();
    if (p_ != end_ && *p_ == close) {
      ++p_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (!item()) return false;
      skip_ws();
      if (p_ == end_) return false;
      if (*p_ == close) {
        ++p_;
        return true;
      }
      if (*p_++ != ',') return false;
    }
  }

  const char* p_;
  const char* end_;
};

bool print(const nlohmann::json& j, std::string& out, int depth) {
  using value_t = nlohmann::json::value_t;
  switch (j.type()) {
    case value_t::null:
      out += "null";
      return true;
    case value_t::boolean:
      out += j.get_ref<const nlohmann::json::boolean_t&>() ? "true" : "false";
      return true;
    case value_t::number_integer:
      out += std::to_string(j.get_ref<const nlohmann::json::number_integer_t&>());
      return true;
    case value_t::number_unsigned:
      out += std::to_string(j.get_ref<const nlohmann::json::number_unsigned_t&>());
      return true;
    case value_t::string:
      return print_string(j.get_ref<const nlohmann::json::string_t&>(), out);
    case value_t::array: {
      if (depth >= max_depth) return false;
      out += '[';
      bool first = true;
      for (const auto& item : j.get_ref<const nlohmann::json::array_t&>()) {
        if (!std::exchange(first, false)) out += ',';
        if (!print(item, out, depth + 1)) return false;
      }
      out += ']';
      return true;
    }
    case value_t::object: {
      if (depth >= max_depth) return false;
      out += '{';
      bool first = true;
      for (const auto& [key, item] : j.get_ref<const nlohmann::json::object_t&>()) {
        if (!std::exchange(first, false)) out += ',';
        if (!print_string(key, out)) return false;
        out += ':';
        if (!print(item, out, depth + 1)) return false;
      }
      out += '}';
      return true;
    }
    default:  // floating point (nlohmann's own shortest form), binary, discarded
      return false;
  }
}

}  // namespace

std::optional<std::string> dump_json_fast(const nlohmann::json& j) {
  std::string out;
  if (!print(j, out, 0)) return std::nullopt;
  return out;
}

std::optional<nlohmann::json> parse_json_fast(std::string_view text) {
  nlohmann::json out;
  if (!Parser(text).document(out)) return std::nullopt;
  return out;
}

}  // namespace beehive::detail
