#include <beehive/detail/codec.hpp>

namespace beehive::detail {

std::string dump_json(const nlohmann::json& j) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::invalid_argument, std::string("cannot encode value: ") + e.what());
  }
}

nlohmann::json parse_json(std::string_view text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::decode, std::string("stored JSON does not parse: ") + e.what());
  }
}

void rethrow_as(errc code, std::string_view what) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(code, std::string(what) + ": " + e.what());
  } catch (...) {
    throw Error(code, std::string(what));
  }
}

}  // namespace beehive::detail
