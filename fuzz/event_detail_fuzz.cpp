// Event detail: any JSON a controller stored as detail either converts to the type the
// reader asks for or fails with errc::decode.

#include <map>
#include <string>
#include <vector>

#include <beehive/detail/codec.hpp>
#include <beehive/event.hpp>

#include "fuzz.hpp"

namespace {

struct Probe {
  std::string target;
  int latency_ms = 0;
  std::vector<std::string> hops;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Probe, target, latency_ms, hops)

using beehive::errc;
using beehive::Error;
namespace fuzz = beehive::fuzz;

template <class T>
void read_as(const beehive::Event& e) {
  try {
    (void)beehive::event_detail<T>(e);
  } catch (const Error& err) {
    fuzz::expect_code(err, {errc::decode});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  beehive::Event e;
  try {
    e.detail =
        beehive::detail::parse_json(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error& err) {
    fuzz::expect_code(err, {errc::decode});
    return 0;
  }
  read_as<Probe>(e);
  read_as<int>(e);
  read_as<double>(e);
  read_as<std::string>(e);
  read_as<std::vector<int>>(e);
  read_as<std::map<std::string, int>>(e);
  return 0;
}
