#pragma once

// The shared state behind a Stream<T>: a conflating queue with one producer side (a
// beehive actor pushing changes) and one consumer (the Stream). Not for direct use.
//
// Internal: the producer and the consumer run on different threads; every member
// locks.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <system_error>
#include <unordered_map>

#include <beehive/context.hpp>

namespace beehive::detail {

class StreamCoreBase {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit StreamCoreBase(Context ctx) : ctx_(std::move(ctx)) {}
  virtual ~StreamCoreBase() = default;

  /// Consumer side: end now and drop what is pending.
  void close();
  /// Producer side: end after what is pending has been delivered; `why` becomes error().
  void finish(std::error_code why);
  bool done() const;
  std::error_code error() const;
  /// Called once, without the lock, when the stream ends for any reason (unsubscribes).
  void set_on_end(std::function<void()> fn);

  /// Producer side, for a stream that tracks versions: every value pushed from now on
  /// is above `version` (a snapshot's, or a resume point), those pushed before at or
  /// below it.
  void set_floor(std::int64_t version);
  /// Consumer side: the version up to which every value has been delivered, so that a
  /// watch resumed from it misses nothing; 0 while the values at or below the floor are
  /// still being delivered, and for streams that do not track versions.
  std::int64_t position() const;

 protected:
  /// Waits with `lk` held until something is pending or the stream ended, or `until`
  /// passed. Returns true when something is pending.
  bool wait_pending(std::unique_lock<std::mutex>& lk, std::optional<Deadline> until);
  /// Must be called without the lock; runs the end callback once.
  void run_on_end();

  virtual bool has_pending_locked() const = 0;
  virtual void drop_pending_locked() = 0;
  /// The smallest version folded into a pending value, if any is pending.
  virtual std::optional<std::int64_t> oldest_pending_locked() const = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ended_ = false;                 // nothing more will be pushed
  bool finishing_ = false;             // producer ended; deliver the rest first
  std::optional<std::int64_t> floor_;  // see set_floor
  std::int64_t pushed_max_ = 0;        // the highest version pushed

 private:
  Context ctx_;
  std::error_code error_;
  std::function<void()> on_end_;
};

template <class T>
class StreamCore : public StreamCoreBase {
 public:
  /// Folds `incoming` into the `pending` value of the same key; returns false to drop
  /// the key altogether. The default keeps the newest value.
  using Merge = std::function<bool(T& pending, T&& incoming)>;
  /// The version of a value, for streams that track versions (see position()).
  using Version = std::function<std::int64_t(const T&)>;

  explicit StreamCore(Context ctx, Merge merge = {}, Version version = {})
      : StreamCoreBase(std::move(ctx)), merge_(std::move(merge)), version_(std::move(version)) {}

  /// Queues `value` under `key`, conflating with a value of that key not yet delivered.
  /// Returns false when the stream has ended (the producer should unsubscribe).
  bool push(std::int64_t key, T value) {
    {
      std::lock_guard lk(mu_);
      if (ended_ || finishing_) return false;
      put_locked(key, std::move(value));
    }
    cv_.notify_one();
    return true;
  }

  /// Queues several values under one lock and wakes the consumer once: `fill` is called
  /// with a `put(key, value)` callable. Returns false when the stream has ended.
  template <class Fill>
  bool push_batch(Fill&& fill) {
    bool any = false;
    {
      std::lock_guard lk(mu_);
      if (ended_ || finishing_) return false;
      fill([&](std::int64_t key, T value) {
        put_locked(key, std::move(value));
        any = true;
      });
    }
    if (any) cv_.notify_one();
    return true;
  }

  /// Values queued and not yet delivered.
  std::size_t pending() const {
    std::lock_guard lk(mu_);
    return order_.size();
  }

  /// Everything pending, in order, without waiting.
  std::vector<T> take_all() {
    std::vector<T> out;
    std::lock_guard lk(mu_);
    out.reserve(order_.size());
    for (auto key : order_) out.push_back(std::move(pending_.at(key)));
    order_.clear();
    pending_.clear();
    since_.clear();
    return out;
  }

  std::optional<T> pop(std::optional<Deadline> until) {
    std::unique_lock lk(mu_);
    if (!wait_pending(lk, until)) {
      bool end_now = ended_;
      lk.unlock();
      if (end_now) run_on_end();
      return std::nullopt;
    }
    auto key = order_.front();
    order_.pop_front();
    since_.erase(key);
    auto node = pending_.extract(key);
    return std::move(node.mapped());
  }

 private:
  void put_locked(std::int64_t key, T&& value) {
    if (version_) {
      auto v = version_(value);
      pushed_max_ = std::max(pushed_max_, v);
      since_.try_emplace(key, v);  // a value folded into a pending one keeps its first
    }
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      pending_.emplace(key, std::move(value));
      order_.push_back(key);
    } else if (!merge_) {
      it->second = std::move(value);
    } else if (!merge_(it->second, std::move(value))) {
      pending_.erase(it);
      since_.erase(key);
      order_.erase(std::find(order_.begin(), order_.end(), key));
    }
  }

  bool has_pending_locked() const override { return !order_.empty(); }
  void drop_pending_locked() override {
    order_.clear();
    pending_.clear();
    since_.clear();
  }
  std::optional<std::int64_t> oldest_pending_locked() const override {
    if (since_.empty()) return std::nullopt;
    std::int64_t oldest = since_.begin()->second;
    for (auto& [key, v] : since_) oldest = std::min(oldest, v);
    return oldest;
  }

  Merge merge_;
  Version version_;
  std::deque<std::int64_t> order_;
  std::unordered_map<std::int64_t, T> pending_;
  std::unordered_map<std::int64_t, std::int64_t> since_;  // key -> first version pending
};

}  // namespace beehive::detail
