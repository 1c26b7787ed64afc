#pragma once

// The continue token of Client::list_page: opaque to users, it carries the id the
// previous page ended at and a fingerprint of the list it came from (group, kind and
// selector text), so that a token handed to another list is refused rather than
// silently skipping that list's ids below it. Malformed or foreign text is
// invalid_argument.
//
// Pure functions: safe on any thread.

#include <string>
#include <string_view>

#include <beehive/group_kind.hpp>

namespace beehive::detail {

std::string make_continue_token(ObjectID after, const GroupKind& gk, std::string_view selector);
/// 0 for the empty token (the first page).
ObjectID parse_continue_token(std::string_view token, const GroupKind& gk,
                              std::string_view selector);
/// Checks the token's form only (for a command line checked before its list is known).
void check_continue_token_form(std::string_view token);

}  // namespace beehive::detail
