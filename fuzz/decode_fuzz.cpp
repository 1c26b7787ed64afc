// Spec/status decoding: any stored text either decodes or fails with errc::decode, and
// what decodes encodes back to text that decodes to the same value.

#include <map>
#include <string>
#include <vector>

#include <beehive/detail/codec.hpp>

#include "fuzz.hpp"

namespace {

struct Port {
  std::string name;
  int number = 0;
  friend bool operator==(const Port&, const Port&) = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Port, name, number)

struct Spec {
  std::string host;
  std::int64_t replicas = 0;
  double ratio = 0;
  bool enabled = false;
  std::vector<Port> ports;
  std::map<std::string, std::string> labels;
  friend bool operator==(const Spec&, const Spec&) = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Spec, host, replicas, ratio, enabled, ports, labels)

struct Empty {};

using beehive::errc;
using beehive::Error;
namespace detail = beehive::detail;
namespace fuzz = beehive::fuzz;

template <class T>
void round_trip(std::string_view text) {
  T value;
  try {
    value = detail::decode<T>(text);
  } catch (const Error& e) {
    fuzz::expect_code(e, {errc::decode});
    return;
  }
  std::string again;
  try {
    again = detail::encode(value);
  } catch (const Error& e) {
    fuzz::fail(std::string("a decoded value does not encode: ") + e.what());
  }
  if (!(detail::decode<T>(again) == value)) fuzz::fail("round trip changed the value");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip<Spec>(text);
  round_trip<nlohmann::json>(text);
  try {
    detail::decode<Empty>(text);
  } catch (const Error& e) {
    fuzz::expect_code(e, {errc::decode});
  }
  return 0;
}
