// Events: a connection-health timeline.
//
// The application probes a connection every 10 seconds and records each result as an event
// on the Connection object (`record_event`, a ControllerClient call). Consecutive events
// with the same (category, type, reason) extend one *run* (its count grows, its time window
// widens, its message and detail follow the latest occurrence); any other event starts a new
// run. A flapping connection therefore reads as a short timeline of alternating runs, which
// `list_events(..., with_event_category("connection"))` returns newest first:
//
//   last_at · type · reason · ×count · first_at–last_at · message
//
// Each category is a timeline of its own, so the "config" events recorded in between do not
// break the connection runs. Time comes from a ManualClock, so the timestamps are the same
// on every run. The database is ./var/events.db, recreated on every run.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <beehive/beehive.hpp>

using namespace std::chrono_literals;
using beehive::EventType;

const beehive::GroupKind connection_kind{"example.com", "Connection"};

struct ConnectionSpec {
  std::string endpoint;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ConnectionSpec, endpoint)

struct Empty {};

// Structured details: each reason carries its own shape.
struct ProbeOk {  // reason "Connected"
  int rtt_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProbeOk, rtt_ms)

struct ProbeFailure {  // reason "ProbeFailed"
  std::string endpoint;
  int latency_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProbeFailure, endpoint, latency_ms)

std::string hhmmss(beehive::Time t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

// One run as a row: last_at · type · reason · ×count · first_at–last_at · message
void print_run(const beehive::Event& e) {
  char head[64];
  std::snprintf(head, sizeof head, "%-12s ×%-3d", e.reason.c_str(), e.count);
  std::cout << "  " << hhmmss(e.last_at) << "  " << (e.type == EventType::Normal ? "✓" : "✗") << " "
            << head << " " << hhmmss(e.first_at) << "–" << hhmmss(e.last_at);
  if (!e.message.empty()) std::cout << "  \"" << e.message << "\"";
  std::cout << "\n";
}

int run() {
  const std::filesystem::path file = "var/events.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix);

  // 2025-01-15 10:03:50 UTC, moved only by the program.
  auto clock = std::make_shared<beehive::ManualClock>(
      std::chrono::sys_days{std::chrono::year{2025} / 1 / 15} + 10h + 3min + 50s);
  auto store = beehive::sqlite::open(file);
  beehive::Beehive bh(store, beehive::with_clock(clock));

  // Events are observations, so only a ControllerClient writes them. The controller here has
  // nothing to reconcile; the ControllerClient that register_controller returns is what the
  // application's prober uses.
  auto connections_cc = beehive::register_controller<ConnectionSpec, Empty>(
      bh, connection_kind,
      [](const beehive::Context& ctx, beehive::ControllerClient<Empty>& cc,
         const beehive::Object<ConnectionSpec, Empty>& o) {
        cc.update_status(ctx, o.id, o.generation, Empty{});
        return beehive::Result{};
      });
  beehive::Context ctx;
  auto stop = bh.start(ctx);

  beehive::Client<ConnectionSpec, Empty> connections(bh, connection_kind);
  auto conn = connections.create(ctx, {"10.0.0.1:443"}, beehive::with_slug("primary"));

  // The prober is the application's own background work (beehive does not own threads for
  // it). 7 good probes, 18 failures, 4 good probes, one every 10 s; a config sync happens in
  // the middle of the outage.
  std::thread prober([&] {
    for (int i = 0; i < 29; ++i, clock->advance(10s)) {
      bool up = i < 7 || i >= 25;
      if (up)
        connections_cc.record_event(
            ctx, conn.id, {"connection", EventType::Normal, "Connected", "", ProbeOk{12 + i % 3}});
      else
        connections_cc.record_event(ctx, conn.id,
                                    {"connection", EventType::Warning, "ProbeFailed", "i/o timeout",
                                     ProbeFailure{conn.spec.endpoint, 5000 + 10 * (i - 7)}});
      if (i == 12)
        connections_cc.record_event(ctx, conn.id,
                                    {"config", EventType::Normal, "ConfigSynced", "revision 42"});
    }
  });
  prober.join();

  std::cout << "connection timeline of '" << conn.slug.value_or("") << "' (" << conn.spec.endpoint
            << "), newest first:\n";
  auto runs = connections.list_events(ctx, conn.id, beehive::with_event_category("connection"));
  for (const auto& e : runs) print_run(e);

  // Details come back as JSON; event_detail<T> decodes one with the type its reason implies.
  std::cout << "\nlatest detail of each run:\n";
  for (const auto& e : runs) {
    if (e.reason == "ProbeFailed") {
      auto d = beehive::event_detail<ProbeFailure>(e);
      std::cout << "  ProbeFailed: endpoint " << d.endpoint << ", latency " << d.latency_ms
                << " ms\n";
    } else if (e.reason == "Connected") {
      std::cout << "  Connected:   rtt " << beehive::event_detail<ProbeOk>(e).rtt_ms << " ms\n";
    }
  }

  // Other reads: the other timeline, filters, and the current run of one category.
  std::cout << "\nconfig timeline:\n";
  for (const auto& e :
       connections.list_events(ctx, conn.id, beehive::with_event_category("config")))
    print_run(e);
  auto warnings =
      connections.list_events(ctx, conn.id, beehive::with_event_type(EventType::Warning));
  std::cout << "\nwarning runs: " << warnings.size() << " (" << warnings.at(0).count
            << " failed probes)\n";
  auto latest = connections.get_latest_event(ctx, conn.id, "connection");
  std::cout << "current connection run: " << latest->reason << " x" << latest->count << " since "
            << hhmmss(latest->first_at) << "\n";

  stop(beehive::Context{}.with_timeout(10s));
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "events: " << e.what() << "\n";
    return 1;
  }
}
