#pragma once

// Listens, on a connection of its own, for the notifications every write transaction
// sends at commit (LISTEN/NOTIFY), and tells the store's writer that other processes
// committed: it bumps SharedState::foreign_commits, queues their notes (commit_note) in
// SharedState::notes and rings the subscriber, so that the writer publishes them now
// rather than at its next poll. It answers the writer's NoteQueue::await_sent with an
// empty query on its connection.
//
// A listener hears nothing when nobody commits, and nothing either when its connection
// went half-open (a partition that drops packets, with no reset): after kPingAfter of
// silence it sends an empty query, and a connection that leaves it unanswered for
// kStallLimit is made anew (which counts as a commit heard).
//
// Owns one thread, stopped and joined by the destructor (woken at once through an
// eventfd). subscribe() may be called from any thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/commit_note.hpp"
#include "store/postgres/pg_writer.hpp"

namespace beehive::store::pg {

class Listener {
 public:
  static constexpr std::chrono::milliseconds kPingAfter{1000};
  static constexpr std::chrono::milliseconds kStallLimit{2000};

  Listener(std::string conninfo, std::string schema, std::chrono::milliseconds connect_timeout,
           std::int64_t session, std::shared_ptr<SharedState> shared);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// `committed` is called when other sessions' notes were queued (SharedState::notes)
  /// and the queue was empty. Empty: notes are dropped, the queue emptied.
  void subscribe(std::function<void()> committed);

 private:
  void loop();
  void heard(std::vector<std::string> notes);
  static void wake(int fd);

  std::string conninfo_, schema_;
  std::chrono::milliseconds connect_timeout_;
  std::int64_t session_;
  std::shared_ptr<SharedState> shared_;
  NoteKey note_key_;  // checks the notes' signatures (used on the thread only)
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards subscriber_, and is held while it runs
  std::function<void()> subscriber_;
  std::thread thread_;
};

}  // namespace beehive::store::pg
