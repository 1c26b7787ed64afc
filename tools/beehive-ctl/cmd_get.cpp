// `get KIND[.GROUP] [SLUG|ID]`: a table of objects, or the objects as JSON.
// `-l SELECTOR`, `--owner KIND/NAME`, `--limit N` and `--continue TOKEN` narrow and page
// the listing; the database selects (Reader::list_where), so a page is one query.

#include <exception>
#include <iostream>
#include <optional>

#include <beehive/errors.hpp>
#include <beehive/options.hpp>

#include "commands.hpp"
#include "continue_token.hpp"
#include "database.hpp"
#include "failure.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "store/label_selector.hpp"

namespace beehive::ctl {

namespace {

/// The library's invalid_argument for command-line text is a usage error here.
template <class Fn>
auto as_usage(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    if (e.code() != make_error_code(errc::invalid_argument)) throw;
    throw UsageError(e.message().empty() ? e.what() : e.message());
  }
}

store::LabelSelector parse_selector(const std::string& text) {
  return as_usage([&] { return store::LabelSelector::parse(text); });
}

/// The token's list is the kind, the selector and the owner: a token from another
/// listing is refused rather than skipping ids of this one. The selection and the owner
/// resolved, not their spelling (as the library's tokens): `cluster/prod` and
/// `clusters/2` name one list.
std::string token_scope(const store::LabelSelector& selector, std::optional<ObjectID> owner) {
  return selector.to_string() + (owner ? "\x01owner=" + std::to_string(*owner) : std::string());
}

ObjectID parse_token(const GetOptions& o, const GroupKind& gk, const std::string& scope) {
  try {
    return detail::parse_continue_token(o.continue_token, gk, scope);
  } catch (const Error&) {
    throw UsageError("--continue: \"" + o.continue_token.substr(0, 40) +
                     (o.continue_token.size() > 40 ? "..." : "") +
                     "\" is not a token of this listing: pass it with the kind, --selector and "
                     "--owner of the command that printed it");
  }
}

/// KIND[.GROUP]/SLUG|ID, split at the first '/' (the usual kind has none). "KIND/" names
/// the empty slug, which is a slug like any other.
std::pair<std::string, std::string> split_owner(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0)
    throw UsageError("--owner takes KIND/NAME, not \"" + text + "\"");
  return {text.substr(0, slash), text.substr(slash + 1)};
}

/// The owner `text` names. Kinds and slugs are any text to the library, '/' included:
/// each '/' is tried as the separator, first to last, and the first split that names an
/// object wins; when none does, the first split's error is the answer.
ObjectID resolve_owner(Database& db, const std::string& text) {
  auto slash = split_owner(text).first.size();
  std::exception_ptr first;
  for (; slash != std::string::npos; slash = text.find('/', slash + 1)) {
    try {
      return find_object(db, resolve_kind(db, text.substr(0, slash)), text.substr(slash + 1))
          .meta.id;
    } catch (const NotFound&) {
      if (!first) first = std::current_exception();
    }
  }
  std::rethrow_exception(first);
}

}  // namespace

void check_get_usage(const GetOptions& o) {
  check_kind_text(o.kind);
  if (o.object && o.selecting())
    throw UsageError("a NAME cannot be combined with -l, --owner, --limit or --continue");
  parse_selector(o.selector);
  as_usage([&] { detail::check_continue_token_form(o.continue_token); });
  if (o.owner) check_kind_text(split_owner(*o.owner).first);
}

int run_get(Database& db, const GetOptions& o, std::ostream& out) {
  check_get_usage(o);
  Database::Snapshot snapshot(db);
  auto gk = resolve_kind(db, o.kind);
  // JSON carries the edges too; the table has no column for them.
  unsigned loads = o.output == Output::json ? LoadOption::owner | LoadOption::dependencies |
                                                  LoadOption::dependents | LoadOption::owned
                                            : 0;
  std::vector<ObjectRow> rows;
  std::string next_token;  // non-empty: another page follows
  if (o.object) {
    rows.push_back(find_object(db, gk, *o.object, loads));
  } else if (!o.selecting()) {
    rows = db.reader().list(gk, loads);
  } else {
    store::ListQuery q;
    q.selector = std::make_shared<store::LabelSelector>(parse_selector(o.selector));
    if (o.owner) q.owner = resolve_owner(db, *o.owner);
    auto scope = token_scope(*q.selector, q.owner);
    q.after = parse_token(o, gk, scope);
    q.set_page(o.limit);
    rows = db.reader().list_where(gk, q, loads);
    if (o.limit != 0 && rows.size() > o.limit) {
      rows.resize(o.limit);
      next_token = detail::make_continue_token(rows.back().meta.id, gk, scope);
    }
  }

  bool paged = o.limit != 0 || !o.continue_token.empty();
  if (o.output == Output::json) {
    Json all = Json::array();
    for (auto& r : rows) all.push_back(object_json(r, db.conditions(r.meta.id)));
    // One object asked for by name is printed bare, a listing as an array; a page as
    // {"items", "continue"} (continue null on the last page).
    if (paged)
      out << json_output(Json{{"items", std::move(all)},
                              {"continue", next_token.empty() ? Json() : Json(next_token)}})
          << '\n';
    else
      out << json_output(o.object ? all.front() : all) << '\n';
    return 0;
  }
  auto now = std::chrono::system_clock::now();
  auto t = object_table();
  for (auto& r : rows) add_object_row(t, r, now);
  t.print(out);
  // On stderr, so that stdout stays the table alone (a pipe to awk or sort sees rows).
  if (!next_token.empty()) std::cerr << "continue: " << next_token << '\n';
  return 0;
}

}  // namespace beehive::ctl
