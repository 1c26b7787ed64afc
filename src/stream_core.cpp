#include <beehive/detail/stream_core.hpp>

#include <beehive/errors.hpp>

#include "context_internal.hpp"

namespace beehive::detail {

/// What a cancellation calls: the core while it lives (the call may come on the
/// cancelling thread as the core goes).
struct StreamCoreBase::Waker {
  std::mutex mu;
  StreamCoreBase* core = nullptr;
};

StreamCoreBase::StreamCoreBase(Context ctx) : ctx_(std::move(ctx)) {
  if (!ContextAccess::can_be_cancelled(ctx_)) return;
  // A cancellation wakes a waiting consumer at once: idle streams never poll the flag.
  waker_ = std::make_shared<Waker>();
  waker_->core = this;
  on_cancel_ = std::make_shared<CancelListener>(ctx_, [w = waker_] {
    std::lock_guard lk(w->mu);
    if (w->core) w->core->wake();
  });
}

StreamCoreBase::~StreamCoreBase() {
  if (!waker_) return;
  std::lock_guard lk(waker_->mu);
  waker_->core = nullptr;
}

void StreamCoreBase::wake() {
  // Taken once: a consumer between its look at the context and its wait holds the lock,
  // so it is either before the look (and sees the cancellation) or waiting (notified).
  // Nothing else: this runs on the cancelling thread, possibly while the stream is being
  // built or destroyed (no virtual call is safe), and possibly holding locks of the
  // beehive's own. What is pending goes at the producer's next push (refuses_locked)
  // or the consumer's next look.
  { std::lock_guard lk(mu_); }
  cv_.notify_all();
}

bool StreamCoreBase::refuses_locked() {
  if (ended_ || finishing_) return true;
  if (!ctx_.done()) return false;
  ended_ = true;  // as wait_pending does: the consumer's own context, no error
  abandon_pending_locked();
  return true;
}

void StreamCoreBase::close() {
  {
    std::lock_guard lk(mu_);
    // Ended by the caller before the producer's end was read through: no error.
    if (!ended_) error_ = {};
    ended_ = true;
    abandon_pending_locked();
  }
  cv_.notify_all();
  run_on_end();
}

void StreamCoreBase::finish(std::error_code why) {
  bool end_now;
  {
    std::lock_guard lk(mu_);
    if (ended_ || finishing_) return;
    finishing_ = true;
    error_ = why;
    end_now = !has_pending_locked();
    if (end_now) ended_ = true;
  }
  cv_.notify_all();
  if (end_now) run_on_end();
}

bool StreamCoreBase::done() const {
  std::lock_guard lk(mu_);
  return ended_ || (finishing_ && !has_pending_locked()) || ctx_.done();
}

std::error_code StreamCoreBase::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

void StreamCoreBase::set_on_end(std::function<void()> fn) {
  std::lock_guard lk(mu_);
  on_end_ = std::move(fn);
}

void StreamCoreBase::run_on_end() {
  std::function<void()> fn;
  {
    std::lock_guard lk(mu_);
    fn.swap(on_end_);
  }
  if (fn) fn();
}

bool StreamCoreBase::wait_pending(std::unique_lock<std::mutex>& lk, std::optional<Deadline> until) {
  for (;;) {
    if (ended_) return false;
    if (ctx_.done()) {
      ended_ = true;  // the consumer's own context: no error, drop the rest
      error_ = {};
      abandon_pending_locked();
      return false;
    }
    if (has_pending_locked()) return true;
    if (finishing_) {
      ended_ = true;
      return false;
    }
    auto now = std::chrono::steady_clock::now();
    if (until && now >= *until) return false;
    std::optional<Deadline> wake = until;
    if (auto d = ctx_.deadline(); d && (!wake || *d < *wake)) wake = *d;
    if (wake)
      cv_.wait_until(lk, *wake);
    else
      cv_.wait(lk);
  }
}

void StreamCoreBase::set_floor(std::int64_t version) {
  std::lock_guard lk(mu_);
  floor_ = version;
}

void StreamCoreBase::passed(std::int64_t version) {
  std::lock_guard lk(mu_);
  pushed_max_ = std::max(pushed_max_, version);
}

void StreamCoreBase::hold_below(ObjectID id, std::int64_t version) {
  std::lock_guard lk(mu_);
  auto [it, fresh] = held_.try_emplace(id, version - 1);
  if (!fresh) it->second = std::min(it->second, version - 1);
  holding_.store(true, std::memory_order_relaxed);
}

void StreamCoreBase::lift_hold_slow(ObjectID id) {
  std::lock_guard lk(mu_);
  held_.erase(id);
  holding_.store(!held_.empty(), std::memory_order_relaxed);
}

void StreamCoreBase::abandon_pending_locked() {
  // What is dropped was never delivered: a resume from the position must replay it, and
  // what the producer passes from now on is dropped too.
  if (!frozen_) frozen_ = position_locked();
  drop_pending_locked();
}

std::int64_t StreamCoreBase::position() const {
  std::lock_guard lk(mu_);
  return frozen_ ? *frozen_ : position_locked();
}

std::int64_t StreamCoreBase::position_locked() const {
  if (!floor_) return 0;
  auto oldest = oldest_pending_locked();
  std::int64_t delivered = 0;
  if (!oldest)
    delivered = std::max(*floor_, pushed_max_);
  else if (*oldest > *floor_)
    delivered = *oldest - 1;
  // (Else a value at or below the floor is still pending: the snapshot is not all
  // delivered, and nothing would replay the rest of it.)
  for (auto& [id, below] : held_) delivered = std::min(delivered, std::max<std::int64_t>(0, below));
  return delivered;
}

}  // namespace beehive::detail
