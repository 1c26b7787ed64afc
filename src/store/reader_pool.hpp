#pragma once

// The pool of reader connections a store lends to callers' threads: at most `limit`
// open at once, opened on demand, a caller waiting while every one is lent. A connection
// that failed (its `failed()` says so) is closed when returned rather than lent again:
// whatever broke it must not fail the next reader too; its slot opens a fresh one.
//
// Thread-safe: lease() from any thread; the lease returns its connection from any thread.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <beehive/errors.hpp>

#include "store/backend.hpp"

namespace beehive::store {

template <class Conn>
class ReaderPool {
 public:
  explicit ReaderPool(int limit) : limit_(limit < 1 ? 1 : limit) {}

  /// A connection for the calling thread; `open` makes a new one when the pool has
  /// none free and fewer than `limit` open (its exception propagates, freeing the slot).
  /// While every one is lent, waits as long as `keep_waiting` (asked every 10 ms; empty:
  /// for ever) says, then throws errc::store.
  ReaderLease lease(const std::function<std::unique_ptr<Conn>()>& open,
                    const std::function<bool()>& keep_waiting = {}) {
    std::unique_lock lk(mu_);
    auto available = [&] { return !free_.empty() || opened_ < limit_; };
    if (!keep_waiting)
      cv_.wait(lk, available);
    else
      while (!cv_.wait_for(lk, std::chrono::milliseconds(10), available))
        if (!keep_waiting())
          throw Error(errc::store, "gave up waiting for a reader connection: all are in use");
    std::unique_ptr<Conn> r;
    if (!free_.empty()) {
      r = std::move(free_.back());
      free_.pop_back();
    } else {
      ++opened_;
      lk.unlock();
      try {
        r = open();
      } catch (...) {
        lk.lock();
        --opened_;
        cv_.notify_one();
        throw;
      }
    }
    return ReaderLease(r.release(), [this](Reader* p) { give_back(static_cast<Conn*>(p)); });
  }

 private:
  void give_back(Conn* p) {
    std::unique_ptr<Conn> conn(p);
    {
      std::lock_guard g(mu_);
      if (conn->failed())
        --opened_;
      else
        free_.push_back(std::move(conn));
    }
    cv_.notify_one();
    conn.reset();  // outside the lock
  }

  const int limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> free_;
  int opened_ = 0;
};

}  // namespace beehive::store
