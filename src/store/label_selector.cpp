#include "store/label_selector.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <tuple>
#include <utility>

#include <beehive/errors.hpp>

#include "quoted_excerpt.hpp"

namespace beehive::store {

namespace {

constexpr std::size_t max_name_length = 63;
constexpr std::size_t max_prefix_length = 253;
constexpr std::size_t max_selector_requirements = 256;
constexpr std::size_t max_selector_values = 4096;

[[noreturn]] void fail(const std::string& message) { throw Error(errc::invalid_argument, message); }

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Why `name` is not a valid label name, or nullopt when it is. An empty name is
// refused here; callers that accept it (values) check first.
std::optional<std::string> name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > max_name_length) {
    return "must be at most 63 characters (has " + std::to_string(name.size()) + ")";
  }
  if (!is_alnum(name.front()) || !is_alnum(name.back())) {
    return "must start and end with [A-Za-z0-9]";
  }
  for (char c : name) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') {
      return "may contain only [A-Za-z0-9], '-', '_' and '.'";
    }
  }
  return std::nullopt;
}

std::optional<std::string> prefix_problem(std::string_view prefix) {
  if (prefix.empty()) return "must not be empty";
  if (prefix.size() > max_prefix_length) {
    return "must be at most 253 characters (has " + std::to_string(prefix.size()) + ")";
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = prefix.find('.', start);
    const std::string_view part =
        prefix.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || !is_lower_alnum(part.front()) || !is_lower_alnum(part.back())) {
      return "must be a DNS subdomain: each '.'-separated part starts and ends with [a-z0-9]";
    }
    for (char c : part) {
      if (!is_lower_alnum(c) && c != '-') {
        return "must be a DNS subdomain: only [a-z0-9], '-' and '.'";
      }
    }
    if (dot == std::string_view::npos) return std::nullopt;
    start = dot + 1;
  }
}

std::string_view op_text(LabelRequirement::Op op) {
  using Op = LabelRequirement::Op;
  switch (op) {
    case Op::equals:
      return "=";
    case Op::not_equals:
      return "!=";
    case Op::in:
      return " in ";
    case Op::not_in:
      return " notin ";
    case Op::exists:
    case Op::not_exists:
      break;
  }
  return "";
}

