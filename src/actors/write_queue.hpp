#pragma once

// The hand-off between blocking callers and the store_writer. Callers push requests
// here; the push that finds the writer idle wakes it with a CAF message. The writer
// drains everything queued at once, applies the plain writes of a drain together in one
// transaction (group commit: each in its own savepoint, replies after the commit), and
// then polls the queue briefly before going back to sleep, so that a caller issuing
// writes back to back finds it awake instead of paying a thread wake-up per write.

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "rendezvous.hpp"

namespace beehive::detail {

struct BlockingWrite;
using BlockingWritePtr = std::shared_ptr<BlockingWrite>;

class WriteQueue {
 public:
  /// How the writer is woken; set once the writer exists, cleared by close().
  void set_wake(std::function<void()> wake);

  /// Queues `w`, waking the writer when it was idle. Throws Error(errc::stopped) once
  /// closed.
  void push(BlockingWritePtr w);

  /// Takes everything queued; when nothing is, marks the writer idle and returns empty.
  std::vector<BlockingWritePtr> take_or_idle();
  /// Takes everything queued, if anything (the writer stays awake).
  std::vector<BlockingWritePtr> take();
  /// Requests queued, readable without the lock (for polling).
  bool maybe_nonempty() const { return size_.load(std::memory_order_acquire) > 0; }
  std::size_t size() const { return size_.load(std::memory_order_acquire); }

  /// The writer's last COMMIT took `d`. While commits take more than half the reply
  /// spin (synchronous=FULL: ~200 us), a waiting caller would spin in vain and take the
  /// CPU the writer and the other callers need: it sleeps at once.
  void commit_took(std::chrono::steady_clock::duration d) {
    quick_commits_.store(d < reply_spin / 2, std::memory_order_relaxed);
  }
  /// Whether a caller waiting for its reply should spin first.
  bool replies_come_quickly() const { return quick_commits_.load(std::memory_order_relaxed); }

  /// Refuses further pushes and returns what is left.
  std::vector<BlockingWritePtr> close();

 private:
  std::mutex mu_;
  std::deque<BlockingWritePtr> items_;
  std::atomic<std::size_t> size_{0};
  std::atomic<bool> quick_commits_{true};
  std::function<void()> wake_;
  bool awake_ = false;  // the writer has been woken and has not gone idle yet
  bool closed_ = false;
};

}  // namespace beehive::detail
