#pragma once

// The hand-off between blocking callers and the store_writer. Callers push requests
// here; the push that finds the writer idle wakes it with a CAF message. The writer
// drains everything queued at once, applies the plain writes of a drain together in one
// transaction (group commit: each in its own savepoint, replies after the commit), and
// then polls the queue briefly before going back to sleep, so that a caller issuing
// writes back to back finds it awake instead of paying a thread wake-up per write.
//
// The two waits of the writer adapt: each keeps a score of how often it caught a
// caller, waits only while that pays, and retries now and then after a run of misses.
//
// Thread-safety: push, close, reopen and the size reads are safe from any thread; the
// writer-side functions (take*, wait_for_next_write, take_latecomers,
// group_committed) are called by the store_writer's thread only.

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous.hpp"

namespace beehive::detail {

struct BlockingWrite;
using BlockingWritePtr = std::shared_ptr<BlockingWrite>;

class WriteQueue {
 public:
  /// How the writer is woken; set once the writer exists, cleared by close().
  void set_wake(std::function<void()> wake);

  /// Queues `w`, waking the writer when it was idle. Throws once closed: the error
  /// close() was given.
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

  /// Refuses further pushes with `code` and `why`, and returns what is left.
  std::vector<BlockingWritePtr> close(errc code = errc::stopped,
                                      std::string why = "beehive stopped");
  /// Takes pushes again after close(): a writer that could not be restarted has been.
  void reopen();

  // -- the writer's waits (store_writer thread only) ----------------------------------

  /// After a drain: spins up to `idle_wait` for the next write, while such waits have
  /// been catching writes (and on every 16th drain otherwise). True when a write came.
  bool wait_for_next_write(std::chrono::microseconds idle_wait);

  /// During a group commit holding `have` writes: the callers the last group answered
  /// usually come back within tens of microseconds. Waiting for them (at most half the
  /// last COMMIT, and only while that pays) lets them join this transaction instead of
  /// waiting out a whole commit of their own; callers writing back to back would
  /// otherwise split into two groups taking turns. Then takes what is queued.
  std::vector<BlockingWritePtr> take_latecomers(std::size_t have,
                                                std::chrono::steady_clock::duration last_commit);

  /// A group of `size` writes committed (what take_latecomers expects next time).
  void group_committed(std::size_t size) {
    last_group_size_ = size;
    queued_at_last_commit_ = this->size();
  }
  /// How many writes the last group commit held.
  std::size_t last_group_size() const { return last_group_size_; }

 private:
  std::mutex mu_;
  std::deque<BlockingWritePtr> items_;
  std::atomic<std::size_t> size_{0};
  std::atomic<bool> quick_commits_{true};
  std::function<void()> wake_;
  bool awake_ = false;  // the writer has been woken and has not gone idle yet
  bool closed_ = false;
  errc closed_code_ = errc::stopped;
  std::string closed_why_;

  // The writer's side (its thread only).
  int idle_wait_score_ = 8;  // 0..16: up when a wait after a drain caught a write
  unsigned idle_wait_skips_ = 0;
  int latecomer_wait_score_ = 8;  // 0..16: up when waiting for latecomers caught them
  unsigned latecomer_wait_skips_ = 0;
  std::size_t last_group_size_ = 0;
  std::size_t queued_at_last_commit_ = 0;
};

}  // namespace beehive::detail
