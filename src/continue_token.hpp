#pragma once

// The continue token of Client::list_page: opaque to users, it carries the id the
// previous page ended at. Malformed text is invalid_argument.
//
// Pure functions: safe on any thread.

#include <string>
#include <string_view>

#include <beehive/group_kind.hpp>

namespace beehive::detail {

std::string make_continue_token(ObjectID after);
/// 0 for the empty token (the first page).
ObjectID parse_continue_token(std::string_view token);

}  // namespace beehive::detail
