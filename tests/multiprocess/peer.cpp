// The multiprocess test's other process: opens a beehive on a database, registers a
// controller and starts. Usage: peer <db>. Prints "started" (then waits for a line or
// the end of stdin, stops and exits 0) or "store_in_use" (exit 3); anything else: exit 2.

#include <iostream>
#include <string>

#include <beehive/beehive.hpp>

namespace {
struct Spec {
  int n = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Spec, n)
}  // namespace

int main(int argc, char** argv) {
  using namespace beehive;
  if (argc != 2) {
    std::cerr << "usage: peer <db>\n";
    return 2;
  }
  try {
    auto store = sqlite::open(argv[1]);
    Beehive bh(store);
    register_controller<Spec, Spec>(bh, GroupKind{"acme.com", "Widget"},
                                    [](auto&, auto&, auto&) { return Result{}; });
    Stop stop;
    try {
      stop = bh.start(Context{});
    } catch (const Error& e) {
      if (e.code() != make_error_code(errc::store_in_use)) throw;
      std::cout << "store_in_use" << std::endl;
      return 3;
    }
    std::cout << "started" << std::endl;
    std::string line;
    std::getline(std::cin, line);
    stop(Context{});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "peer: " << e.what() << "\n";
    return 2;
  }
}
