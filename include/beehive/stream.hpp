#pragma once

/// `Stream<T>` is the receiving end of a watch: a blocking, move-only queue that
/// delivers values until it ends. It ends when its context ends, on `close()` or
/// destruction, or when the beehive stops; values committed before a stop are still
/// delivered before `next()` reports the end.
///
/// Delivery is conflated per key (an object id, an event id): a reader that falls
/// behind sees each key's latest value instead of every intermediate one, so the
/// memory a stream holds is bounded by the number of distinct keys pending.
///
/// One consumer thread calls `next` / `next_for`; `close`, `done` and `error` may be
/// called from any thread. To end a wait from another thread, call `close()` there and
/// let the consumer return: the Stream itself must not be destroyed, moved or assigned
/// while a thread is inside `next` / `next_for` (as for any object in use).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include <beehive/detail/saturate.hpp>
#include <beehive/detail/stream_core.hpp>

namespace beehive {

template <class T>
class Stream {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  /// An ended stream.
  Stream() = default;

  explicit Stream(std::shared_ptr<detail::StreamCore<T>> core)
      : core_(core), pop_([core](std::optional<Deadline> until) { return core->pop(until); }) {}

  /// A stream of T over a core of U: `convert` turns each U into a T, or into nullopt to
  /// skip it (a row that does not decode, say).
  template <class U>
  Stream(std::shared_ptr<detail::StreamCore<U>> core, std::function<std::optional<T>(U&&)> convert)
      : core_(core), pop_([core, convert = std::move(convert)](std::optional<Deadline> until) {
          for (;;) {
            auto u = core->pop(until);
            if (!u) return std::optional<T>{};
            if (auto t = convert(std::move(*u))) return t;
          }
        }) {}

  Stream(Stream&&) noexcept = default;
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      close();
      core_ = std::move(other.core_);
      pop_ = std::move(other.pop_);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { close(); }

  /// Blocks for the next value; nullopt when the stream has ended.
  std::optional<T> next() { return pop_ ? pop_(std::nullopt) : std::nullopt; }

  /// Like `next`, but also returns nullopt after `timeout` without a value (a timeout
  /// too large for the clock waits like `next`).
  std::optional<T> next_for(std::chrono::milliseconds timeout) {
    return pop_ ? pop_(detail::deadline_after(timeout)) : std::nullopt;
  }

  /// The stream has ended and holds nothing more to deliver.
  bool done() const { return !core_ || core_->done(); }

  /// Why it ended: empty when its own context or `close()` ended it, `errc::stopped`
  /// when the beehive stopped; `errc::store` when beehive's actors restarted after a
  /// crash or the snapshot could not be read, `errc::watch_too_old` when the change log
  /// no longer reaches back to a resume point: open the watch again (from
  /// `resource_version()`, or afresh for `watch_too_old`); `errc::not_found` when the
  /// object whose events it follows (watch_events) was removed.
  std::error_code error() const { return core_ ? core_->error() : std::error_code{}; }

  /// Where a watch of objects can resume from (with_resume_from) having missed nothing
  /// (at least once: a change already read may come again after a resume, when it was
  /// delivered in the place of an older change of its object; one at or below the
  /// version already held for that object can be dropped):
  /// the snapshot's version once the snapshot has been delivered, then the version of
  /// the store's commits it has been through, its own changes delivered (a watch opened
  /// with with_resume_from starts at its `rv`). So a quiet watch's position follows the
  /// store's, and stays within the change log's retention. Never past a change skipped
  /// because its row did not decode. 0 while the snapshot is being delivered, and for
  /// other streams: no position (a resume from 0 is watch_too_old).
  std::int64_t resource_version() const { return core_ ? core_->position() : 0; }

  /// Ends the stream now, dropping anything undelivered. Idempotent.
  void close() {
    if (core_) core_->close();
  }

 private:
  std::shared_ptr<detail::StreamCoreBase> core_;
  std::function<std::optional<T>(std::optional<Deadline>)> pop_;
};

}  // namespace beehive
