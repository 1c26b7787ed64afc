#pragma once

// HeldReader: holds a beehive's reader actor (where watch snapshots, controller listings
// and requeue checks are read) until released, for tests of what waits behind a slow
// read.

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include <caf/message.hpp>
#include <caf/send.hpp>

#include "actors/reader.hpp"
#include "beehive_core.hpp"

namespace beehive::test {

/// Holds the beehive's reader until released: a slow read. Released when it leaves scope
/// at the latest, or after `limit` (so that a call that ignores its context cannot hang
/// the test).
class HeldReader {
 public:
  HeldReader(detail::BeehiveCore& core, std::chrono::milliseconds limit) {
    std::promise<void> entered;
    auto held = entered.get_future();
    caf::anon_send(core.reader(), detail::ReadJob{[gate = gate_, &entered](store::Reader&) {
                     entered.set_value();
                     std::unique_lock lk(gate->mu);
                     gate->cv.wait(lk, [&] { return gate->released; });
                     return caf::make_message(true);
                   }});
    held.wait();
    watchdog_ = std::thread([gate = gate_, limit] {
      std::unique_lock lk(gate->mu);
      gate->cv.wait_for(lk, limit, [&] { return gate->released; });
      gate->released = true;
      gate->cv.notify_all();
    });
  }
  ~HeldReader() {
    release();
    watchdog_.join();
  }
  void release() {
    std::lock_guard lk(gate_->mu);
    gate_->released = true;
    gate_->cv.notify_all();
  }

 private:
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool released = false;
  };
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::thread watchdog_;
};

}  // namespace beehive::test
