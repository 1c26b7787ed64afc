// The change listener's thread: LISTEN on the store's channel, wait on the socket (and
// on the eventfd that stops it), and report every notification from another session.
// A lost connection, or one silent past the stall limit, is re-established every 100 ms;
// each new connection counts as a commit heard, since notifications sent meanwhile were
// missed.

#include "store/postgres/pg_listener.hpp"

#include <algorithm>
#include <optional>

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "store/commit_note.hpp"
#include "store/postgres/pg_faults.hpp"
#include "store/postgres/pg_schema.hpp"

namespace beehive::store::pg {

Listener::Listener(std::string conninfo, std::string schema,
                   std::chrono::milliseconds connect_timeout, std::int64_t session,
                   std::shared_ptr<SharedState> shared)
    : conninfo_(std::move(conninfo)),
      schema_(std::move(schema)),
      connect_timeout_(connect_timeout),
      session_(session),
      shared_(std::move(shared)),
      note_key_(shared_->note_key),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { loop(); });
}

Listener::~Listener() {
  stop_.store(true);
  std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Listener::subscribe(std::function<void(std::vector<std::string>)> committed) {
  std::lock_guard g(mu_);
  subscriber_ = std::move(committed);
}

void Listener::heard(std::vector<std::string> notes) {
  shared_->foreign_commits.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard g(mu_);
  if (subscriber_) subscriber_(std::move(notes));
}

void Listener::loop() {
  auto channel = pg_schema::notify_channel(schema_);
  while (!stop_.load()) {
    std::unique_ptr<Connection> c;
    try {
      c = std::make_unique<Connection>(conninfo_, schema_, connect_timeout_);
      c->exec("LISTEN " + c->quote_identifier(channel));
      heard({});  // whatever was sent while not listening
    } catch (const std::exception&) {
      c.reset();
    }
    using Clock = std::chrono::steady_clock;
    auto last_heard = Clock::now();         // the server's last bytes
    std::optional<Clock::time_point> ping;  // an empty query awaiting its answer
    bool deaf = false;                      // faults::deafen_listener
    while (c && !stop_.load()) {
      if (faults::deafen_listener.exchange(false)) deaf = true;
      auto now = Clock::now();
      if (!ping && now - last_heard >= kPingAfter) {
        if (!PQsendQuery(c->raw(), "")) {
          c.reset();
          break;
        }
        ping = now;
      }
      auto next = ping ? *ping + kStallLimit : last_heard + kPingAfter;
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
      pollfd fds[2] = {{deaf ? -1 : PQsocket(c->raw()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (::poll(fds, 2, static_cast<int>(std::clamp<long long>(wait, 1, 1000))) < 0) continue;
      if (fds[1].revents) break;
      if (!fds[0].revents) {
        // Gone silent: connect again. Judged only when nothing waits to be read: after
        // a pause of this process, the answer and the notes sent meanwhile are there.
        if (ping && Clock::now() - *ping >= kStallLimit) {
          c.reset();
          break;
        }
        continue;
      }
      if (!PQconsumeInput(c->raw())) {  // the connection is gone
        c.reset();
        break;
      }
      last_heard = Clock::now();
      while (ping && !PQisBusy(c->raw())) {
        PGresult* r = PQgetResult(c->raw());
        if (!r) ping.reset();  // answered in full
        PQclear(r);
      }
      std::vector<std::string> notes;
      while (PGnotify* n = PQnotifies(c->raw())) {
        if (commit_note_session(n->extra) != session_)
          notes.push_back(trusted_commit_note(n->extra, note_key_));
        PQfreemem(n);
      }
      if (!notes.empty()) heard(std::move(notes));
    }
    if (stop_.load()) break;
    pollfd wake{wake_fd_, POLLIN, 0};
    (void)::poll(&wake, 1, 100);
  }
}

}  // namespace beehive::store::pg