// The selector lexer and parser, after Kubernetes' (apimachinery/pkg/labels/selector.go):
// identifiers are runs of anything but whitespace and the special characters, so a bad
// character ends up in a key or value and is reported by its validation.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::vector<LabelRequirement> parse() {
    std::vector<LabelRequirement> out;
    if (peek().kind == Kind::end) return out;  // only whitespace: the empty selector
    while (true) {
      out.push_back(requirement());
      const Token t = next();
      if (t.kind == Kind::end) return out;
      if (t.kind != Kind::comma) error(t, "expected ',' or the end after a requirement");
    }
  }

 private:
  enum class Kind {
    end,
    identifier,
    comma,
    open,
    close,
    equals,         // '=' or '=='
    not_equals,     // '!='
    bang,           // '!'
    unknown_symbol  // '<', '>' and the like: operators we do not support
  };
  struct Token {
    Kind kind;
    std::string_view text;
    std::size_t pos;
  };

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
  static bool is_special(char c) {
    return c == ',' || c == '(' || c == ')' || c == '=' || c == '!' || c == '<' || c == '>';
  }

  Token lex() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
    const std::size_t start = pos_;
    if (pos_ == text_.size()) return {Kind::end, {}, start};
    const char c = text_[pos_];
    auto symbol = [&](Kind k, std::size_t len) {
      pos_ += len;
      return Token{k, text_.substr(start, len), start};
    };
    const bool then_equals = pos_ + 1 < text_.size() && text_[pos_ + 1] == '=';
    switch (c) {
      case ',':
        return symbol(Kind::comma, 1);
      case '(':
        return symbol(Kind::open, 1);
      case ')':
        return symbol(Kind::close, 1);
      case '=':
        return symbol(Kind::equals, then_equals ? 2 : 1);
      case '!':
        return then_equals ? symbol(Kind::not_equals, 2) : symbol(Kind::bang, 1);
      case '<':
      case '>':
        return symbol(Kind::unknown_symbol, then_equals ? 2 : 1);
      default:
        break;
    }
    while (pos_ < text_.size() && !is_space(text_[pos_]) && !is_special(text_[pos_])) ++pos_;
    return {Kind::identifier, text_.substr(start, pos_ - start), start};
  }

  Token peek() {
    if (!peeked_) peeked_ = lex();
    return *peeked_;
  }
  Token next() {
    const Token t = peek();
    peeked_.reset();
    return t;
  }

  [[noreturn]] void error(const Token& t, std::string_view what) const {
    const std::string found = t.kind == Kind::end ? "the end" : quoted_excerpt(t.text);
    fail("label selector " + quoted_excerpt(text_) + ": " + std::string(what) + ", found " + found +
         " at position " + std::to_string(t.pos));
  }

  std::string key(const Token& t) const {
    if (t.kind != Kind::identifier) error(t, "expected a label key");
    validate_label_key(t.text);
    return std::string(t.text);
  }

  LabelRequirement requirement() {
    using Op = LabelRequirement::Op;
    Token t = next();
    if (t.kind == Kind::bang) return {Op::not_exists, key(next()), {}};
    std::string k = key(t);
    t = peek();
    if (t.kind == Kind::end || t.kind == Kind::comma) return {Op::exists, std::move(k), {}};
    next();
    if (t.kind == Kind::equals || t.kind == Kind::not_equals) {
      const Op op = t.kind == Kind::equals ? Op::equals : Op::not_equals;
      // As in Kubernetes, `a=` followed by ',' or the end compares with the empty value,
      // the only way to select it.
      const Token v = peek();
      if (v.kind == Kind::end || v.kind == Kind::comma) return {op, std::move(k), {""}};
      return {op, std::move(k), {value(next())}};
    }
    if (t.kind == Kind::identifier && (t.text == "in" || t.text == "notin")) {
      const Op op = t.text == "in" ? Op::in : Op::not_in;
      return {op, std::move(k), value_list()};
    }
    error(t, "unknown operator (expected =, ==, !=, in or notin)");
  }

  std::string value(const Token& t) const {
    if (t.kind != Kind::identifier) error(t, "expected a label value");
    validate_label_value(t.text);
    return std::string(t.text);
  }

  std::vector<std::string> value_list() {
    Token t = next();
    if (t.kind != Kind::open) error(t, "expected '(' after in/notin");
    std::vector<std::string> values;
    if (peek().kind == Kind::close) error(peek(), "in/notin needs at least one value");
    while (true) {
      values.push_back(value(next()));
      t = next();
      if (t.kind == Kind::close) break;
      if (t.kind != Kind::comma) error(t, "expected ',' or ')' in a value list");
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::optional<Token> peeked_;
};

auto order_key(const LabelRequirement& r) { return std::tie(r.key, r.op, r.values); }

}  // namespace

void validate_label_key(std::string_view key) {
  const std::size_t slash = key.find('/');
  const std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (slash != std::string_view::npos) {
    if (name.find('/') != std::string_view::npos) {
      fail("label key " + quoted_excerpt(key) + ": at most one '/' (prefix/name)");
    }
    if (auto p = prefix_problem(key.substr(0, slash))) {
      fail("label key " + quoted_excerpt(key) + ": prefix " + *p);
    }
  }
  if (auto p = name_problem(name)) fail("label key " + quoted_excerpt(key) + ": name " + *p);
}

void validate_label_value(std::string_view value) {
  if (value.empty()) return;
  if (auto p = name_problem(value)) fail("label value " + quoted_excerpt(value) + ": " + *p);
}

void validate_labels(const Labels& labels) {
  for (const auto& [key, value] : labels) {
    validate_label_key(key);
    try {
      validate_label_value(value);
    } catch (const Error& e) {
      // Name the key too: the same bad value may appear under several keys.
      fail(e.message() + " (under label key " + quoted_excerpt(key) + ")");
    }
  }
}

bool LabelRequirement::matches(const Labels& labels) const {
  const auto it = labels.find(key);
  const bool present = it != labels.end();
  auto listed = [&] {
    return present && std::binary_search(values.begin(), values.end(), it->second);
  };
  switch (op) {
    case Op::equals:
      return present && it->second == values.at(0);
    case Op::not_equals:
      return !present || it->second != values.at(0);
    case Op::in:
      return listed();
    case Op::not_in:
      return !listed();
    case Op::exists:
      return present;
    case Op::not_exists:
      return !present;
  }
  return false;
}

