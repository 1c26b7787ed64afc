#include "selector.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include "database.hpp"
#include "failure.hpp"
#include "terminal_text.hpp"

namespace beehive::ctl {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool iequals(const std::string& a, const std::string& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

/// The kinds' names; with `to_choose`, each as it selects that kind alone among them
/// (the core group's with its dot: "Widget." beside "Widget.acme.com").
std::string join(const std::vector<GroupKind>& kinds, bool to_choose = false) {
  std::string out;
  for (auto& gk : kinds) {
    auto name = to_choose && gk.group.empty() ? gk.kind + "." : kind_name(gk);
    // Stored names may hold any character: escaped, so that a newline in one cannot
    // forge a line of the message (main prints messages with their own newlines kept).
    out += (out.empty() ? "" : ", ") + printable(name);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::string kind_name(const GroupKind& gk) {
  if (gk.group.empty() && gk.kind.find('.') != std::string::npos) return gk.kind + ".";
  return to_string(gk);
}

std::string plural(const std::string& kind) {
  auto k = lower(kind);
  if (k.empty()) return k;
  for (auto suffix : {"s", "x", "z", "ch", "sh"})
    if (ends_with(k, suffix)) return k + "es";
  if (k.size() >= 2 && k.back() == 'y' &&
      std::string("aeiou").find(k[k.size() - 2]) == std::string::npos)
    return k.substr(0, k.size() - 1) + "ies";
  return k + "s";
}

void check_kind_text(const std::string& text) {
  if (text.empty() || text[0] == '.') throw UsageError("empty kind in \"" + text + "\"");
}

GroupKind resolve_kind(Database& db, const std::string& text, bool allow_absent) {
  check_kind_text(text);
  // Any text is a kind or a group to the library, dots included ("Foo.v1" in the core
  // group): each dot of the text may be the one that ends the kind, and the whole text
  // may be a kind named without its group. Every reading is tried.
  struct Reading {
    std::string kind;
    std::optional<std::string> group;  // absent: any group
  };
  std::vector<Reading> readings{{text, std::nullopt}};
  for (auto dot = text.find('.'); dot != std::string::npos; dot = text.find('.', dot + 1))
    readings.push_back({text.substr(0, dot), text.substr(dot + 1)});

  std::vector<GroupKind> present;
  for (auto& s : db.kinds()) present.push_back(s.gk);
  auto in_group = [](const GroupKind& gk, const Reading& r) {
    return !r.group || iequals(gk.group, *r.group);
  };
  auto matching = [&](auto same_kind) {
    std::vector<GroupKind> out;
    for (auto& gk : present)
      if (std::any_of(readings.begin(), readings.end(),
                      [&](const Reading& r) { return same_kind(gk, r.kind) && in_group(gk, r); }))
        out.push_back(gk);
    return out;
  };
  auto matches =
      matching([](const GroupKind& gk, const std::string& kind) { return iequals(gk.kind, kind); });
  // Plurals only when no kind is spelled so: a kind "Bus" beside a kind "Bu" stays "Bus".
  if (matches.empty())
    matches = matching([](const GroupKind& gk, const std::string& kind) {
      return plural(gk.kind) == lower(kind);
    });

  if (matches.size() > 1) {
    // An exact spelling of kind and group wins over case-insensitive look-alikes ("Widget"
    // vs "widget"), and over another reading of the dots.
    std::vector<GroupKind> exact;
    for (auto& gk : matches)
      if (std::any_of(readings.begin(), readings.end(), [&](const Reading& r) {
            return r.group && gk.kind == r.kind && gk.group == *r.group;
          }))
        exact.push_back(gk);
    if (exact.size() == 1) return exact.front();
    throw std::runtime_error("kind \"" + text +
                             "\" is ambiguous; name the group: " + join(matches, true));
  }
  if (matches.size() == 1) return matches.front();
  // Taken literally: the first dot ends the kind, as in most kinds' names.
  if (allow_absent && readings.size() > 1) return {*readings[1].group, readings[1].kind};
  throw NotFound("no objects of kind \"" + text + "\" in " + db.name() +
                 " (kinds present: " + join(present) + ")");
}

std::optional<ObjectID> parse_id(const std::string& token) {
  // from_chars would take a sign; an id is digits only.
  if (token.empty() || token[0] == '-') return std::nullopt;
  ObjectID id = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), id);
  if (ec != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return id;
}

ObjectRow find_object(Database& db, const GroupKind& gk, const std::string& token, unsigned loads) {
  auto& conn = db.reader();
  const auto naming = db.naming();
  std::optional<ObjectRow> by_id, by_slug;
  if (auto id = naming != Naming::slug ? parse_id(token) : std::nullopt) {
    by_id = conn.get(*id, loads);
    if (by_id && (by_id->meta.group != gk.group || by_id->meta.kind != gk.kind)) by_id.reset();
  }
  if (naming != Naming::id) by_slug = conn.get_by_slug(gk, token, loads);
  // Slugs are any text: "1001" may be one object's slug and another's id. Guessing would
  // have `delete` remove the wrong object.
  if (by_id && by_slug && by_id->meta.id != by_slug->meta.id)
    throw std::runtime_error(
        printable(kind_name(gk)) + " \"" + token +
        "\" is ambiguous: it is the id of one object and the slug of another (id " +
        std::to_string(by_slug->meta.id) + "); name it with --by id or --by slug");
  if (by_id) return std::move(*by_id);
  if (by_slug) return std::move(*by_slug);
  const char* what = naming == Naming::id     ? "not an id of the kind"
                     : naming == Naming::slug ? "not a slug of the kind"
                                              : "neither an id nor a slug of the kind";
  throw NotFound(printable(kind_name(gk)) + " \"" + token + "\" not found (" + what + ")");
}

}  // namespace beehive::ctl
