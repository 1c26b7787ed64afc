#include <beehive/detail/codec.hpp>

#include "json_fast_path.hpp"

namespace beehive::detail {

std::string dump_json(const nlohmann::json& j) {
  if (auto text = dump_json_fast(j)) return std::move(*text);
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::invalid_argument, std::string("cannot encode value: ") + e.what());
  }
}

nlohmann::json parse_json(std::string_view text) {
  if (auto j = parse_json_fast(text)) return std::move(*j);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::decode, std::string("stored JSON does not parse: ") + e.what());
  }
}

nlohmann::json load_blob(std::string_view text, int stored, const Migrator* m, bool spec) {
  int current = m ? (spec ? m->schema_version_spec() : m->schema_version_status()) : 0;
  // The version decides before the bytes: a blob from a newer build is a downgrade
  // whatever it holds. 0 means the kind is not versioned: every blob is taken as it is.
  if (current != 0 && stored > current)
    throw Error(errc::schema_version_downgrade,
                std::string(spec ? "spec" : "status") + " written at schema version " +
                    std::to_string(stored) + ", newer than this build's " +
                    std::to_string(current));
  auto j = parse_json(text);
  if (stored == current || current == 0) return j;
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

void require_utf8(std::string_view text, std::string_view what) {
  // Walks the bytes by the UTF-8 rules (no overlongs, no surrogates, <= U+10FFFF).
  auto bad = [&] { throw Error(errc::invalid_argument, std::string(what) + " is not UTF-8"); };
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    unsigned c = *p++;
    int more = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (more < 0 || end - p < more) bad();
    unsigned cp = more == 0 ? c : more == 1 ? (c & 0x1F) : more == 2 ? (c & 0x0F) : (c & 0x07);
    for (int i = 0; i < more; ++i) {
      if ((p[i] & 0xC0) != 0x80) bad();
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    p += more;
    if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      bad();
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
