#pragma once

// A one-shot reply slot between a blocked caller thread and the actor serving it. The
// caller waits, bounded by its Context; the actor delivers a value or fails it.
//
// Whoever comes first decides the outcome, once: the writer claims the slot before it
// applies the write, or the caller, when its context ends, abandons it. A claimed write
// is answered with its real outcome even if the caller's deadline passes meanwhile (the
// caller keeps waiting); an abandoned one is never applied. So a caller that sees
// deadline_exceeded or cancelled knows that nothing of its call was written.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <beehive/context.hpp>
#include <beehive/errors.hpp>

namespace beehive::detail {

/// How long a caller spins for its reply before it sleeps, when spinning is allowed.
inline constexpr std::chrono::microseconds reply_spin{80};

class RendezvousBase {
 public:
  virtual ~RendezvousBase() = default;

  /// The caller gave up waiting.
  bool abandoned() const;
  /// The writer is about to apply the write: from now on the caller waits for its
  /// outcome whatever its context says. False when the caller gave up first (then the
  /// write must not be applied).
  bool claim();
  /// A value or an error has been delivered.
  bool ready() const;
  /// Delivers an error (ignored after the first delivery).
  void fail(errc code, std::string what);

 protected:
  /// Blocks until delivery or the end of `ctx`; throws the delivered error or the
  /// context's. Returns with the value ready. `spin`: the reply may come soon enough
  /// that spinning for it briefly is cheaper than sleeping (see reply_spin).
  void wait(const Context& ctx, bool spin);
  /// Marks delivered; the caller holds `mu_`.
  bool mark_ready_locked();

  mutable std::mutex mu_;
  std::condition_variable cv_;

 private:
  struct Waker;
  bool ready_ = false;
  std::atomic<bool> ready_flag_{false};  // ready_, readable without the lock (spinning)
  std::optional<std::pair<errc, std::string>> error_;
  enum : int { open, claimed, given_up };
  /// Moves open -> given_up; false when the writer claimed the slot first.
  bool give_up() const;
  mutable std::atomic<int> claim_{open};
};

template <class T>
class Rendezvous : public RendezvousBase {
 public:
  /// False when the caller will never see it: it gave up waiting (or another
  /// delivery came first). The writer undoes what it cannot undo silently (a session
  /// it opened for a caller that has gone).
  bool deliver(T value) {
    {
      std::lock_guard lk(mu_);
      if (abandoned() || !mark_ready_locked()) return false;
      value_ = std::move(value);
    }
    cv_.notify_one();
    return true;
  }

  T take(const Context& ctx, bool spin = true) {
    wait(ctx, spin);
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

}  // namespace beehive::detail
