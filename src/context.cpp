#include <beehive/context.hpp>

#include <beehive/detail/saturate.hpp>
#include <beehive/errors.hpp>

#include "context_internal.hpp"

namespace beehive {

using detail::ContextNode;

namespace {

std::shared_ptr<const ContextNode> child(const std::shared_ptr<const ContextNode>& parent) {
  auto n = parent ? std::make_shared<ContextNode>(*parent) : std::make_shared<ContextNode>();
  // A state nobody can cancel any more never ends the context: left out, so that the
  // list stays as short as the cancel functions held.
  // `cancellable` first: once it reads false, a cancel made before the last function
  // went is visible in `cancelled` (a state cancelled meanwhile is kept).
  std::erase_if(n->cancels, [](const std::shared_ptr<detail::CancelState>& c) {
    return !c->cancellable.load() && !c->cancelled.load();
  });
  return n;
}

/// Held by every copy of a with_cancel's function: the last one gone, the state can no
/// longer be cancelled.
struct Canceller {
  explicit Canceller(std::shared_ptr<detail::CancelState> s) : state(std::move(s)) {}
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;
  ~Canceller() { state->cancellable.store(false); }
  std::shared_ptr<detail::CancelState> state;
};

}  // namespace

Context Context::with_timeout(std::chrono::milliseconds d) const {
  if (auto t = detail::deadline_after(d)) return with_deadline(*t);
  return Context(child(node_));  // beyond the clock's range: no deadline of its own
}

Context Context::with_deadline(Deadline t) const {
  auto n = std::const_pointer_cast<ContextNode>(child(node_));
  if (!n->deadline || t < *n->deadline) n->deadline = t;
  return Context(std::move(n));
}

std::pair<Context, std::function<void()>> Context::with_cancel() const {
  auto n = std::const_pointer_cast<ContextNode>(child(node_));
  auto state = std::make_shared<detail::CancelState>();
  n->cancels.push_back(state);
  auto canceller = std::make_shared<Canceller>(state);
  return {Context(std::move(n)), [canceller] { canceller->state->cancel(); }};
}

std::error_code Context::error() const {
  if (!node_) return {};
  for (auto& c : node_->cancels)
    if (c->cancelled.load()) return errc::cancelled;
  if (node_->deadline && std::chrono::steady_clock::now() >= *node_->deadline)
    return errc::deadline_exceeded;
  return {};
}

bool Context::done() const { return static_cast<bool>(error()); }

std::optional<Context::Deadline> Context::deadline() const {
  return node_ ? node_->deadline : std::nullopt;
}

void Context::throw_if_done() const {
  if (auto ec = error()) throw Error(static_cast<errc>(ec.value()));
}

namespace detail {

void CancelState::cancel() {
  cancelled.store(true);
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard lk(mu);
    for (auto& [token, fn] : listeners) fns.push_back(fn);
  }
  for (auto& fn : fns) fn();
}

CancelListener::CancelListener(const Context& ctx, std::function<void()> fn) {
  auto n = ContextAccess::node(ctx);
  if (!n) return;
  for (auto& c : n->cancels) {
    std::lock_guard lk(c->mu);
    auto token = ++c->next_token;
    c->listeners.emplace_back(token, fn);
    registered_.emplace_back(c, token);
  }
}

CancelListener::~CancelListener() {
  for (auto& [weak, token] : registered_)
    if (auto state = weak.lock()) {
      std::lock_guard lk(state->mu);
      std::erase_if(state->listeners, [t = token](auto& l) { return l.first == t; });
    }
}

bool ContextAccess::can_be_cancelled(const Context& ctx) {
  return ctx.node_ && !ctx.node_->cancels.empty();
}

std::shared_ptr<Transaction> ContextAccess::transaction(const Context& ctx) {
  return ctx.node_ ? ctx.node_->txn : nullptr;
}

Context ContextAccess::outside_transactions(const Context& ctx) {
  if (!transaction(ctx)) return ctx;
  auto n = std::const_pointer_cast<ContextNode>(child(ctx.node_));
  n->txn = nullptr;
  return Context(std::move(n));
}

Context ContextAccess::with_transaction(const Context& ctx, std::shared_ptr<Transaction> txn) {
  auto n = std::const_pointer_cast<ContextNode>(child(ctx.node_));
  n->txn = std::move(txn);
  return Context(std::move(n));
}

Context ContextAccess::for_reconcile(const Context& ctx, const void* runtime, std::int64_t term) {
  auto n = std::const_pointer_cast<ContextNode>(child(ctx.node_));
  n->reconcile = runtime;
  n->term = term;
  return Context(std::move(n));
}

std::int64_t ContextAccess::reconcile_term(const Context& ctx) {
  return ctx.node_ && ctx.node_->reconcile ? ctx.node_->term : 0;
}

bool ContextAccess::is_reconcile(const Context& ctx, const void* runtime) {
  return ctx.node_ && ctx.node_->reconcile && ctx.node_->reconcile == runtime;
}

Context ContextAccess::for_pass(const Context& ctx, std::int64_t id) {
  auto n = std::const_pointer_cast<ContextNode>(child(ctx.node_));
  n->pass_object = id;
  return Context(std::move(n));
}

std::int64_t ContextAccess::pass_object(const Context& ctx) {
  return ctx.node_ ? ctx.node_->pass_object : 0;
}

}  // namespace detail
}  // namespace beehive
