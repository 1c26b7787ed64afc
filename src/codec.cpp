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

nlohmann::json load_blob(std::string_view text, int stored, const Migrator* m, bool spec) {
  int current = m ? (spec ? m->schema_version_spec() : m->schema_version_status()) : 0;
  auto j = parse_json(text);
  if (stored == current || current == 0 && stored == 0) return j;
  if (stored > current)
    throw Error(errc::schema_version_downgrade,
                std::string(spec ? "spec" : "status") + " written at schema version " +
                    std::to_string(stored) + ", newer than this build's " +
                    std::to_string(current));
  try {
    return spec ? m->convert_spec(stored, std::move(j)) : m->convert_status(stored, std::move(j));
  } catch (const std::exception& e) {
    throw Error(errc::decode, std::string(spec ? "spec" : "status") + " conversion from version " +
                                  std::to_string(stored) + " failed: " + e.what());
  } catch (...) {
    throw Error(errc::decode, std::string(spec ? "spec" : "status") + " conversion from version " +
                                  std::to_string(stored) + " failed");
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
