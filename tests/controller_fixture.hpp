#pragma once

// Helpers for tests with controllers: a manual clock, a beehive built on it, a
// recording controller, and a bounded wait for asynchronous effects (never a sleep
// through a backoff or a resync: time moves only through the manual clock).

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "fixture.hpp"

namespace beehive::test {

using namespace std::chrono_literals;

/// Whether object `id` is gone from the store (removed, not only deletion-pending).
inline bool gone(const Widgets& w, const Context& ctx, ObjectID id) {
  try {
    w.get(ctx, id);
    return false;
  } catch (const Error& e) {
    return e.code() == errc::not_found;
  }
}

/// Polls `pred` until it holds or `limit` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

/// Holds the reconciles that pass through it until it opens: a reconcile body calls
/// `pass()`, the test waits with `wait_entered()` (once) for the first to arrive, and
/// `open()` lets every one go.
class Gate {
 public:
  void pass() {
    if (!arrived_.exchange(true)) entered_.set_value();
    released_.wait();
  }
  void wait_entered() { entered_.get_future().wait(); }
  void open() {  // once, or again (a guard that opens it however a test ends)
    if (!opened_.exchange(true)) release_.set_value();
  }

 private:
  std::promise<void> entered_, release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::atomic<bool> arrived_{false}, opened_{false};
};

/// A logger that keeps every entry (its message and its fields), for checks of what was
/// (not) logged. The entries are shared with the logger it hands out, so a beehive that
/// logs while it stops after the capture has gone (a fixture's member) writes nowhere
/// harmful.
class LogCapture {
 public:
  Logger logger() {
    return [state = state_](LogLevel, std::string_view message, const LogFields& fields) {
      std::string entry(message);
      for (auto& [key, value] : fields) entry += " " + key + "=" + value;
      std::lock_guard lk(state->mu);
      state->messages.push_back(std::move(entry));
    };
  }
  /// Whether any entry contains `text`.
  bool contains(std::string_view text) const {
    std::lock_guard lk(state_->mu);
    for (auto& m : state_->messages)
      if (m.find(text) != std::string::npos) return true;
    return false;
  }

 private:
  struct State {
    std::mutex mu;
    std::vector<std::string> messages;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

/// Counts reconciles per id and runs a test-provided body.
class Recorder {
 public:
  using Body = std::function<Result(const Context&, ControllerClient<WidgetStatus>&,
                                    const Object<WidgetSpec, WidgetStatus>&)>;

  void set_body(Body b) {
    std::lock_guard lk(mu_);
    body_ = std::move(b);
  }

  /// Holds the reconciles of objects whose spec color is `color` at `gate`; the others
  /// succeed at once.
  void hold(Gate& gate, std::string color) {
    set_body([&gate, color = std::move(color)](auto&, auto&, auto& o) {
      if (o.spec.color == color) gate.pass();
      return Result{};
    });
  }

  Result operator()(const Context& ctx, ControllerClient<WidgetStatus>& cc,
                    const Object<WidgetSpec, WidgetStatus>& o) {
    Body body;
    {
      std::lock_guard lk(mu_);
      ++counts_[o.id];
      ++total_;
      last_[o.id] = o;
      body = body_;
    }
    if (body) return body(ctx, cc, o);
    return {};
  }

  int count(ObjectID id) const {
    std::lock_guard lk(mu_);
    auto it = counts_.find(id);
    return it == counts_.end() ? 0 : it->second;
  }
  int total() const {
    std::lock_guard lk(mu_);
    return total_;
  }
  Object<WidgetSpec, WidgetStatus> last(ObjectID id) const {
    std::lock_guard lk(mu_);
    auto it = last_.find(id);
    return it == last_.end() ? Object<WidgetSpec, WidgetStatus>{} : it->second;
  }

 private:
  mutable std::mutex mu_;
  Body body_;
  std::map<ObjectID, int> counts_;
  std::map<ObjectID, Object<WidgetSpec, WidgetStatus>> last_;
  int total_ = 0;
};

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override { open(); }
  void TearDown() override { close(); }

  template <class... Opts>
  void open(Opts&&... opts) {
    close();
    store_ = open_test_store(dir_.file("beehive.db"), store_options_);
    bh_ = std::make_unique<Beehive>(store_, with_clock(clock_), std::forward<Opts>(opts)...);
  }
  void close() {
    if (stop_) {
      try {
        stop_(Context{}.with_timeout(10s));
      } catch (...) {
      }
      stop_ = nullptr;
    }
    bh_.reset();
    store_.reset();
  }

  /// Stops the beehive when the returned guard leaves scope. A test whose reconcile body
  /// captures locals by reference declares the guard right after them: the locals then
  /// outlive every reconcile, however the test returns.
  [[nodiscard]] auto stop_before_locals() {
    struct Guard {
      ControllerTest* test;
      ~Guard() { test->close(); }
    };
    return Guard{this};
  }

  /// Registers the recorder for widgets.
  template <class... Opts>
  ControllerClient<WidgetStatus> register_widgets(Opts&&... opts) {
    return register_controller<WidgetSpec, WidgetStatus>(
        *bh_, widget_kind,
        [r = recorder_](auto& ctx, auto& cc, auto& o) { return (*r)(ctx, cc, o); },
        std::forward<Opts>(opts)...);
  }

  void start() { stop_ = bh_->start(ctx_); }

  /// Returns once nothing is left to do at the clock's current time (the kit's exact
  /// settle): what a check of "nothing more happens" needs, without a sleep.
  void settle() { beehive::testing::settle(*bh_, Context{}.with_timeout(10s)); }

  Widgets widgets() { return Widgets(*bh_, widget_kind); }

  /// Waits until the object's schedule is `t`.
  bool scheduled_at(ObjectID id, Time t) {
    auto w = widgets();
    return eventually([&] { return w.get_schedule(ctx_, id).next_requeue_at == t; });
  }

  TempDir dir_;
  sqlite::Options store_options_;  ///< what open() opens a SQLite store with
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Recorder> recorder_ = std::make_shared<Recorder>();
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  Stop stop_;
  Context ctx_;
};

}  // namespace beehive::test
