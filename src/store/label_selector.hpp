#pragma once

// Kubernetes labels and label selectors: validation of label keys and values, the
// selector syntax (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, comma = AND),
// in-memory matching (for the watch hub) and SQL generation over the `labels` table
// (for the SQLite store), so that both places select exactly the same objects.
//
// Contract: every malformed key, value or selector throws Error(errc::invalid_argument)
// with a message naming the bad part; a parsed LabelSelector holds only valid keys and
// values. Matching follows Kubernetes: `!=` and `notin` also match an object without
// the key.
//
// Pure functions over plain values, no shared state: thread-safe. A LabelSelector is an
// immutable value once parsed; its const members may run on several threads at once.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/object_meta.hpp>

namespace beehive::store {

/// Throws invalid_argument unless every key and value follows Kubernetes' rules:
/// key = [prefix '/'] name; prefix a DNS-1123 subdomain (<= 253 chars, lowercase alnum,
/// '-' and '.', each dot-separated part starting and ending alnum); name <= 63 chars,
/// [A-Za-z0-9] at both ends, '-', '_', '.' and alnum between; value empty or a name by
/// the same rule.
void validate_labels(const Labels& labels);
/// Throws invalid_argument unless `key` is a valid label key (see validate_labels).
void validate_label_key(std::string_view key);
/// Throws invalid_argument unless `value` is empty or a valid name (see validate_labels).
void validate_label_value(std::string_view value);

/// One clause of a selector; a selector is the AND of its requirements.
struct LabelRequirement {
  enum class Op { equals, not_equals, in, not_in, exists, not_exists };
  Op op;
  std::string key;
  /// One for equals/not_equals, >= 1 for in/not_in (sorted, no duplicates), none for
  /// exists/not_exists.
  std::vector<std::string> values;

  /// Whether `labels` satisfy this requirement (absent key: only not_equals, not_in
  /// and not_exists match).
  bool matches(const Labels& labels) const;
  /// The requirement in selector syntax, e.g. `a in (x,y)`; parses back to itself.
  std::string to_string() const;

  friend bool operator==(const LabelRequirement&, const LabelRequirement&) = default;
};

/// A parsed selector; empty selects everything.
class LabelSelector {
 public:
  LabelSelector() = default;

  /// Kubernetes' syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
  /// comma = AND, whitespace allowed around tokens. `a=` and `a!=` compare with the empty
  /// value. Keys and values are validated as by validate_labels; `in ()` with no
  /// values, dangling or doubled commas, unbalanced parentheses and unknown operators
  /// (`>`, `<`, ...) throw invalid_argument. The empty string (or only whitespace) is
  /// the empty selector.
  ///
  /// The result is canonical: requirements sorted (by key, then operator, then values)
  /// without duplicates, `==` read as `=`, in/notin values sorted without duplicates.
  /// So two texts that differ only in such ways give equal selectors and equal
  /// to_string().
  static LabelSelector parse(std::string_view text);

  bool empty() const { return requirements_.empty(); }
  /// K8s semantics: every requirement must match; `!=` and `notin` match when the key
  /// is absent. The empty selector matches everything.
  bool matches(const Labels& labels) const;
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }
  /// Canonical text (for messages and continue tokens): requirements joined by ',',
  /// without spaces except around in/notin. parse(to_string()) gives an equal selector.
  std::string to_string() const;

  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;

 private:
  std::vector<LabelRequirement> requirements_;
};

/// `text` parsed (as LabelSelector::parse), or null when it selects everything (empty, or
/// only whitespace): a caller then treats it exactly as no selector at all.
std::shared_ptr<const LabelSelector> parse_selector(std::string_view text);

/// A WHERE fragment and its bind values, in order of the `?` placeholders.
struct SqlFilter {
  std::string where;
  std::vector<std::string> binds;
};

/// SQL for a selector over objects: one condition per requirement, joined by " AND ",
/// each on `id_column` (trusted SQL text from the caller, not user input), e.g. `a=b`:
///   `<id_column> IN (SELECT object_id FROM labels WHERE key = ? AND value = ?)`
/// `a!=b`: the same with NOT IN; `a in (x,y)`: `... key = ? AND value IN (?, ?)`; notin:
/// NOT IN of that; `a`: `<id_column> IN (SELECT object_id FROM labels WHERE key = ?)`;
/// `!a`: NOT IN. Returns an empty `where` (and no binds) for the empty selector.
/// Targets `labels(object_id INTEGER, key TEXT, value TEXT, PRIMARY KEY (key, value,
/// object_id)) WITHOUT ROWID`: each subquery is a lookup on that key. Wrap `where` in
/// parentheses before combining it with OR.
SqlFilter to_sql(const LabelSelector& s, std::string_view id_column);

/// The same for `requirements`, each as a correlated test of the row at hand instead:
/// `EXISTS (SELECT 1 FROM labels WHERE object_id = <id_column> AND key = ? ...)`, or
/// NOT EXISTS. For a read that walks rows in its own order and stops at a limit: each
/// test is one lookup, where an IN list would be built whole first.
SqlFilter to_correlated_sql(const std::vector<LabelRequirement>& requirements,
                            std::string_view id_column);

}  // namespace beehive::store
