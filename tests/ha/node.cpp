// One process of the high-availability tests (tests/ha_test.cpp): opens the PostgreSQL
// store, registers the Widget controller and starts, as the leader or a standby.
//
// Usage: node <conninfo> <schema> <lease_ms> [verbose] [no-resync]
//
// Prints, a line each: "leader" / "standby" whenever its leadership changes (the first
// line is the leadership it started with); with `verbose`, "reconciling <id>" when a
// pass begins, "wrote <id>" after its status write and "refused <id>" when the write
// failed, and "log <message>" for each warning or error beehive logs. A spec's `sleep_ms` makes the
// pass sleep before writing (the fencing test pauses the process meanwhile). The status records the
// writer's pid. `no-resync` turns the controller's resync off (a pass then comes only from a change
// or a takeover). Reads stdin: a line "quit" (or its end) stops the beehive and exits 0; a line
// "hold" opens a `within` block, creates the object "held" in it, prints "holding" and never ends
// the block (the test kills the process there); a line "watch" watches the kind and prints "seen
// <id> <n>" for each change and "watch ended <error>" at its end (the error is empty when it ended
// cleanly). Failures: exit 2.

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
    std::cerr << "usage: node <conninfo> <schema> <lease_ms> [verbose] [no-resync]\n";
    return 2;
  }
  bool verbose = false, resync = true;
  for (int i = 4; i < argc; ++i) {
    verbose |= std::string(argv[i]) == "verbose";
    resync &= std::string(argv[i]) != "no-resync";
  }
  const GroupKind widget{"acme.com", "Widget"};
  try {
    postgres::Options opts;
    opts.schema = argv[2];
    opts.lease = std::chrono::milliseconds(std::stoi(argv[3]));
    // With `verbose`, warnings and errors too: "log <message>".
    auto logger = [verbose](LogLevel level, std::string_view message, const LogFields&) {
      if (verbose && level >= LogLevel::warning) say("log " + std::string(message));
    };
    Beehive bh(postgres::open(argv[1], opts), with_logger(logger));
    auto reconcile = [verbose](const Context& ctx, ControllerClient<Status>& cc,
                               const Object<Spec, Status>& o) {
      auto id = std::to_string(o.id);
      if (verbose) say("reconciling " + id);
      if (o.spec.sleep_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(o.spec.sleep_ms));
      try {
        cc.update_status(ctx, o.id, o.generation, Status{o.spec.n, static_cast<int>(::getpid())});
      } catch (const Error&) {
        if (verbose) say("refused " + id);
        throw;
      }
      if (verbose) say("wrote " + id);
      return Result{};
    };
    auto cc = resync
                  ? register_controller<Spec, Status>(bh, widget, reconcile)
                  : register_controller<Spec, Status>(
                        bh, widget, reconcile, with_resync_interval(std::chrono::milliseconds(0)));
    auto leadership = bh.watch_leadership(Context{});
    auto stop = bh.start(Context{});
    std::thread follow([&leadership] {
      while (auto leads = leadership.next()) say(*leads ? "leader" : "standby");
    });
    Client<Spec, Status> widgets(bh, widget);
    std::vector<std::thread> watches;
    std::string line;
    while (std::getline(std::cin, line) && line != "quit") {
      if (line == "watch") {
        watches.emplace_back([stream = widgets.watch_list(Context{})]() mutable {
          while (auto ch = stream.next())
            say("seen " + std::to_string(ch->object.id) + " " + std::to_string(ch->object.spec.n));
          say("watch ended " + (stream.error() ? stream.error().message() : std::string()));
        });
        continue;
      }
      if (line != "hold") continue;
      std::thread([&widgets, &cc] {
        cc.within(Context{}, [&widgets](const Context& tx) {
          widgets.create(tx, Spec{}, with_slug("held"));
          say("holding");
          for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        });
      }).detach();
    }
    stop(Context{});
    follow.join();
    for (auto& w : watches) w.join();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "node: " << e.what() << "\n";
    return 2;
  }
}
