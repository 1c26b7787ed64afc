// Metrics over HTTP: a beehive reporting to PrometheusMetrics, served by
// `PrometheusMetrics::serve` at http://127.0.0.1:<port>/metrics for Prometheus to scrape.
//
//   metrics_http [--port N] [--serve-for SECONDS] [--port-file PATH]
//
//   --port N             listen on 127.0.0.1:N (default 9464; 0 picks a free port)
//   --serve-for SECONDS  serve that long, then stop (default: until killed)
//   --port-file PATH     write the port listened on to PATH once listening
//
// It registers a controller for demo.example.com/Job, creates three jobs (one of which
// fails its first reconcile, so the error and retry series show up), waits until all three
// have reconciled successfully, then serves. `ctest -L example` runs it on a free port
// and fetches the page with curl (cmake/metrics_http_smoke.sh).
//
// The database is ./var/metrics_http.db, recreated on every run.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include <beehive/beehive.hpp>

using namespace std::chrono_literals;

const beehive::GroupKind job_kind{"demo.example.com", "Job"};

struct JobSpec {
  std::string image;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobSpec, image)

struct JobStatus {
  bool done = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobStatus, done)

struct Args {
  int port = 9464;  // the default of OpenTelemetry's Prometheus exporter
  int serve_for = -1;
  std::string port_file;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--port" && i + 1 < argc)
      a.port = std::atoi(argv[++i]);
    else if (arg == "--serve-for" && i + 1 < argc)
      a.serve_for = std::atoi(argv[++i]);
    else if (arg == "--port-file" && i + 1 < argc)
      a.port_file = argv[++i];
    else {
      std::cerr << "usage: metrics_http [--port N] [--serve-for SECONDS] [--port-file PATH]\n";
      std::exit(2);
    }
  }
  return a;
}

int main(int argc, char** argv) try {
  auto args = parse(argc, argv);

  std::filesystem::remove_all("var/metrics_http.db");
  std::filesystem::remove("var/metrics_http.db-wal");
  std::filesystem::remove("var/metrics_http.db-shm");
  auto store = beehive::sqlite::open("var/metrics_http.db");

  // The sink: given to the Beehive, and serving its own /metrics endpoint.
  auto metrics = std::make_shared<beehive::PrometheusMetrics>();
  beehive::Beehive bh(store, beehive::with_metrics(metrics));

  std::atomic<bool> failed_once{false};
  beehive::register_controller<JobSpec, JobStatus>(
      bh, job_kind,
      [&](const beehive::Context& ctx, beehive::ControllerClient<JobStatus>& client,
          const beehive::Object<JobSpec, JobStatus>& job) -> beehive::Result {
        if (job.spec.image == "flaky:1" && !failed_once.exchange(true))
          throw std::runtime_error("image pull timed out");  // retried after 1 s
        client.update_status(ctx, job.id, job.generation, JobStatus{true});
        return {};
      });
  auto stop = bh.start({});

  beehive::Client<JobSpec, JobStatus> jobs(bh, job_kind);
  for (auto image : {"busybox:1", "alpine:3", "flaky:1"}) jobs.create({}, JobSpec{image});

  // Bounded wait: every job reconciled successfully once (the flaky one after its retry).
  const beehive::MetricLabels success{{"controller", "Job.demo.example.com"},
                                      {"result", "success"}};
  auto until = std::chrono::steady_clock::now() + 15s;
  while (metrics->value(beehive::metric::reconcile_total, success) < 3) {
    if (std::chrono::steady_clock::now() > until) {
      std::cerr << "jobs did not reconcile in time\n";
      return 1;
    }
    std::this_thread::sleep_for(10ms);
  }

  // The one call that turns the endpoint on; it serves until `metrics` is destroyed.
  metrics->serve("127.0.0.1:" + std::to_string(args.port));
  if (!args.port_file.empty()) {
    // Written whole, then renamed: a reader polling for it never sees half a number.
    auto tmp = args.port_file + ".tmp";
    std::ofstream(tmp) << metrics->port() << "\n";
    std::filesystem::rename(tmp, args.port_file);
  }
  std::cout << "serving http://127.0.0.1:" << metrics->port() << "/metrics" << std::endl;

  if (args.serve_for < 0)
    for (;;) std::this_thread::sleep_for(1h);
  std::this_thread::sleep_for(std::chrono::seconds(args.serve_for));
  stop(beehive::Context{}.with_timeout(10s));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "metrics_http: " << e.what() << "\n";
  return 1;
}
