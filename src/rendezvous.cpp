#include "rendezvous.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include "context_internal.hpp"

namespace beehive::detail {

namespace {
// Spinning pays only while a core is free for the thread that will reply and replies come
// within the spin: callers spin one fewer at a time than there are cores, and stop
// spinning while recent spins ran out (probing now and then to notice when they pay again).
std::atomic<int> spinners{0};
std::atomic<int> spin_credit{8};  // 0..16: up on a spin that caught its reply
std::atomic<unsigned> spin_probe{0};
int max_spinners() {
  static const int n = [] {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    return cores > 1 ? cores - 1 : 0;
  }();
  return n;
}

bool may_spin() {
  if (spin_credit.load(std::memory_order_relaxed) <= 0 &&
      spin_probe.fetch_add(1, std::memory_order_relaxed) % 16 != 0)
    return false;
  if (spinners.fetch_add(1, std::memory_order_acq_rel) >= max_spinners()) {
    spinners.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  return true;
}

void spun(bool caught) {
  spinners.fetch_sub(1, std::memory_order_acq_rel);
  int c = spin_credit.load(std::memory_order_relaxed);
  int next = caught ? std::min(c + 1, 16) : std::max(c - 4, 0);
  spin_credit.compare_exchange_strong(c, next, std::memory_order_relaxed);
}
}  // namespace

/// What a cancellation's listener wakes: the waiting slot, until its wait returns (the
/// listener may be called after, from the cancelling thread).
struct RendezvousBase::Waker {
  std::mutex mu;
  RendezvousBase* slot = nullptr;
};

bool RendezvousBase::give_up() const {
  int expected = open;
  return claim_.compare_exchange_strong(expected, given_up, std::memory_order_acq_rel) ||
         expected == given_up;
}

bool RendezvousBase::claim() {
  if (abandoned()) return false;
  int expected = open;
  return claim_.compare_exchange_strong(expected, claimed, std::memory_order_acq_rel) ||
         expected == claimed;
}

bool RendezvousBase::abandoned() const {
  return claim_.load(std::memory_order_acquire) == given_up;
}

bool RendezvousBase::ready() const {
  std::lock_guard lk(mu_);
  return ready_;
}

bool RendezvousBase::mark_ready_locked() {
  if (ready_) return false;
  ready_ = true;
  ready_flag_.store(true, std::memory_order_release);
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

void RendezvousBase::wait(const Context& ctx, bool spin) {
  // A reply usually comes within tens of microseconds: spinning that long is cheaper
  // than sleeping and being woken (a thread wake-up costs about as much here).
  if (spin && may_spin()) {
    auto spin_until = std::chrono::steady_clock::now() + reply_spin;
    while (!ready_flag_.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < spin_until) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    spun(ready_flag_.load(std::memory_order_acquire));
  }
  // Declared before the lock: they go once it is released (a cancellation's wake takes it).
  std::shared_ptr<Waker> waker;
  std::optional<CancelListener> on_cancel;
  struct Forget {
    std::shared_ptr<Waker>& waker;
    ~Forget() {
      if (!waker) return;
      std::lock_guard lk(waker->mu);
      waker->slot = nullptr;
    }
  } forget{waker};
  std::unique_lock lk(mu_);
  if (!ready_ && ContextAccess::can_be_cancelled(ctx)) {
    // A cancellation wakes the caller at once (registered before its first look at the
    // context): it never polls the flag.
    waker = std::make_shared<Waker>();
    waker->slot = this;
    on_cancel.emplace(ctx, [w = waker] {
      std::lock_guard wl(w->mu);
      if (!w->slot) return;
      { std::lock_guard lk(w->slot->mu_); }  // the caller looks at the context, or waits
      w->slot->cv_.notify_all();
    });
  }
  for (;;) {
    if (ready_) {
      if (error_) throw Error(error_->first, error_->second);
      return;
    }
    if (auto ec = ctx.error(); ec && give_up()) throw Error(static_cast<errc>(ec.value()));
    if (claim_.load(std::memory_order_acquire) == claimed) {
      cv_.wait(lk);  // being applied: the outcome comes, whatever the context says
      continue;
    }
    if (auto deadline = ctx.deadline())
      cv_.wait_until(lk, *deadline);
    else
      cv_.wait(lk);
  }
}

}  // namespace beehive::detail
