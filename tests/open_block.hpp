#pragma once

// OpenBlock: a `within` block held open on another thread, for tests of what meets a
// block that has not ended yet (a stop, a writer crash, writes and blocks queued behind
// it).

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>

#include <beehive/context.hpp>

namespace beehive::test {

/// Runs `cc.within(ctx, ...)` on its own thread: `first(tx)`, then the block waits until
/// release() (or `limit`, so that a test that goes wrong cannot hang), then `then(tx)`
/// if given. The constructor returns once `first` has run (or rethrows what the block
/// threw before). `cc` must outlive the OpenBlock.
class OpenBlock {
 public:
  using Step = std::function<void(const Context&)>;

  template <class ControllerClientT>
  OpenBlock(const ControllerClientT& cc, Context ctx, Step first, Step then = {},
            std::chrono::milliseconds limit = std::chrono::seconds(30))
      : released_(release_.get_future().share()) {
    // Shared: the thread may still be inside set_value when the constructor returns.
    auto inside = std::make_shared<std::promise<void>>();
    auto opened = inside->get_future();
    done_ =
        std::async(std::launch::async, [&cc, ctx, first = std::move(first), then = std::move(then),
                                        limit, inside, released = released_] {
          bool signalled = false;
          try {
            cc.within(ctx, [&](const Context& tx) {
              first(tx);
              signalled = true;
              inside->set_value();
              released.wait_for(limit);
              if (then) then(tx);
            });
          } catch (...) {
            if (!signalled) inside->set_exception(std::current_exception());
            throw;
          }
        });
    opened.get();
  }
  OpenBlock(const OpenBlock&) = delete;
  OpenBlock& operator=(const OpenBlock&) = delete;
  ~OpenBlock() {
    release();
    if (done_.valid()) done_.wait();
  }

  /// Lets the block go on to `then` and its end.
  void release() {
    if (!was_released_.exchange(true)) release_.set_value();
  }
  /// Waits, at most `d`, for release(): for another thread's work that should last as
  /// long as the block is held.
  void wait_released(std::chrono::milliseconds d) const { released_.wait_for(d); }
  /// Releases the block and returns how it ended: rethrows what `within` threw.
  void get() {
    release();
    done_.get();
  }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_;
  std::atomic<bool> was_released_{false};
  std::future<void> done_;
};

}  // namespace beehive::test
