// The WriteQueue (see write_queue.hpp): a mutex-protected deque plus the writer's
// adaptive waits.

#include "actors/write_queue.hpp"

#include <algorithm>
#include <thread>

#include <beehive/errors.hpp>

namespace beehive::detail {

void WriteQueue::set_wake(std::function<void()> wake) {
  std::lock_guard lk(mu_);
  wake_ = std::move(wake);
}

void WriteQueue::push(BlockingWritePtr w) {
  std::lock_guard lk(mu_);
  if (closed_) throw Error(closed_code_, closed_why_);
  items_.push_back(std::move(w));
  size_.store(items_.size(), std::memory_order_release);
  if (awake_) return;
  awake_ = true;
  if (wake_) wake_();  // a message send: quick, never blocks
}

std::vector<BlockingWritePtr> WriteQueue::take() {
  std::lock_guard lk(mu_);
  std::vector<BlockingWritePtr> out(std::make_move_iterator(items_.begin()),
                                    std::make_move_iterator(items_.end()));
  items_.clear();
  size_.store(0, std::memory_order_release);
  return out;
}

std::vector<BlockingWritePtr> WriteQueue::take_or_idle() {
  std::lock_guard lk(mu_);
  if (items_.empty()) {
    awake_ = false;
    return {};
  }
  std::vector<BlockingWritePtr> out(std::make_move_iterator(items_.begin()),
                                    std::make_move_iterator(items_.end()));
  items_.clear();
  size_.store(0, std::memory_order_release);
  return out;
}

std::vector<BlockingWritePtr> WriteQueue::close(errc code, std::string why) {
  std::lock_guard lk(mu_);
  // The latest reason: a stop after a writer that could not be restarted says stopped.
  closed_code_ = code;
  closed_why_ = std::move(why);
  closed_ = true;
  wake_ = nullptr;
  std::vector<BlockingWritePtr> out(std::make_move_iterator(items_.begin()),
                                    std::make_move_iterator(items_.end()));
  items_.clear();
  size_.store(0, std::memory_order_release);
  return out;
}

void WriteQueue::reopen() {
  std::lock_guard lk(mu_);
  closed_ = false;
  closed_why_.clear();
}

bool WriteQueue::wait_for_next_write(std::chrono::microseconds idle_wait) {
  if (idle_wait_score_ == 0 && ++idle_wait_skips_ % 16 != 0) return false;
  auto until = std::chrono::steady_clock::now() + idle_wait;
  while (!maybe_nonempty() && std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  bool caught = maybe_nonempty();
  idle_wait_score_ =
      caught ? std::min(idle_wait_score_ + 1, 16) : std::max(idle_wait_score_ - 4, 0);
  return caught;
}

std::vector<BlockingWritePtr> WriteQueue::take_latecomers(
    std::size_t have, std::chrono::steady_clock::duration last_commit) {
  auto expected = queued_at_last_commit_ + last_group_size_;
  if (last_group_size_ >= 2 && have + size() < expected &&
      (latecomer_wait_score_ > 0 || ++latecomer_wait_skips_ % 16 == 0)) {
    auto until =
        std::chrono::steady_clock::now() + std::min<std::chrono::steady_clock::duration>(
                                               last_commit / 2, std::chrono::microseconds(500));
    while (have + size() < expected && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();  // the callers need the CPU more than this thread
    bool caught = have + size() >= expected;
    latecomer_wait_score_ =
        caught ? std::min(latecomer_wait_score_ + 1, 16) : std::max(latecomer_wait_score_ - 2, 0);
  }
  return take();
}

}  // namespace beehive::detail
