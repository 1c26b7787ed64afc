#include "continue_token.hpp"

#include <charconv>
#include <cstdint>

#include <beehive/errors.hpp>

#include "quoted_excerpt.hpp"

namespace beehive::detail {

namespace {

// A version prefix, so that a later format can tell its tokens from these; numbers in
// base 36 keep tokens short and not mistaken for an id. "bh1." tokens (an id alone)
// came before the fingerprint.
constexpr std::string_view kPrefix = "bh2.";

// FNV-1a over the list's identity: not a secret, only a guard against mix-ups.
std::uint64_t fingerprint(const GroupKind& gk, std::string_view selector) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // a separator no UTF-8 text contains
  };
  mix(gk.group);
  mix(gk.kind);
  mix(selector);
  return h;
}

template <class T>
bool parse_base36(std::string_view digits, T& out) {
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out, 36);
  return ec == std::errc() && end == digits.data() + digits.size() && !digits.empty();
}

[[noreturn]] void refuse(std::string_view token, std::string_view why) {
  throw Error(errc::invalid_argument, quoted_excerpt(token) + " " + std::string(why));
}

}  // namespace

std::string make_continue_token(ObjectID after, const GroupKind& gk, std::string_view selector) {
  char digits[32];
  auto id_end = std::to_chars(digits, digits + sizeof digits, after, 36).ptr;
  char fp[32];
  auto fp_end = std::to_chars(fp, fp + sizeof fp, fingerprint(gk, selector), 36).ptr;
  return std::string(kPrefix) + std::string(digits, id_end) + "." + std::string(fp, fp_end);
}

namespace {

struct Parsed {
  ObjectID after = 0;
  std::uint64_t fingerprint = 0;
};

Parsed parse(std::string_view token) {
  constexpr std::string_view malformed = "is not a continue token from list_page";
  if (!token.starts_with(kPrefix)) refuse(token, malformed);
  auto rest = token.substr(kPrefix.size());
  auto dot = rest.find('.');
  Parsed p;
  if (dot == std::string_view::npos || !parse_base36(rest.substr(0, dot), p.after) ||
      p.after <= 0 || !parse_base36(rest.substr(dot + 1), p.fingerprint))
    refuse(token, malformed);
  return p;
}

}  // namespace

ObjectID parse_continue_token(std::string_view token, const GroupKind& gk,
                              std::string_view selector) {
  if (token.empty()) return 0;
  auto p = parse(token);
  if (p.fingerprint != fingerprint(gk, selector))
    refuse(token,
           "is a continue token from another list: pass it to list_page of the kind, and with "
           "the selector, that returned it");
  return p.after;
}

void check_continue_token_form(std::string_view token) {
  if (!token.empty()) parse(token);
}

}  // namespace beehive::detail
