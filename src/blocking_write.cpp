// BeehiveCore's blocking hand-off to the store_writer: a caller queues its write on the
// WriteQueue and waits for the reply (the writer's thread runs every transaction), and
// `within` is a session of such writes. Runs on the caller's thread.

#include "beehive_core.hpp"

#include <sched.h>

#include <algorithm>

#include "context_internal.hpp"
#include "thread_guards.hpp"
#include "transaction.hpp"

namespace beehive::detail {

thread_local std::vector<const void*> open_sessions;

void refuse_write_beside_open_block(const void* runtime, bool in_block) {
  if (!in_block &&
      std::find(open_sessions.begin(), open_sessions.end(), runtime) != open_sessions.end())
    throw Error(errc::invalid_argument,
                "a write outside the within block open on this thread would wait for it "
                "forever; use the context within passes to its function");
}

namespace {

/// Counts a within block of `core` as open on this thread while it lives.
class OpenSession {
 public:
  explicit OpenSession(const void* core) { open_sessions.push_back(core); }
  ~OpenSession() { open_sessions.pop_back(); }
  OpenSession(const OpenSession&) = delete;
  OpenSession& operator=(const OpenSession&) = delete;
};

}  // namespace

std::vector<Ref> BeehiveCore::related(const Context& ctx, ObjectID id, unsigned relation) {
  ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx))
    return read_in_transaction(ctx, ReadOp{ReadOp::related, {}, id, {}, relation}).refs;
  return read(ctx, [&](store::Reader& r) { return r.related(id, relation); });
}

namespace {

/// Calls from two threads would interleave the block's savepoints: a nested block's
/// release or rollback could end the other thread's.
void require_its_thread(const Transaction& txn) {
  if (!txn.on_its_thread())
    throw Error(errc::invalid_argument,
                "a within block's context was used on another thread than the block's; "
                "make the block's calls from the thread running it");
}

}  // namespace

WriteReply BeehiveCore::write(const Context& ctx, WriteOp op, RowCheck check) {
  ensure_running(ctx);
  ctx.throw_if_done();
  auto w = std::make_shared<BlockingWrite>();
  if (auto txn = ContextAccess::transaction(ctx)) {
    require_its_thread(*txn);
    w->session = txn->session();
  } else {
    refuse_write_beside_open_block(this, false);
  }
  w->op = std::move(op);
  w->check = std::move(check);
  w->cpu = sched_getcpu();  // see reply_group
  // A reconcile's writes to its own runtime are fenced by the term its pass began in.
  if (ContextAccess::is_reconcile(ctx, this)) {
    w->for_leader = true;
    w->term = ContextAccess::reconcile_term(ctx);
  } else if (auto* pass = reconcile_on_this_thread(this)) {
    w->for_leader = true;
    w->term = pass->term;
  }
  auto reply = w->reply;
  queue_->push(std::move(w));
  return reply->take(ctx, queue_->replies_come_quickly());
}

store::ReaderLease BeehiveCore::reader_for(const Context& ctx) {
  return backend_->reader([&ctx] { return !ctx.done(); });
}

std::optional<ObjectRow> BeehiveCore::read_committed(const Context& ctx, ObjectID id) {
  return read(ctx, [id](store::Reader& r) { return r.get(id); });
}

void BeehiveCore::after_commit(const Context& ctx, std::function<void()> fn) {
  if (auto txn = ContextAccess::transaction(ctx))
    txn->after_commit(std::move(fn));
  else
    fn();
}

void BeehiveCore::within(const Context& ctx, const std::function<void(const Context&)>& fn) {
  if (!fn) throw Error(errc::invalid_argument, "within needs a block, not an empty one");
  // Session steps never give up half-way: they wait without the caller's deadline.
  auto step = [this](const std::shared_ptr<Transaction>& txn, SessionCmd::Kind k) {
    return write(ContextAccess::with_transaction(Context{}, txn), SessionCmd{k}, {});
  };
  // Undoing after a throw: the block's own exception is what the caller should see (a
  // writer that stopped meanwhile rolled the transaction back already).
  auto undo = [&](const std::shared_ptr<Transaction>& txn, SessionCmd::Kind k) {
    try {
      step(txn, k);
    } catch (const Error&) {
    }
  };
  if (auto txn = ContextAccess::transaction(ctx)) {
    require_its_thread(*txn);  // before its nesting is read: it is the block thread's
    // Each level costs a few KB of the caller's stack: a runaway recursion gets an error,
    // not a crash (about 2 250 levels overflowed a default 8 MiB stack).
    constexpr std::size_t max_nesting = 1000;
    if (txn->depth() + 1 >= max_nesting)
      throw Error(errc::invalid_argument,
                  "within blocks nest at most " + std::to_string(max_nesting) + " deep");
    ctx.throw_if_done();
    step(txn, SessionCmd::savepoint);
    txn->mark();
    try {
      fn(ctx);
      // A block whose context ended before it returned is undone, as any call whose
      // context ends first writes nothing.
      ctx.throw_if_done();
    } catch (...) {
      txn->drop_to_mark();
      undo(txn, SessionCmd::rollback_to);
      throw;
    }
    txn->keep();
    step(txn, SessionCmd::release);
    return;
  }
  // Made first: once the session has begun, nothing may fail before the path that
  // rolls it back (the writer would serve that session alone until stop's deadline).
  auto txn = std::make_shared<Transaction>(this);
  txn->begun(write(ctx, SessionCmd{SessionCmd::begin}, {}).session);
  try {
    auto inner = ContextAccess::with_transaction(ctx, txn);
    OpenSession open(this);
    fn(inner);
    // Ended before the block returned: rolled back. Once the commit is asked for, it
    // completes whatever the deadline does (a write is never reported failed when it
    // committed).
    inner.throw_if_done();
  } catch (...) {
    txn->take_post_commit();  // dropped; they hold the block's context, which holds txn
    undo(txn, SessionCmd::rollback);
    throw;
  }
  auto hooks = txn->take_post_commit();
  step(txn, SessionCmd::commit);
  for (auto& f : hooks) f();
}

}  // namespace beehive::detail
