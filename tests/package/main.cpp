// Consumer of an installed beehive: open a store, create one object, read it back, and
// render the metrics (PrometheusMetrics links prometheus-cpp, which the installed package
// config must find).
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
    auto metrics = std::make_shared<beehive::PrometheusMetrics>();
    beehive::Beehive bh(store, beehive::with_metrics(metrics));
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
    if (metrics->text().find("# TYPE beehive_commit_seconds histogram\n") == std::string::npos) {
      std::cerr << "beehive_consumer: the metrics lack beehive_commit_seconds:\n"
                << metrics->text();
      return 1;
    }
    std::cout << "beehive_consumer: object " << got.id << " round-tripped\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "beehive_consumer: " << e.what() << "\n";
    return 1;
  }
}
