#include <beehive/errors.hpp>

namespace beehive {

namespace {

class Category : public std::error_category {
 public:
  const char* name() const noexcept override { return "beehive"; }
  std::string message(int ev) const override { return to_string(static_cast<errc>(ev)); }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

const char* to_string(errc e) noexcept {
  switch (e) {
    case errc::not_found:
      return "not_found";
    case errc::wrong_kind:
      return "wrong_kind";
    case errc::no_controller:
      return "no_controller";
    case errc::not_loaded:
      return "not_loaded";
    case errc::conflicting_option:
      return "conflicting_option";
    case errc::already_exists:
      return "already_exists";
    case errc::observed_generation_future:
      return "observed_generation_future";
    case errc::schema_version_downgrade:
      return "schema_version_downgrade";
    case errc::decode:
      return "decode";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::already_registered:
      return "already_registered";
    case errc::already_started:
      return "already_started";
    case errc::stopped:
      return "stopped";
    case errc::store_in_use:
      return "store_in_use";
    case errc::cancelled:
      return "cancelled";
    case errc::deadline_exceeded:
      return "deadline_exceeded";
    case errc::store:
      return "store";
    case errc::conflict:
      return "conflict";
    case errc::watch_too_old:
      return "watch_too_old";
    case errc::watch_too_new:
      return "watch_too_new";
  }
  return "unknown";
}

Error::Error(errc e) : std::system_error(make_error_code(e)) {}

Error::Error(errc e, const std::string& what)
    : std::system_error(make_error_code(e), what), message_(what) {}

}  // namespace beehive
