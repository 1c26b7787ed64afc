#include "actors/store_writer.hpp"

#include "store/write_ops.hpp"

namespace beehive::detail {

namespace {

using store::WriteOps;

WriteReply run_op(WriteOps& ops, const create_request& r) {
  return {ops.create(r.gk, r.spec, r.slug, r.finalizers)};
}
WriteReply run_op(WriteOps& ops, const update_request& r) {
  return {ops.update(r.gk, r.id, r.spec)};
}
WriteReply run_op(WriteOps& ops, const create_or_update_request& r) {
  return {ops.create_or_update(r.gk, r.slug, r.spec)};
}
WriteReply run_op(WriteOps& ops, const get_or_create_request& r) {
  auto [row, created] = ops.get_or_create(r.gk, r.slug, r.spec, r.finalizers);
  return {std::move(row), created};
}
WriteReply run_op(WriteOps& ops, const remove_request& r) { return {ops.remove(r.gk, r.id)}; }
WriteReply run_op(WriteOps& ops, const remove_by_slug_request& r) {
  return {{}, ops.remove_by_slug(r.gk, r.slug)};
}

bool needs_check(const WriteOp& op) {
  return !std::holds_alternative<remove_request>(op) &&
         !std::holds_alternative<remove_by_slug_request>(op);
}

/// One write in one transaction; publishes what it changed after the commit.
WriteReply execute(StoreWriterState& st, const WriteOp& op, const RowCheck& check) {
  auto& w = *st.cfg->writer;
  std::vector<object_change> changes;
  WriteReply reply;
  w.begin();
  try {
    WriteOps ops(w, st.cfg->clock->now(), changes);
    reply = std::visit([&](const auto& r) { return run_op(ops, r); }, op);
    if (check && needs_check(op)) {
      try {
        check(reply.row);
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        throw Error(errc::decode, e.what());
      }
    }
    w.commit();
  } catch (...) {
    w.rollback();
    throw;
  }
  if (!changes.empty()) {
    commit_record rec{std::move(changes)};
    for (auto& s : st.subscribers) caf::anon_send(s, rec);
  }
  return reply;
}

template <class Reply, class Request>
caf::result<Reply> serve(StoreWriterState& st, const Request& r, Reply (*pick)(WriteReply&&)) {
  try {
    return pick(execute(st, WriteOp{r}, {}));
  } catch (const Error& e) {
    return make_error(e.value(), e.message());
  } catch (const std::exception& e) {
    return make_error(errc::store, e.what());
  }
}

ObjectRow pick_row(WriteReply&& r) { return std::move(r.row); }
bool pick_flag(WriteReply&& r) { return r.flag; }
get_or_create_reply pick_goc(WriteReply&& r) { return {std::move(r.row), r.flag}; }

}  // namespace

store_writer_impl::behavior_type store_writer(
    store_writer_impl::stateful_pointer<StoreWriterState> self,
    std::shared_ptr<StoreWriterConfig> cfg) {
  self->state.cfg = std::move(cfg);
  auto& st = self->state;
  return {
      [&st](const create_request& r) { return serve(st, r, pick_row); },
      [&st](const update_request& r) { return serve(st, r, pick_row); },
      [&st](const create_or_update_request& r) { return serve(st, r, pick_row); },
      [&st](const get_or_create_request& r) { return serve(st, r, pick_goc); },
      [&st](const remove_request& r) { return serve(st, r, pick_row); },
      [&st](const remove_by_slug_request& r) { return serve(st, r, pick_flag); },
      [&st](subscribe_atom, const caf::actor& a) { st.subscribers.push_back(a); },
      [&st](unsubscribe_atom, const caf::actor& a) { std::erase(st.subscribers, a); },
      [&st](const BlockingWritePtr& w) {
        if (w->reply->abandoned()) {
          w->reply->fail(errc::cancelled, "the caller stopped waiting");
          return;
        }
        try {
          w->reply->deliver(execute(st, w->op, w->check));
        } catch (const Error& e) {
          w->reply->fail(e.value(), e.message());
        } catch (const std::exception& e) {
          w->reply->fail(errc::store, e.what());
        }
      },
  };
}

}  // namespace beehive::detail
