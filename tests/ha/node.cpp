// One process of the high-availability tests (tests/ha_test.cpp): opens the PostgreSQL
// store, registers the Widget controller and starts, as the leader or a standby.
//
// Usage: node <conninfo> <schema> <lease_ms> [verbose]
//
// Prints, a line each: "leader" / "standby" whenever its leadership changes (the first
// line is the leadership it started with); with `verbose`, "reconciling <id>" when a
// pass begins, "wrote <id>" after its status write and "refused <id>" when the write
// failed. A spec's `sleep_ms` makes the pass sleep before writing (the fencing test
// pauses the process meanwhile). The status records the writer's pid. Reads stdin: a
// line "quit" (or its end) stops the beehive and exits 0; a line "hold" opens a `within`
// block, creates the object "held" in it, prints "holding" and never ends the block (the
// test kills the process there). Failures: exit 2.

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include <beehive/beehive.hpp>
#include <beehive/postgres.hpp>

#include "node_types.hpp"

namespace {

using Spec = beehive::test::NodeSpec;
using Status = beehive::test::NodeStatus;

std::mutex out_mu;
void say(const std::string& line) {
  std::lock_guard g(out_mu);
  std::cout << line << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace beehive;
  if (argc < 4) {
    std::cerr << "usage: node <conninfo> <schema> <lease_ms> [verbose]\n";
    return 2;
  }
  bool verbose = argc > 4 && std::string(argv[4]) == "verbose";
  try {
    postgres::Options opts;
    opts.schema = argv[2];
    opts.lease = std::chrono::milliseconds(std::stoi(argv[3]));
    Beehive bh(postgres::open(argv[1], opts));
    auto cc = register_controller<Spec, Status>(
        bh, GroupKind{"acme.com", "Widget"},
        [verbose](const Context& ctx, ControllerClient<Status>& cc, const Object<Spec, Status>& o) {
          auto id = std::to_string(o.id);
          if (verbose) say("reconciling " + id);
          if (o.spec.sleep_ms > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(o.spec.sleep_ms));
          try {
            cc.update_status(ctx, o.id, o.generation,
                             Status{o.spec.n, static_cast<int>(::getpid())});
          } catch (const Error&) {
            if (verbose) say("refused " + id);
            throw;
          }
          if (verbose) say("wrote " + id);
          return Result{};
        });
    auto leadership = bh.watch_leadership(Context{});
    auto stop = bh.start(Context{});
    std::thread follow([&leadership] {
      while (auto leads = leadership.next()) say(*leads ? "leader" : "standby");
    });
    std::string line;
    while (std::getline(std::cin, line) && line != "quit") {
      if (line != "hold") continue;
      std::thread([&bh, &cc] {
        cc.within(Context{}, [&bh](const Context& tx) {
          Client<Spec, Status>(bh, GroupKind{"acme.com", "Widget"})
              .create(tx, Spec{}, with_slug("held"));
          say("holding");
          for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        });
      }).detach();
    }
    stop(Context{});
    follow.join();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "node: " << e.what() << "\n";
    return 2;
  }
}
