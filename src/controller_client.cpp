#include <beehive/controller.hpp>
#include <beehive/detail/codec.hpp>

#include <beehive/beehive.hpp>

#include "context_internal.hpp"
#include "runtime.hpp"

namespace beehive::detail {

Outcome run_reconcile(const std::function<void()>& decode,
                      const std::function<std::chrono::milliseconds()>& reconcile) {
  try {
    decode();
  } catch (const std::exception& e) {
    return {Outcome::quarantined, {}, e.what()};
  } catch (...) {  // a user from_json or converter may throw anything
    return {Outcome::quarantined, {}, "unknown exception"};
  }
  try {
    return {Outcome::success, reconcile(), {}};
  } catch (const std::exception& e) {
    return {Outcome::error, {}, e.what()};
  } catch (...) {
    return {Outcome::error, {}, "unknown exception"};
  }
}

const Migrator* ControllerClientCore::migrator() const { return rt_->migrator(gk_); }

namespace {

/// The kind's row, read without the writer, when a converged write may be skipped.
std::optional<ObjectRow> read_committed(Runtime& rt, const Context& ctx, const GroupKind& gk,
                                        ObjectID id) {
  if (ContextAccess::transaction(ctx)) return std::nullopt;  // within sees its own writes
  rt.ensure_running(ctx);
  ctx.throw_if_done();
  auto row = rt.read_committed(id);
  if (!row || row->meta.group != gk.group || row->meta.kind != gk.kind) return std::nullopt;
  return row;
}

}  // namespace

void ControllerClientCore::update_status(const Context& ctx, ObjectID id,
                                         std::int64_t observed_generation, std::string status,
                                         RowCheck check) const {
  // Unchanged status at the recorded generation, or at an older one: nothing to write
  // (and no writer taken). WriteOps::update_status applies the same rule.
  if (auto row = read_committed(*rt_, ctx, gk_, id);
      row && row->status == status && row->status_version == rt_->status_version(gk_) &&
      row->meta.observed_generation && observed_generation <= *row->meta.observed_generation)
    return;
  rt_->write(ctx,
             update_status_request{gk_, id, observed_generation, std::move(status),
                                   rt_->status_version(gk_)},
             std::move(check));
}

void ControllerClientCore::set_condition(const Context& ctx, ObjectID id,
                                         const Condition& c) const {
  for (auto* text : {&c.type, &c.reason, &c.message}) require_utf8(*text, "condition text");
  if (c.type.empty()) throw Error(errc::invalid_argument, "a condition needs a type");
  if (auto row = read_committed(*rt_, ctx, gk_, id))
    for (const auto& existing : row->meta.conditions)
      if (existing == c) return;  // identical and current (a stale liveness reads Unknown)
  rt_->write(ctx, set_condition_request{gk_, id, c}, {});
}

void ControllerClientCore::record_event(const Context& ctx, ObjectID id, const EventSpec& e) const {
  for (auto* text : {&e.category, &e.reason, &e.message}) require_utf8(*text, "event text");
  require_storable(e.detail, "event detail");  // before the request copies it (recursively)
  rt_->write(ctx, record_event_request{gk_, id, e}, {});
}

void ControllerClientCore::remove_condition(const Context& ctx, ObjectID id,
                                            std::string_view type) const {
  require_utf8(type, "condition type");
  rt_->write(ctx, remove_condition_request{gk_, id, std::string(type)}, {});
}

void ControllerClientCore::remove_finalizer(const Context& ctx, ObjectID id,
                                            std::string_view finalizer) const {
  require_utf8(finalizer, "finalizer");
  rt_->write(ctx, remove_finalizer_request{gk_, id, std::string(finalizer)}, {});
}

void ControllerClientCore::add_dependency(const Context& ctx, ObjectID from, ObjectID to) const {
  if (read_committed(*rt_, ctx, gk_, from))
    for (const auto& ref : rt_->backend().reader()->related(from, LoadOption::dependencies))
      if (ref.id == to) return;  // the edge exists
  rt_->write(ctx, add_dependency_request{gk_, from, to}, {});
}

void ControllerClientCore::remove_dependency(const Context& ctx, ObjectID from, ObjectID to) const {
  rt_->write(ctx, remove_dependency_request{gk_, from, to}, {});
}

bool ControllerClientCore::has_incoming_refs(const Context& ctx, ObjectID id) const {
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx))
    return rt_->read_in_transaction(ctx, ReadOp{ReadOp::incoming, gk_, id, {}}).flag;
  return rt_->backend().reader()->has_incoming_refs(id);
}

std::vector<Ref> ControllerClientCore::related(const Context& ctx, ObjectID id,
                                               unsigned relation) const {
  return rt_->related(ctx, id, relation);
}

void ControllerClientCore::within(const Context& ctx,
                                  const std::function<void(const Context&)>& fn) const {
  rt_->within(ctx, fn);
}

std::shared_ptr<Runtime> register_kind(Beehive& bh, const GroupKind& gk, ReconcileFn fn,
                                       const std::vector<Option>& opts) {
  require_utf8(gk.group, "group");
  require_utf8(gk.kind, "kind");
  bh.runtime()->register_kind(gk, std::move(fn), opts);
  return bh.runtime();
}

}  // namespace beehive::detail
