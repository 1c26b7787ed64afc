#include "actors/write_queue.hpp"

#include <beehive/errors.hpp>

namespace beehive::detail {

void WriteQueue::set_wake(std::function<void()> wake) {
  std::lock_guard lk(mu_);
  wake_ = std::move(wake);
}

void WriteQueue::push(BlockingWritePtr w) {
  std::lock_guard lk(mu_);
  if (closed_) throw Error(errc::stopped, "beehive stopped");
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

std::vector<BlockingWritePtr> WriteQueue::close() {
  std::lock_guard lk(mu_);
  closed_ = true;
  wake_ = nullptr;
  std::vector<BlockingWritePtr> out(std::make_move_iterator(items_.begin()),
                                    std::make_move_iterator(items_.end()));
  items_.clear();
  size_.store(0, std::memory_order_release);
  return out;
}

}  // namespace beehive::detail
