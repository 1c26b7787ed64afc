#include <beehive/time.hpp>

#include <beehive/detail/saturate.hpp>

namespace beehive {

Time SystemClock::now() const { return std::chrono::system_clock::now(); }

ManualClock::ManualClock(Time start) : now_(start) {}

Time ManualClock::now() const {
  std::lock_guard lk(mu_);
  return now_;
}

void ManualClock::advance(std::chrono::milliseconds d) {
  if (d.count() <= 0) return;
  {
    std::lock_guard lk(mu_);
    now_ = detail::saturating_add(now_, d);
  }
  notify();
}

void ManualClock::set(Time t) {
  {
    std::lock_guard lk(mu_);
    if (t <= now_) return;
    now_ = t;
  }
  notify();
}

int ManualClock::subscribe(std::function<void()> fn) {
  std::lock_guard lk(mu_);
  listeners_.emplace_back(++next_token_, std::move(fn));
  return next_token_;
}

void ManualClock::unsubscribe(int token) {
  {
    std::lock_guard lk(mu_);
    std::erase_if(listeners_, [token](auto& l) { return l.first == token; });
  }
  // A notify that copied the listener before it went may still be calling it: wait.
  std::lock_guard wait(calling_);
}

void ManualClock::notify() {
  std::lock_guard calling(calling_);
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard lk(mu_);
    for (auto& l : listeners_) fns.push_back(l.second);
  }
  for (auto& f : fns) f();
}

std::int64_t to_millis(Time t) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

Time from_millis(std::int64_t ms) noexcept {
  return Time{std::chrono::duration_cast<Time::duration>(std::chrono::milliseconds(ms))};
}

}  // namespace beehive
