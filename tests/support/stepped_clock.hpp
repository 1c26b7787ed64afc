#pragma once

// A wall clock that stands still until stepped, back as well as forward (an operator or
// NTP correcting it), which a ManualClock never does. Timers armed on it run on real
// time, as on the system clock.

#include <chrono>
#include <mutex>

#include <beehive/time.hpp>

namespace beehive::test {

class SteppedClock : public Clock {
 public:
  Time now() const override {
    std::lock_guard lk(mu_);
    return now_;
  }
  void step(std::chrono::milliseconds d) {
    std::lock_guard lk(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  Time now_ = ManualClock().now();
};

}  // namespace beehive::test
