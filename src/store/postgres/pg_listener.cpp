// The change listener's thread: LISTEN on the store's channel, wait on the socket (and
// on the eventfd that stops it), and report every notification from another session.
// A lost connection, or one silent past the stall limit, is re-established every 100 ms;
// each new connection counts as a commit heard, since notifications sent meanwhile were
// missed.

#include "store/postgres/pg_listener.hpp"

#include <algorithm>
#include <optional>
#include <utility>

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
  shared_->notes.on_ask([fd = wake_fd_] { wake(fd); });
  thread_ = std::thread([this] { loop(); });
}

Listener::~Listener() {
  stop_.store(true);
  wake(wake_fd_);
  if (thread_.joinable()) thread_.join();
  shared_->notes.on_ask({});
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Listener::wake(int fd) {
  std::uint64_t one = 1;
  if (fd >= 0) (void)!::write(fd, &one, sizeof one);
}

void Listener::subscribe(std::function<void()> committed) {
  std::lock_guard g(mu_);
  subscriber_ = std::move(committed);
  if (!subscriber_) shared_->notes.clear();
}

void Listener::heard(std::vector<std::string> notes) {
  shared_->foreign_commits.fetch_add(1, std::memory_order_acq_rel);
  if (notes.empty()) notes.emplace_back();  // some may be missing
  std::lock_guard g(mu_);
  // Nobody to take them: a writer that comes later reads the change log first.
  if (subscriber_ && shared_->notes.push(std::move(notes))) subscriber_();
}

void Listener::loop() {
  auto channel = pg_schema::notify_channel(schema_);
  auto& queue = shared_->notes;
  auto woken = [this] {
    std::uint64_t n;
    (void)!::read(wake_fd_, &n, sizeof n);
  };
  std::uint64_t answered_before = 0;  // the last of the writer's tickets answered
  while (!stop_.load()) {
    std::unique_ptr<Connection> c;
    try {
      // A stop does not wait out a connect to a server that does not answer.
      c = std::make_unique<Connection>(conninfo_, schema_, connect_timeout_,
                                       std::chrono::milliseconds{},
                                       [this] { return !stop_.load(); });
      c->exec("LISTEN " + c->quote_identifier(channel));
      heard({});  // whatever was sent while not listening
      queue.set_listening(true);
    } catch (const std::exception&) {
      c.reset();
    }
    using Clock = std::chrono::steady_clock;
    auto last_heard = Clock::now();         // the server's last bytes
    std::optional<Clock::time_point> ping;  // an empty query awaiting its answer
    std::uint64_t ping_answers = 0;         // the writer's tickets (NoteQueue) it answers
    bool deaf = false;                      // faults::deafen_listener
    std::vector<std::string> held;          // faults::hold_listener_notes
    while (c && !stop_.load()) {
      if (faults::deafen_listener.exchange(false)) deaf = true;
      auto now = Clock::now();
      auto asked = queue.asked();
      if (!ping && (now - last_heard >= kPingAfter || asked > ping_answers)) {
        if (!PQsendQuery(c->raw(), "")) {
          c.reset();
          break;
        }
        ping = now;
        ping_answers = asked;
      }
      auto next = ping ? *ping + kStallLimit : last_heard + kPingAfter;
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
      pollfd fds[2] = {{deaf ? -1 : PQsocket(c->raw()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (::poll(fds, 2, static_cast<int>(std::clamp<long long>(wait, 1, 1000))) < 0) continue;
      if (fds[1].revents) {  // stopped, or the writer asked for a round trip
        woken();
        continue;
      }
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
      std::uint64_t answered = 0;
      while (ping && !PQisBusy(c->raw())) {
        PGresult* r = PQgetResult(c->raw());
        if (!r) {  // answered in full: the server sent every note queued before it
          ping.reset();
          answered = ping_answers;
        }
        PQclear(r);
      }
      std::vector<std::string> notes = std::exchange(held, {});
      const auto kept = notes.size();
      while (PGnotify* n = PQnotifies(c->raw())) {
        if (commit_note_session(n->extra) != session_)
          notes.push_back(trusted_commit_note(n->extra, note_key_));
        PQfreemem(n);
      }
      bool writer_answered = answered > answered_before;
      if (!writer_answered && faults::hold_listener_notes) {
        faults::listener_notes_held += static_cast<int>(notes.size() - kept);
        held = std::move(notes);
        continue;
      }
      if (!notes.empty()) heard(std::move(notes));
      if (writer_answered) queue.answered(answered_before = answered);
    }
    queue.set_listening(false);
    if (stop_.load()) break;
    pollfd wake{wake_fd_, POLLIN, 0};
    if (::poll(&wake, 1, 100) > 0) woken();
  }
}

}  // namespace beehive::store::pg
