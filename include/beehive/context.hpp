#pragma once

/// `Context` bounds a blocking call in time and lets another thread cancel it, in the
/// manner of Go's context.Context. A default-constructed Context is the background: it
/// never ends. Derived contexts end when their parent ends or when their own deadline
/// passes or cancel function is called, whichever is first.
///
/// A blocking call whose context ends first throws `Error(errc::cancelled)` or
/// `Error(errc::deadline_exceeded)`, and then nothing of it was written: a write that the
/// store writer had already begun applying returns its real outcome instead, even if the
/// context ends meanwhile. A `Stream` whose context ends closes.
///
/// Cheap to copy (one shared pointer); all members are thread-safe.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

namespace beehive {

namespace detail {
struct ContextNode;
struct ContextAccess;
class Transaction;
}  // namespace detail

class Context {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  Context() = default;

  /// A timeout too large for the steady clock (`milliseconds::max()`, centuries) adds no
  /// deadline: a huge timeout is no timeout.
  Context with_timeout(std::chrono::milliseconds d) const;
  Context with_deadline(Deadline t) const;
  /// A child context and the function that cancels it (idempotent, thread-safe).
  std::pair<Context, std::function<void()>> with_cancel() const;

  /// Cancelled or past its deadline.
  bool done() const;
  /// Why the context ended: `errc::cancelled`, `errc::deadline_exceeded`, or empty.
  std::error_code error() const;
  /// The earliest deadline along the chain, if any.
  std::optional<Deadline> deadline() const;
  /// Throws the `Error` matching `error()` when the context has ended.
  void throw_if_done() const;

 private:
  friend struct detail::ContextAccess;
  explicit Context(std::shared_ptr<const detail::ContextNode> n) : node_(std::move(n)) {}
  std::shared_ptr<const detail::ContextNode> node_;
};

}  // namespace beehive
