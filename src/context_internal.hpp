#pragma once

// What the library needs from a Context beyond its public surface: the transaction a
// `within` block attached to it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <beehive/context.hpp>

namespace beehive::detail {

/// A with_cancel's state: its flag, and who is told when it is set (waiters, which
/// otherwise could only look at the flag now and then).
struct CancelState {
  std::atomic<bool> cancelled{false};
  /// Whether a cancel function of it is still held: one that nobody can call any more
  /// will never be cancelled, and contexts derived later leave it out.
  std::atomic<bool> cancellable{true};
  std::mutex mu;
  std::uint64_t next_token = 0;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> listeners;

  /// Sets the flag, then calls every listener (on this thread, without the lock).
  void cancel();
};

/// While alive, its function is called when a with_cancel along the context's chain is
/// cancelled (possibly on the cancelling thread, possibly more than once). It may still
/// be running, on that thread, while the listener is destroyed: it must not need what
/// the owner frees.
class CancelListener {
 public:
  CancelListener(const Context& ctx, std::function<void()> fn);
  ~CancelListener();
  CancelListener(const CancelListener&) = delete;
  CancelListener& operator=(const CancelListener&) = delete;

 private:
  std::vector<std::pair<std::weak_ptr<CancelState>, std::uint64_t>> registered_;
};

/// What a context is, every field already resolved along its chain: a child copies its
/// parent's and changes its own. No link to the parent, so that a context derived from
/// the last one in a loop, a million times, costs what one does to check and to free.
struct ContextNode {
  std::optional<Context::Deadline> deadline;  // the earliest along the chain
  /// The with_cancel states along the chain that can still end it: those cancelled, or
  /// whose cancel function is still held.
  std::vector<std::shared_ptr<CancelState>> cancels;
  std::shared_ptr<Transaction> txn;  // the innermost within block it belongs to, or null
  const void* reconcile = nullptr;   // a reconcile's context: the runtime it belongs to
  std::int64_t term = 0;             // a reconcile's: the leadership term its pass began in
  std::int64_t pass_object = 0;      // a pass's context: its object's id
};

struct ContextAccess {
  /// The innermost transaction the context belongs to, or null.
  static std::shared_ptr<Transaction> transaction(const Context& ctx);
  /// A child of `ctx` that belongs to no transaction: for what runs after a block ended
  /// (post-commit callbacks), with the block's deadline and cancellation.
  static Context outside_transactions(const Context& ctx);
  /// A child of `ctx` that carries `txn`.
  static Context with_transaction(const Context& ctx, std::shared_ptr<Transaction> txn);
  /// A child of `ctx` marked as the context of a reconcile of `runtime`, for a pass that
  /// began in leadership term `term` (0: a store without terms). Calls made with it to
  /// that runtime are served while it drains, and its writes are fenced against `term`;
  /// to another runtime it is an ordinary context.
  static Context for_reconcile(const Context& ctx, const void* runtime, std::int64_t term = 0);
  /// Whether `ctx` is the context of a reconcile of `runtime`.
  static bool is_reconcile(const Context& ctx, const void* runtime);
  /// The term of the reconcile `ctx` belongs to (0: none, or no terms).
  static std::int64_t reconcile_term(const Context& ctx);
  /// A child of `ctx` for the pass of object `id` (ControllerClient::log names it).
  static Context for_pass(const Context& ctx, std::int64_t id);
  /// The object of the pass `ctx` belongs to, or 0.
  static std::int64_t pass_object(const Context& ctx);
  /// True when something along the chain has a cancel function: a waiter on the
  /// context must look at it now and then (a cancellation is a flag, not a signal). A
  /// deadline alone is waited for until it passes.
  static bool can_be_cancelled(const Context& ctx);
  /// The node of `ctx` (null for Context{}).
  static const ContextNode* node(const Context& ctx) { return ctx.node_.get(); }
};

}  // namespace beehive::detail
