#include <beehive/detail/codec.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "json_fast_path.hpp"
#include "storable_text.hpp"

namespace beehive::detail {

namespace {

const std::string too_deep =
    " nests deeper than " + std::to_string(max_json_depth) + " levels of arrays and objects";

/// Whether `text` nests at most max_json_depth deep: brackets outside strings, counted
/// without parsing (nlohmann then parses text whose value nothing recurses over too far).
bool within_depth(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_json_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

/// One pass over JSON text that builds nothing: its syntax, as nlohmann::json::accept
/// checks it, and its integers. nlohmann reads an integer beyond 64 bits as a double,
/// which would store 123456789012345678901234567890 as 1.2345678901234568e+29: such a
/// literal is noted (`big`) and refused rather than rounded.
struct TextCheck {
  using json = nlohmann::json;
  std::string big;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t& literal) {
    if (literal.find_first_of(".eE") != std::string::npos) return true;
    big = literal;
    return false;
  }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(json::string_t&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }
};

}  // namespace

void require_storable(const nlohmann::json& j, std::string_view what) {
  std::vector<std::pair<const nlohmann::json*, int>> todo{{&j, 0}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (v->is_number_float() && !std::isfinite(v->get<double>()))
      throw Error(errc::invalid_argument,
                  std::string(what) + " holds NaN or infinity, which JSON cannot store");
    // A parse that failed without throwing (parse(text, nullptr, false)) gives a
    // discarded value, which prints as no JSON at all; binary prints as another value.
    if (v->is_discarded())
      throw Error(errc::invalid_argument,
                  std::string(what) +
                      " holds a discarded value (text that did not parse as JSON), not JSON");
    if (v->is_binary())
      throw Error(errc::invalid_argument,
                  std::string(what) + " holds binary data, which JSON cannot store");
    if (!v->is_structured()) continue;
    if (depth == max_json_depth) throw Error(errc::invalid_argument, std::string(what) + too_deep);
    for (const auto& item : *v) todo.emplace_back(&item, depth + 1);
  }
}

bool json_within_depth(const nlohmann::json& j) noexcept {
  std::vector<std::pair<const nlohmann::json*, int>> todo{{&j, 0}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    if (depth == max_json_depth) return false;
    for (const auto& item : *v) todo.emplace_back(&item, depth + 1);
  }
  return true;
}

bool json_text_within_depth(std::string_view text) noexcept { return within_depth(text); }

void require_json_text(std::string_view text, std::string_view what) {
  if (!within_depth(text)) throw Error(errc::invalid_argument, std::string(what) + too_deep);
  // accept() takes a NUL after the value for the end of the text; JSON has no NUL outside
  // a string's escapes, and PostgreSQL's text would cut it off.
  TextCheck check;
  if (text.find('\0') != std::string_view::npos || !nlohmann::json::sax_parse(text, &check)) {
    // Its size, not its digits: the number may be a secret (a card number, say).
    if (!check.big.empty())
      throw Error(errc::invalid_argument,
                  std::string(what) + " holds an integer of " +
                      std::to_string(check.big.size() - (check.big[0] == '-')) +
                      " digits, beyond 64 bits, which would lose digits: write it as a string");
    throw Error(errc::invalid_argument, std::string(what) + " is not JSON text");
  }
}

std::string dump_json(const nlohmann::json& j) {
  if (auto text = dump_json_fast(j)) return std::move(*text);
  // Outside the fast path's subset (floats, deep or escaped values): checked first, as
  // dump() would print NaN as null and recurse once per level.
  require_storable(j, "value");
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::invalid_argument, std::string("cannot encode value: ") + e.what());
  }
}

std::string json_wire_text(const nlohmann::json& j) {
  if (j.is_null()) return {};
  if (j.is_discarded()) return "<not JSON: a discarded value>";
  if (!json_within_depth(j)) return "<not JSON: nested too deep>";
  try {
    return j.dump();
  } catch (const nlohmann::json::exception&) {
    return "<not JSON: a string that is not UTF-8>";
  }
}

nlohmann::json json_from_wire_text(const std::string& text) {
  if (text.empty()) return nullptr;
  if (!within_depth(text)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, false);
}

nlohmann::json parse_json(std::string_view text) {
  if (auto j = parse_json_fast(text)) return std::move(*j);
  if (!within_depth(text)) throw Error(errc::decode, "stored JSON" + too_deep);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Where, not what: nlohmann's message quotes the text around the error, which may be
    // a secret, and this message reaches logs and error strings.
    throw Error(errc::decode,
                "stored JSON does not parse (syntax error at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::out_of_range&) {
    // Its message quotes the number (a card number, say): said without it.
    throw Error(errc::decode, "stored JSON does not parse (a number out of range)");
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::decode, std::string("stored JSON does not parse: ") + e.what());
  }
}

void require_readable_version(int stored, int current, bool spec) {
  // 0 means the kind is not versioned: every blob is taken as it is.
  if (current != 0 && stored > current)
    throw Error(errc::schema_version_downgrade,
                std::string(spec ? "spec" : "status") + " written at schema version " +
                    std::to_string(stored) + ", newer than this build's " +
                    std::to_string(current));
}

nlohmann::json load_blob(std::string_view text, int stored, const Migrator* m, bool spec) {
  int current = m ? (spec ? m->schema_version_spec() : m->schema_version_status()) : 0;
  // The version decides before the bytes: a blob from a newer build is a downgrade
  // whatever it holds.
  require_readable_version(stored, current, spec);
  auto j = parse_json(text);
  if (stored == current || current == 0) return j;
  try {
    return spec ? m->convert_spec(stored, std::move(j)) : m->convert_status(stored, std::move(j));
  } catch (const std::exception& e) {
    throw Error(errc::decode, std::string(spec ? "spec" : "status") + " conversion from version " +
                                  std::to_string(stored) + " failed: " + e.what());
  } catch (...) {
    throw Error(errc::decode, std::string(spec ? "spec" : "status") + " conversion from version " +
                                  std::to_string(stored) + " failed");
  }
}

void require_text(std::string_view text, std::string_view what) {
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = utf8_char_at(text, i);
    if (n == 0 && text[i] == '\0')
      throw Error(errc::invalid_argument, std::string(what) + " contains a NUL character");
    if (n == 0) throw Error(errc::invalid_argument, std::string(what) + " is not UTF-8");
    i += n;
  }
}

void rethrow_as(errc code, std::string_view what) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(code, std::string(what) + ": " + e.what());
  } catch (...) {
    throw Error(code, std::string(what));
  }
}

}  // namespace beehive::detail
