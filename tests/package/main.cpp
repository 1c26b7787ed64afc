// Consumer of an installed beehive: open a store, create one object, read it back.
// Usage: beehive_consumer <database-file>
#include <beehive/beehive.hpp>
#include <beehive/sqlite.hpp>

#include <nlohmann/json.hpp>

#include <exception>
#include <filesystem>
#include <iostream>

namespace app {

struct Spec {
  int replicas = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Spec, replicas)

struct Status {
  int ready = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Status, ready)

}  // namespace app

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <database-file>\n";
    return 2;
  }
  try {
    const std::filesystem::path path = argv[1];
    auto store = beehive::sqlite::open(path);
    beehive::Beehive bh(store);
    beehive::Client<app::Spec, app::Status> client(bh,
                                                   beehive::GroupKind{"package.test", "Widget"});
    const beehive::Context ctx;

    const auto created = client.create(ctx, app::Spec{3});
    const auto got = client.get(ctx, created.id);
    if (got.id != created.id || got.spec.replicas != 3) {
      std::cerr << "beehive_consumer: read back id " << got.id << " replicas " << got.spec.replicas
                << ", expected id " << created.id << " replicas 3\n";
      return 1;
    }
    std::cout << "beehive_consumer: object " << got.id << " round-tripped\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "beehive_consumer: " << e.what() << "\n";
    return 1;
  }
}
