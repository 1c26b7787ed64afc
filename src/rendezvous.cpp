#include "rendezvous.hpp"

#include "context_internal.hpp"

namespace beehive::detail {

namespace {
// Cancellation has no wake-up of its own; a waiting caller looks this often.
constexpr auto cancel_poll = std::chrono::milliseconds(10);
}  // namespace

bool RendezvousBase::ready() const {
  std::lock_guard lk(mu_);
  return ready_;
}

bool RendezvousBase::mark_ready_locked() {
  if (ready_) return false;
  ready_ = true;
  return true;
}

void RendezvousBase::fail(errc code, std::string what) {
  {
    std::lock_guard lk(mu_);
    if (!mark_ready_locked()) return;
    error_.emplace(code, std::move(what));
  }
  cv_.notify_one();
}

void RendezvousBase::wait(const Context& ctx) {
  std::unique_lock lk(mu_);
  for (;;) {
    if (ready_) {
      if (error_) throw Error(error_->first, error_->second);
      return;
    }
    if (auto ec = ctx.error()) {
      abandoned_.store(true, std::memory_order_release);
      throw Error(static_cast<errc>(ec.value()));
    }
    auto wake = ctx.deadline();
    if (ContextAccess::can_end(ctx)) {
      auto poll = std::chrono::steady_clock::now() + cancel_poll;
      if (!wake || poll < *wake) wake = poll;
    }
    if (wake)
      cv_.wait_until(lk, *wake);
    else
      cv_.wait(lk);
  }
}

}  // namespace beehive::detail
