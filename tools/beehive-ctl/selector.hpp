#pragma once

// Naming kinds and objects on the command line.
//
//   KIND[.GROUP]   "Widget", "widget.acme.com", "Widget." (the core group)
//   SLUG|ID        an all-digit token is tried as an id first, then as a slug
//
// The database has no registry of kinds: a kind is known when it has objects.

#include <optional>
#include <string>

#include <beehive/group_kind.hpp>
#include <beehive/object_row.hpp>

namespace beehive::ctl {

class Database;

/// Resolves `text` among the kinds present, case-insensitively. KIND alone matches
/// across groups; several matches throw an error naming each candidate, none throws
/// NotFound naming the kinds present. With `allow_absent` (watch), a KIND.GROUP that
/// has no objects yet is taken literally instead.
GroupKind resolve_kind(Database& db, const std::string& text, bool allow_absent = false);

/// The object of kind `gk` named by `token`; throws NotFound.
ObjectRow find_object(Database& db, const GroupKind& gk, const std::string& token,
                      unsigned loads = 0);

}  // namespace beehive::ctl