std::string LabelRequirement::to_string() const {
  std::string out;
  if (op == Op::not_exists) out += '!';
  out += key;
  out += op_text(op);
  if (op == Op::equals || op == Op::not_equals) {
    out += values.at(0);
  } else if (op == Op::in || op == Op::not_in) {
    out += '(';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += ',';
      out += values[i];
    }
    out += ')';
  }
  return out;
}

std::shared_ptr<const LabelSelector> parse_selector(std::string_view text) {
  auto s = LabelSelector::parse(text);
  if (s.empty()) return nullptr;
  return std::make_shared<const LabelSelector>(std::move(s));
}

LabelSelector LabelSelector::parse(std::string_view text) {
  LabelSelector s;
  s.requirements_ = Parser(text).parse();
  auto& reqs = s.requirements_;
  std::sort(reqs.begin(), reqs.end(),
            [](const auto& a, const auto& b) { return order_key(a) < order_key(b); });
  reqs.erase(std::unique(reqs.begin(), reqs.end()), reqs.end());
  // Each requirement is a subquery and each value a bound parameter: past these bounds
  // the databases refuse the query (SQLite's expression depth of 1 000, PostgreSQL's
  // 65 535 parameters), each at its own size, as a store error.
  std::size_t values = 0;
  for (const auto& r : reqs) values += r.values.size();
  if (reqs.size() > max_selector_requirements || values > max_selector_values)
    fail("label selector " + quoted_excerpt(text) + ": at most " +
         std::to_string(max_selector_requirements) + " requirements and " +
         std::to_string(max_selector_values) + " values in all (has " +
         std::to_string(reqs.size()) + " and " + std::to_string(values) + ")");
  return s;
}

bool LabelSelector::matches(const Labels& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(),
                     [&](const LabelRequirement& r) { return r.matches(labels); });
}

std::string LabelSelector::to_string() const {
  std::string out;
  for (const auto& r : requirements_) {
    if (!out.empty()) out += ',';
    out += r.to_string();
  }
  return out;
}

namespace {

/// One requirement's subquery (`correlated`: a test of the row whose id is in
/// `id_column`, else the ids that satisfy its positive form).
void append_requirement(SqlFilter& f, const LabelRequirement& r, std::string_view id_column,
                        bool correlated) {
  using Op = LabelRequirement::Op;
  // The negated forms negate the positive subquery, which is what makes an absent key
  // match them. NOT IN is safe here: object_id is a PRIMARY KEY column of a WITHOUT ROWID
  // table, so never NULL.
  const bool negated = r.op == Op::not_equals || r.op == Op::not_in || r.op == Op::not_exists;
  if (!f.where.empty()) f.where += " AND ";
  if (correlated) {
    f.where += negated ? "NOT EXISTS (SELECT 1 FROM labels WHERE object_id = "
                       : "EXISTS (SELECT 1 FROM labels WHERE object_id = ";
    f.where += id_column;
    f.where += " AND key = ?";
  } else {
    f.where += id_column;
    f.where += negated ? " NOT IN " : " IN ";
    f.where += "(SELECT object_id FROM labels WHERE key = ?";
  }
  f.binds.push_back(r.key);
  switch (r.op) {
    case Op::equals:
    case Op::not_equals:
      f.where += " AND value = ?";
      f.binds.push_back(r.values.at(0));
      break;
    case Op::in:
    case Op::not_in:
      f.where += " AND value IN (";
      for (std::size_t i = 0; i < r.values.size(); ++i) {
        f.where += i == 0 ? "?" : ", ?";
        f.binds.push_back(r.values[i]);
      }
      f.where += ')';
      break;
    case Op::exists:
    case Op::not_exists:
      break;
  }
  f.where += ')';
}

}  // namespace

SqlFilter to_sql(const LabelSelector& s, std::string_view id_column) {
  SqlFilter f;
  for (const auto& r : s.requirements()) append_requirement(f, r, id_column, false);
  return f;
}

SqlFilter to_correlated_sql(const std::vector<LabelRequirement>& requirements,
                            std::string_view id_column) {
  SqlFilter f;
  for (const auto& r : requirements) append_requirement(f, r, id_column, true);
  return f;
}

}  // namespace beehive::store
