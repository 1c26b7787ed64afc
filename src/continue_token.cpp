#include "continue_token.hpp"

#include <charconv>

#include <beehive/errors.hpp>

namespace beehive::detail {

namespace {

// A version prefix, so that a later format can tell its tokens from these; the id in
// base 36 keeps tokens short and not mistaken for an id.
constexpr std::string_view kPrefix = "bh1.";

}  // namespace

std::string make_continue_token(ObjectID after) {
  char digits[32];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, after, 36);
  (void)ec;
  return std::string(kPrefix) + std::string(digits, end);
}

ObjectID parse_continue_token(std::string_view token) {
  if (token.empty()) return 0;
  ObjectID after = 0;
  bool ok = token.starts_with(kPrefix) && token.size() > kPrefix.size();
  if (ok) {
    auto digits = token.substr(kPrefix.size());
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), after, 36);
    ok = ec == std::errc() && end == digits.data() + digits.size() && after > 0;
  }
  if (!ok)
    throw Error(errc::invalid_argument,
                "\"" + std::string(token) + "\" is not a continue token from list_page");
  return after;
}

}  // namespace beehive::detail
