#pragma once

// The shared state behind a Stream<T>: a conflating queue with one producer side (a
// beehive actor pushing changes) and one consumer (the Stream). Not for direct use.
//
// Internal: the producer and the consumer run on different threads; every member
// locks.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <beehive/context.hpp>
#include <beehive/group_kind.hpp>

namespace beehive::detail {

class StreamCoreBase {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit StreamCoreBase(Context ctx);
  virtual ~StreamCoreBase();

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
  /// Producer side, for a stream that tracks versions: the changes up to `version` have
  /// all been handled, pushed or left out as none of the reader's business (one it
  /// never had, gone again), so that position() moves past them.
  void passed(std::int64_t version);
  /// Consumer side: a change of object `id` at `version` was taken but not delivered (its
  /// row did not decode): position() stays below it until a later change of the object
  /// is delivered (lift_hold), so that a watch resumed meanwhile replays it (to a build
  /// that may read it).
  void hold_below(ObjectID id, std::int64_t version);
  /// Consumer side: a change of object `id` was delivered; it carries the object's whole
  /// state, so what was held below for the object is lifted.
  void lift_hold(ObjectID id) {
    if (holding_.load(std::memory_order_relaxed)) lift_hold_slow(id);
  }
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

  /// Consumer side, with the lock: drops what is pending undelivered, and keeps the
  /// position where it was, below what was dropped.
  void abandon_pending_locked();
  /// Producer side, with the lock: the stream takes nothing more (it ended, the producer
  /// finished it, or the consumer's context ended: the stream ends then, read or not).
  bool refuses_locked();
  std::int64_t position_locked() const;

  virtual bool has_pending_locked() const = 0;
  virtual void drop_pending_locked() = 0;
  /// The smallest version folded into a pending value, if any is pending.
  virtual std::optional<std::int64_t> oldest_pending_locked() const = 0;

  void lift_hold_slow(ObjectID id);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ended_ = false;                     // nothing more will be pushed
  bool finishing_ = false;                 // producer ended; deliver the rest first
  std::optional<std::int64_t> floor_;      // see set_floor
  std::int64_t pushed_max_ = 0;            // the highest version pushed
  std::map<ObjectID, std::int64_t> held_;  // see hold_below
  std::atomic<bool> holding_{false};       // held_ is not empty
  std::optional<std::int64_t> frozen_;     // the position once values were abandoned

 private:
  struct Waker;
  /// Wakes the consumer (its context was cancelled): it looks at the context again.
  void wake();

