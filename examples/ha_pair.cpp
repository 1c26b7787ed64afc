// Two processes, one PostgreSQL database: one leads (runs the controllers), the other
// stands by; kill the leader and the standby takes over within the lease.
//
//   ha_pair [conninfo]      conninfo: a libpq connection string or URI; default $BEEHIVE_PG
//
// The parent forks two members. Each opens the store (schema "ha_pair", lease 2 s),
// registers a controller that stamps every Greeting with its member number, starts, and
// reports its leadership. The parent SIGKILLs the leader, creates a Greeting through a
// Beehive of its own (any process on the store can write), and waits for the survivor
// to take over and reconcile it. Exits 0 when the takeover came within lease + 2 s.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <beehive/beehive.hpp>
#include <beehive/postgres.hpp>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Greeting {
  std::string text;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Greeting, text)
struct Stamp {
  int member = 0;  // who reconciled it
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Stamp, member)

const beehive::GroupKind greeting_kind{"example.com", "Greeting"};
constexpr auto lease = 2s;

beehive::postgres::Options options() { return {.schema = "ha_pair", .lease = lease}; }

// A member: runs until the parent closes `control`; writes "<member> <leads>\n" to
// `report` at each change of its leadership.
int member(const std::string& conninfo, int id, int control, int report) {
  beehive::Beehive bh(beehive::postgres::open(conninfo, options()));
  beehive::register_controller<Greeting, Stamp>(
      bh, greeting_kind, [id](auto& ctx, auto& cc, const auto& g) {
        cc.update_status(ctx, g.id, g.generation, Stamp{id});
        return beehive::Result{};
      });
  beehive::Context ctx;
  auto stop = bh.start(ctx);
  std::thread follower([&] {
    auto leadership = bh.watch_leadership(ctx);
    while (auto leads = leadership.next()) {
      std::printf("member %d (pid %d): %s\n", id, static_cast<int>(::getpid()),
                  *leads ? "leads" : "standby");
      std::fflush(stdout);
      auto line = std::to_string(id) + (*leads ? " 1\n" : " 0\n");
      (void)!::write(report, line.data(), line.size());
    }
  });
  char c;
  while (::read(control, &c, 1) > 0) {
  }           // until the parent closes it (or dies)
  stop(ctx);  // ends the leadership stream, and hands the lease over at once
  follower.join();
  return 0;
}

// Reads one "<member> <leads>" line from `report` within `timeout`; false on timeout.
bool next_report(int report, Clock::duration timeout, int& id, bool& leads) {
  std::string line;
  const auto until = Clock::now() + timeout;
  char c = 0;
  while (c != '\n') {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    pollfd p{report, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    if (::read(report, &c, 1) != 1) return false;
    line += c;
  }
  id = std::atoi(line.c_str());
  leads = line.find(" 1") != std::string::npos;
  return true;
}

int main(int argc, char** argv) {
  const char* env = std::getenv("BEEHIVE_PG");
  const std::string conninfo = argc > 1 ? argv[1] : env ? env : "";
  if (conninfo.empty()) {
    std::fprintf(stderr, "usage: %s CONNINFO (or set BEEHIVE_PG)\n", argv[0]);
    return 2;
  }

  // Fork both members before this process starts any thread of its own.
  int control[2], report[2];
  if (::pipe(control) != 0 || ::pipe(report) != 0) return 1;
  pid_t pids[3] = {0, 0, 0};
  for (int id = 1; id <= 2; ++id) {
    std::fflush(stdout);
    pids[id] = ::fork();
    if (pids[id] == 0) {
      ::close(control[1]);
      ::close(report[0]);
      try {
        ::_exit(member(conninfo, id, control[0], report[1]));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "member %d: %s\n", id, e.what());
        ::_exit(1);
      }
    }
  }
  ::close(control[0]);
  ::close(report[1]);
  auto finish = [&](int code) {
    ::close(control[1]);  // the members stop
    for (int id = 1; id <= 2; ++id) ::waitpid(pids[id], nullptr, 0);
    return code;
  };

  // Both have started once each has reported; one of them leads (a lease left by an
  // earlier run may have to expire first).
  int leader = 0, started = 0, id = 0;
  bool leads = false;
  while ((started < 2 || leader == 0) && next_report(report[0], 10s, id, leads)) {
    started += 1;
    if (leads) leader = id;
  }
  if (started < 2 || leader == 0) {
    std::fprintf(stderr, "the members did not start, or neither leads\n");
    return finish(1);
  }

  std::printf("killing member %d, the leader\n", leader);
  std::fflush(stdout);
  ::kill(pids[leader], SIGKILL);
  const auto killed = Clock::now();

  // Written while no one leads: the survivor reconciles it once it takes over.
  beehive::Beehive bh(beehive::postgres::open(conninfo, options()));
  beehive::Client<Greeting, Stamp> greetings(bh, greeting_kind);
  beehive::Context ctx;
  auto g = greetings.create(ctx, Greeting{"written after the kill"});

  const int survivor = 3 - leader;
  bool took_over = false;
  while (!took_over && next_report(report[0], killed + lease + 2s - Clock::now(), id, leads))
    took_over = id == survivor && leads;
  const double takeover_s = std::chrono::duration<double>(Clock::now() - killed).count();
  if (!took_over) {
    std::fprintf(stderr, "member %d did not take over within %.1f s\n", survivor, takeover_s);
    return finish(1);
  }
  std::printf("member %d took over %.2f s after the kill (lease %lld s)\n", survivor, takeover_s,
              static_cast<long long>(std::chrono::seconds(lease).count()));

  // The survivor's controller reconciles what was written meanwhile.
  for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(50ms)) {
    auto now = greetings.get(ctx, g.id);
    if (now.status && now.status->member == survivor) {
      std::printf("greeting %lld reconciled by member %d\n", static_cast<long long>(g.id),
                  survivor);
      return finish(takeover_s <= std::chrono::duration<double>(lease + 2s).count() ? 0 : 1);
    }
  }
  std::fprintf(stderr, "greeting %lld was not reconciled\n", static_cast<long long>(g.id));
  return finish(1);
}
