// The application beside beehive-ctl in the write tests: opens a beehive on a database,
// registers a controller for one kind (specs and statuses as plain JSON), starts, and
// prints "started", then a line per reconcile: "reconciled SLUG GENERATION N" (N counts
// that object's reconciles). Stops and exits 0 at a line or the end of stdin.
//
// Usage: ctl_peer DB GROUP KIND. Exit 2 on any error (message on stderr).

#include <iostream>
#include <map>
#include <mutex>
#include <string>

#include <beehive/beehive.hpp>

int main(int argc, char** argv) {
  using namespace beehive;
  using Json = nlohmann::json;
  if (argc != 4) {
    std::cerr << "usage: ctl_peer DB GROUP KIND\n";
    return 2;
  }
  try {
    auto store = sqlite::open(argv[1]);
    Beehive bh(store);
    std::mutex mu;
    std::map<ObjectID, int> counts;
    register_controller<Json, Json>(
        bh, GroupKind{argv[2], argv[3]},
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
