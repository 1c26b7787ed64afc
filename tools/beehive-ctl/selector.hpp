#pragma once

// Naming kinds and objects on the command line.
//
//   KIND[.GROUP]   "Widget", "widgets", "widget.acme.com", "Widgets.acme.com", "Widget."
//                  (the core group); the kind or its English plural, any case
//   SLUG|ID        an all-digit token is tried as an id first, then as a slug
//
// The database has no registry of kinds: a kind is known when it has objects.

#include <optional>
#include <string>

#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>

namespace beehive::ctl {

class Database;

/// Throws UsageError for text that names no kind whatever the database holds (".acme.com").
void check_kind_text(const std::string& text);

/// The kind's plural by the usual English rules, lower-cased: +s; +es after s, x, z, ch
/// or sh; consonant+y -> ies ("widgets", "boxes", "policies"). Kinds carry no plural of
/// their own, so irregular ones ("Person") are named by their kind.
std::string plural(const std::string& kind);

/// Resolves `text` among the kinds present, case-insensitively, by kind or by plural (a
/// kind's own name wins over another kind's plural). KIND alone matches across groups; several
/// matches throw an error naming each candidate, none throws NotFound naming the kinds present.
/// A kind or group holding dots is found too: any dot of `text` may end the kind.
/// With `allow_absent` (watch), a KIND.GROUP that has no objects yet is taken literally
/// instead, split at its first dot.
GroupKind resolve_kind(Database& db, const std::string& text, bool allow_absent = false);

/// How the tool prints a kind: "Kind.group", "Kind" in the core group, and "Kind." for a
/// core-group kind that holds a dot ("Foo.v1." is not kind "Foo" of group "v1"); each
/// reads back through resolve_kind as the kind it names.
std::string kind_name(const GroupKind& gk);

/// `token` as an object id when it is all digits.
std::optional<ObjectID> parse_id(const std::string& token);

/// The object of kind `gk` named by `token`, read as `db.naming()` says; throws NotFound,
/// or std::runtime_error when `token` is one object's id and another's slug.
ObjectRow find_object(Database& db, const GroupKind& gk, const std::string& token,
                      unsigned loads = 0);

}  // namespace beehive::ctl
