#include "store/postgres/pg_note_queue.hpp"

#include <iterator>
#include <utility>

namespace beehive::store::pg {

bool NoteQueue::push(std::vector<std::string> notes) {
  std::lock_guard g(mu_);
  bool was_empty = notes_.empty();
  notes_.insert(notes_.end(), std::make_move_iterator(notes.begin()),
                std::make_move_iterator(notes.end()));
  return was_empty;
}

void NoteQueue::clear() {
  std::lock_guard g(mu_);
  notes_.clear();
}

void NoteQueue::on_ask(std::function<void()> wake) {
  std::lock_guard g(mu_);
  wake_ = std::move(wake);
}

void NoteQueue::set_listening(bool listening) {
  {
    std::lock_guard g(mu_);
    listening_ = listening;
  }
  if (!listening) answered_cv_.notify_all();
}

void NoteQueue::answered(std::uint64_t ticket) {
  {
    std::lock_guard g(mu_);
    if (ticket <= answered_) return;
    answered_ = ticket;
  }
  answered_cv_.notify_all();
}

std::vector<std::string> NoteQueue::take() {
  std::lock_guard g(mu_);
  return std::exchange(notes_, {});
}

bool NoteQueue::await_sent(std::chrono::milliseconds limit) {
  std::unique_lock l(mu_);
  if (!listening_ || !wake_) return false;
  auto ticket = asked_.fetch_add(1, std::memory_order_acq_rel) + 1;
  wake_();
  // A connection lost meanwhile answers nothing; one made anew answers later tickets
  // (the notes sent in between are missed, which the new connection's empty note says).
  return answered_cv_.wait_for(l, limit, [&] { return answered_ >= ticket || !listening_; }) &&
         answered_ >= ticket;
}

}  // namespace beehive::store::pg
