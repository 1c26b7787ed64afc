#pragma once

// The lock BeehiveCore holds while start or stop runs (stop holds it while it drains, up
// to its deadline). Callers take it within their own context, so it waits with a
// timeout: a TimedLockable, like std::timed_mutex, whose timed waits ThreadSanitizer
// cannot see (libstdc++ takes them with pthread_mutex_clocklock, which it does not
// intercept), and so reports every unlock after one as an unlock of an unlocked mutex.
//
// Thread-safety: every member is safe from any thread; unlock is the holder's.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace beehive::detail {

class LifecycleMutex {
 public:
  void lock() {
    std::unique_lock lk(mu_);
    free_.wait(lk, [this] { return !held_; });
    held_ = true;
  }
  bool try_lock() {
    std::lock_guard lk(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    std::unique_lock lk(mu_);
    if (!free_.wait_until(lk, until, [this] { return !held_; })) return false;
    held_ = true;
    return true;
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until(std::chrono::steady_clock::now() + d);
  }
  void unlock() {
    {
      std::lock_guard lk(mu_);
      held_ = false;
    }
    free_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable free_;
  bool held_ = false;
};

}  // namespace beehive::detail
