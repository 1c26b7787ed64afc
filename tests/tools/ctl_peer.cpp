// The application beside beehive-ctl in the write tests: opens a beehive on a database,
// registers a controller for one kind (specs and statuses as plain JSON), starts, and
// prints "started", then a line per reconcile: "reconciled SLUG GENERATION N" (N counts
// that object's reconciles). Stops and exits 0 at a line or the end of stdin.
//
// Usage: ctl_peer GROUP KIND --db FILE, or ctl_peer GROUP KIND --pg CONNINFO --schema S
// (beehive-ctl's spelling). Exit 2 on any error (message on stderr).

#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <beehive/beehive.hpp>
#include <beehive/postgres.hpp>

int main(int argc, char** argv) {
  using namespace beehive;
  using Json = nlohmann::json;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool pg = args.size() == 6 && args[2] == "--pg" && args[4] == "--schema";
  if (!pg && !(args.size() == 4 && args[2] == "--db")) {
    std::cerr << "usage: ctl_peer GROUP KIND (--db FILE | --pg CONNINFO --schema S)\n";
    return 2;
  }
  try {
    auto store = pg ? postgres::open(args[3], {.schema = args[5]}) : sqlite::open(args[3]);
    Beehive bh(store);
    std::mutex mu;
    std::map<ObjectID, int> counts;
    register_controller<Json, Json>(
        bh, GroupKind{args[0], args[1]},
        [&](const Context& ctx, ControllerClient<Json>& cc, const Object<Json, Json>& obj) {
          // Settled, so that nothing but a change or a requeue reconciles it again.
          cc.update_status(ctx, obj.id, obj.generation, Json{{"seen", obj.generation}});
          std::lock_guard lock(mu);
          std::cout << "reconciled " << obj.slug.value_or("-") << ' ' << obj.generation << ' '
                    << ++counts[obj.id] << std::endl;
          return Result{};
        });
    auto stop = bh.start(Context{});
    {
      std::lock_guard lock(mu);  // reconciles may be printing already
      std::cout << "started" << std::endl;
    }
    std::string line;
    std::getline(std::cin, line);
    stop(Context{}.with_timeout(std::chrono::seconds(10)));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ctl_peer: " << e.what() << "\n";
    return 2;
  }
}
