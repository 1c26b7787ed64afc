// The public actor surface: error conversion and the actors' handles.

#include <beehive/actors.hpp>

#include "runtime.hpp"

namespace beehive {

caf::error make_error(errc code, std::string what) {
  if (what.empty()) return {static_cast<std::uint8_t>(code), error_category_atom};
  return {static_cast<std::uint8_t>(code), error_category_atom,
          caf::make_message(std::move(what))};
}

std::optional<errc> to_errc(const caf::error& err) {
  if (!err) return std::nullopt;
  if (err.category() == error_category_atom) return static_cast<errc>(err.code());
  if (err == caf::sec::request_receiver_down || err.category() == caf::atom("exit"))
    return errc::stopped;
  if (err == caf::sec::request_timeout) return errc::deadline_exceeded;
  return errc::store;
}

std::string error_message(const caf::error& err) {
  if (err.context().match_elements<std::string>()) return err.context().get_as<std::string>(0);
  return {};
}

namespace detail {

store_writer_actor store_writer_of(const Beehive& bh) { return bh.runtime()->store_writer(); }

watch_hub_actor watch_hub_of(const Beehive& bh) {
  return caf::actor_cast<watch_hub_actor>(bh.runtime()->watch_hub());
}

}  // namespace detail
}  // namespace beehive
