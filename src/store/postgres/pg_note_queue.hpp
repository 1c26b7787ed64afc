#pragma once

// Other sessions' commit notes (commit_note), on their way from the listener's thread to
// the store writer's, in commit order. The listener appends what it heard and rings the
// writer when the queue was empty; the writer takes them all at once.
//
// The writer may also have to know that it holds every note the server sent so far: a
// change log trimmed past what it had read is no loss when the notes carry the missing
// commits, but they may still be in the socket, or unread by a listener that was paused
// with its process. await_sent() asks the listener for a round trip on its connection
// (an empty query): the server sends the notes queued for it before the answer.
//
// Thread-safe.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace beehive::store::pg {

class NoteQueue {
 public:
  // The listener's side.

  /// Appends `notes` (an empty one: some may be missing here, the listener reconnected).
  /// True when the queue was empty: the caller rings the writer.
  bool push(std::vector<std::string> notes);
  /// Drops what is queued (the writer that would take it is gone).
  void clear();
  /// Called to have the listener look at asked(); empty: no listener (set before it
  /// runs, cleared once it has stopped).
  void on_ask(std::function<void()> wake);
  /// Whether the listener is connected and listening; false wakes every await_sent().
  void set_listening(bool listening);
  /// The last round trip asked for (a ticket); the listener's next empty query answers
  /// every ticket up to it.
  std::uint64_t asked() const { return asked_.load(std::memory_order_acquire); }
  /// Every note the server sent before the empty query for `ticket` is pushed.
  void answered(std::uint64_t ticket);

  // The writer's side.

  /// Everything queued, oldest first.
  std::vector<std::string> take();
  /// Waits, at most `limit`, until every note the server sent to the listener before
  /// this call is queued. False when it is not listening or `limit` passed first.
  bool await_sent(std::chrono::milliseconds limit);

 private:
  std::mutex mu_;
  std::condition_variable answered_cv_;
  std::vector<std::string> notes_;
  std::atomic<std::uint64_t> asked_{0};
  std::uint64_t answered_ = 0;
  bool listening_ = false;
  std::function<void()> wake_;
};

}  // namespace beehive::store::pg
