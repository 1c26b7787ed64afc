// Migrator input: a blob stored at any version (read by a build at version 0, which
// takes every blob as it is, or at version 1 or 2), converted by converters that rename and
// split fields (and throw on shapes they do not expect), either comes out at the current
// version or fails with decode or schema_version_downgrade.

#include <string>

#include <beehive/detail/codec.hpp>

#include "fuzz.hpp"

namespace {

using beehive::errc;
using beehive::Error;
using nlohmann::json;
namespace detail = beehive::detail;
namespace fuzz = beehive::fuzz;

/// v0 {"name": "a b"} -> v1 {"full_name": "a b"} -> v2 {"first": "a", "last": "b"}.
class Migrator final : public beehive::Migrator {
 public:
  explicit Migrator(int current) : current_(current) {}
  int schema_version_spec() const override { return current_; }
  int schema_version_status() const override { return current_; }
  json convert_spec(int from, json raw) const override {
    if (from == 0) {
      raw["full_name"] = raw.at("name");  // throws on a non-object or a missing field
      raw.erase("name");
      from = 1;
    }
    if (from == 1 && current_ == 2) {
      auto full = raw.at("full_name").get<std::string>();
      auto space = full.find(' ');
      raw["first"] = full.substr(0, space);
      raw["last"] = space == std::string::npos ? "" : full.substr(space + 1);
      raw.erase("full_name");
    }
    return raw;
  }
  json convert_status(int from, json raw) const override {
    if (from == 1) throw 42;  // a converter may throw anything
    return raw;
  }

 private:
  int current_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  int stored = data[0] % 4;  // 3 is above every current version: a downgrade
  int current = data[1] % 3;
  std::string_view blob(reinterpret_cast<const char*>(data + 2), size - 2);
  Migrator m(current);
  for (bool spec : {true, false}) {
    try {
      auto j = detail::load_blob(blob, stored, &m, spec);
      if (spec && stored < current && current == 2 && !j.contains("first"))
        fuzz::fail("a converted spec lacks the field of the current version");
    } catch (const Error& e) {
      fuzz::expect_code(e, {errc::decode, errc::schema_version_downgrade});
      if (current == 0 || stored == current) {
        if (e.value() != errc::decode) fuzz::fail("a blob that needs no conversion failed");
      } else if (stored > current && e.value() != errc::schema_version_downgrade) {
        fuzz::fail("a newer blob must be reported as a downgrade");
      }
    }
  }
  return 0;
}
