// Metrics over HTTP: a beehive reporting to PrometheusMetrics, and a tiny HTTP server
// (plain POSIX sockets, one request at a time) that serves its text exposition at
// http://127.0.0.1:<port>/metrics for Prometheus to scrape.
//
//   metrics_http [--port N] [--serve-once] [--port-file PATH]
//
//   --port N          listen on 127.0.0.1:N (default 9464; 0 picks a free port)
//   --serve-once      answer one request, then stop (gives up after 20 s without one)
//   --port-file PATH  write the port listened on to PATH once listening
//
// It registers a controller for demo.example.com/Job, creates three jobs (one of which
// fails its first reconcile, so the error and retry series show up), waits until all three
// have reconciled successfully, then serves. `ctest -L example` runs it with
// --serve-once and fetches the page with curl (cmake/metrics_http_smoke.sh).
//
// The database is ./var/metrics_http.db, recreated on every run.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  bool serve_once = false;
  std::string port_file;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--port" && i + 1 < argc)
      a.port = std::atoi(argv[++i]);
    else if (arg == "--serve-once")
      a.serve_once = true;
    else if (arg == "--port-file" && i + 1 < argc)
      a.port_file = argv[++i];
    else {
      std::cerr << "usage: metrics_http [--port N] [--serve-once] [--port-file PATH]\n";
      std::exit(2);
    }
  }
  return a;
}

/// A listening socket on 127.0.0.1; returns the descriptor and the port bound.
std::pair<int, int> listen_local(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // never exposed beyond this host
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 || ::listen(fd, 16) < 0) {
    auto err = std::string(std::strerror(errno));
    ::close(fd);
    throw std::runtime_error("bind/listen 127.0.0.1:" + std::to_string(port) + ": " + err);
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return {fd, ntohs(addr.sin_port)};
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

/// Reads one request head and answers it: GET /metrics (or /) gets the exposition.
void serve_one(int client, const beehive::PrometheusMetrics& metrics) {
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;  // a silent client does not hold us
    auto n = ::recv(client, buf, sizeof buf, 0);
    if (n <= 0) return;
    request.append(buf, static_cast<std::size_t>(n));
  }
  auto line = request.substr(0, request.find("\r\n"));
  std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (line.rfind("GET /metrics ", 0) == 0 || line.rfind("GET / ", 0) == 0) {
    body = metrics.text();
  } else {
    status = "404 Not Found";
    type = "text/plain; charset=utf-8";
    body = "try GET /metrics\n";
  }
  send_all(client, "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

int main(int argc, char** argv) try {
  auto args = parse(argc, argv);

  std::filesystem::remove_all("var/metrics_http.db");
  std::filesystem::remove("var/metrics_http.db-wal");
  std::filesystem::remove("var/metrics_http.db-shm");
  auto store = beehive::sqlite::open("var/metrics_http.db");

  // The sink: given to the Beehive, read by the HTTP handler.
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
  const beehive::MetricLabels success{{"kind", "Job.demo.example.com"}, {"result", "success"}};
  auto until = std::chrono::steady_clock::now() + 15s;
  while (metrics->value(beehive::metric::reconcile_total, success) < 3) {
    if (std::chrono::steady_clock::now() > until) {
      std::cerr << "jobs did not reconcile in time\n";
      return 1;
    }
    std::this_thread::sleep_for(10ms);
  }

  auto [fd, port] = listen_local(args.port);
  if (!args.port_file.empty()) {
    // Written whole, then renamed: a reader polling for it never sees half a number.
    auto tmp = args.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::filesystem::rename(tmp, args.port_file);
  }
  std::cout << "serving http://127.0.0.1:" << port << "/metrics" << std::endl;

  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, args.serve_once ? 20000 : -1);
    if (ready <= 0) {
      std::cerr << "no request within 20 s\n";
      ::close(fd);
      stop(beehive::Context{}.with_timeout(10s));
      return 1;
    }
    int client = ::accept(fd, nullptr, nullptr);
    if (client < 0) continue;
    serve_one(client, *metrics);
    ::close(client);
    if (args.serve_once) break;
  }
  ::close(fd);
  stop(beehive::Context{}.with_timeout(10s));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "metrics_http: " << e.what() << "\n";
  return 1;
}