  Context ctx_;
  std::error_code error_;
  std::function<void()> on_end_;
  std::shared_ptr<Waker> waker_;     // with a context that can be cancelled
  std::shared_ptr<void> on_cancel_;  // the registration that calls the waker
};

template <class T>
class StreamCore : public StreamCoreBase {
 public:
  /// Folds `incoming` into the `pending` value of the same key; returns false to drop
  /// the key altogether (the reader is to hear nothing of it). The default keeps the
  /// newest value.
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
      if (refuses_locked()) return false;
      put_locked(key, std::move(value));
    }
    cv_.notify_one();
    return true;
  }

  /// Queues several values under one lock and wakes the consumer once: `fill` is called
  /// with a `put(key, value)` callable, or, when it takes two, with `put` and a
  /// `drop(key)` callable that drops what is pending under a key (see drop). Returns
  /// false when the stream has ended.
  template <class Fill>
  bool push_batch(Fill&& fill) {
    bool any = false;
    {
      std::lock_guard lk(mu_);
      if (refuses_locked()) return false;
      auto put = [&](std::int64_t key, T value) {
        put_locked(key, std::move(value));
        any = true;
      };
      auto drop = [&](std::int64_t key) { drop_locked(key); };
      if constexpr (std::is_invocable_v<Fill, decltype(put)&, decltype(drop)&>)
        fill(put, drop);
      else
        fill(put);
    }
    if (any) cv_.notify_one();
    return true;
  }

  /// Producer side: drops the value pending under `key`, if one is (the reader no longer
  /// needs it); nothing when the reader has taken it already.
  void drop(std::int64_t key) {
    std::lock_guard lk(mu_);
    drop_locked(key);
  }

  /// Values queued and not yet delivered.
  std::size_t pending() const {
    std::lock_guard lk(mu_);
    return pending_.size();
  }

  /// Everything pending, in order, without waiting.
  std::vector<T> take_all() {
    std::vector<T> out;
    std::lock_guard lk(mu_);
    out.reserve(pending_.size());
    for (auto& [key, seq] : order_)
      if (auto it = pending_.find(key); it != pending_.end() && it->second.seq == seq)
        out.push_back(std::move(it->second.value));
    drop_pending_locked();
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
    for (;;) {  // something is pending: skip the places of dropped keys before it
      auto [key, seq] = order_.front();
      order_.pop_front();
      auto it = pending_.find(key);
      if (it == pending_.end() || it->second.seq != seq) {
        --stale_;
        continue;
      }
      forget_first(key);
      auto value = std::move(it->second.value);
      pending_.erase(it);
      return value;
    }
  }

 private:
  /// A pending value, and which of its key's places in `order_` is its own (a key
  /// dropped and queued again has an older, stale one).
  struct Slot {
    T value;
    std::uint64_t seq;
  };

  void put_locked(std::int64_t key, T&& value) {
    if (version_) {
      auto v = version_(value);
      pushed_max_ = std::max(pushed_max_, v);
      // A value folded into a pending one keeps its first.
      if (since_.try_emplace(key, v).second) firsts_.insert(v);
    }
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      pending_.emplace(key, Slot{std::move(value), ++seq_});
      order_.emplace_back(key, seq_);
    } else if (!merge_) {
      it->second.value = std::move(value);
    } else if (!merge_(it->second.value, std::move(value))) {
      erase_locked(it);
    }
  }

  void drop_locked(std::int64_t key) {
    if (auto it = pending_.find(key); it != pending_.end()) erase_locked(it);
  }

  /// Removes a pending value; its place in `order_` goes stale, and the stale places are
  /// swept out once they outnumber the live ones (so that dropping is O(1) amortized and
  /// `order_` stays within twice what is pending).
  void erase_locked(typename std::unordered_map<std::int64_t, Slot>::iterator it) {
    forget_first(it->first);
    pending_.erase(it);
    if (++stale_ <= 16 || stale_ <= pending_.size()) return;
    std::erase_if(order_, [&](const std::pair<std::int64_t, std::uint64_t>& place) {
      auto p = pending_.find(place.first);
      return p == pending_.end() || p->second.seq != place.second;
    });
    stale_ = 0;
  }

  bool has_pending_locked() const override { return !pending_.empty(); }
  void drop_pending_locked() override {
    order_.clear();
    pending_.clear();
    since_.clear();
    firsts_.clear();
    stale_ = 0;
  }
  std::optional<std::int64_t> oldest_pending_locked() const override {
    if (firsts_.empty()) return std::nullopt;
    return *firsts_.begin();  // O(1): asked after every value a resuming reader takes
  }
  void forget_first(std::int64_t key) {
    if (auto it = since_.find(key); it != since_.end()) {
      firsts_.erase(firsts_.find(it->second));
      since_.erase(it);
    }
  }

  Merge merge_;
  Version version_;
  std::deque<std::pair<std::int64_t, std::uint64_t>> order_;  // (key, seq), first pushed first
  std::unordered_map<std::int64_t, Slot> pending_;
  std::unordered_map<std::int64_t, std::int64_t> since_;  // key -> first version pending
  std::multiset<std::int64_t> firsts_;                    // since_'s versions, ordered
  std::uint64_t seq_ = 0;
  std::size_t stale_ = 0;  // places in order_ whose value was dropped
};

}  // namespace beehive::detail
