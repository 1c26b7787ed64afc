// The JSON fast path against nlohmann: for any text the parser either declines, or
// returns exactly what nlohmann::json::parse returns (same types, not just equal values;
// nlohmann compares 1 and 1u as equal), and it never accepts text nlohmann rejects; the
// printer either declines or prints exactly what dump() prints.

#include <string>
#include <string_view>

#include "fuzz.hpp"
#include "json_fast_path.hpp"

namespace {

bool same(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
      if (ia.key() != ib.key() || !same(*ia, *ib)) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto fast = beehive::detail::parse_json_fast(text);
  nlohmann::json reference;
  try {
    reference = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    if (fast)
      beehive::fuzz::fail(std::string("the fast path accepted text nlohmann rejects: ") + e.what());
    return 0;
  }
  if (fast && !same(*fast, reference))
    beehive::fuzz::fail("the fast path parsed a different value");
  auto printed = beehive::detail::dump_json_fast(reference);
  if (printed && *printed != reference.dump())
    beehive::fuzz::fail("the fast path printed different text");
  return 0;
}
