#include <beehive/controller.hpp>
#include <beehive/detail/codec.hpp>

#include <beehive/beehive.hpp>
#include <beehive/result.hpp>

#include "beehive_core.hpp"
#include "context_internal.hpp"
#include "names.hpp"
#include "options_internal.hpp"
#include "storable_text.hpp"
#include "store/request_checks.hpp"
#include "thread_guards.hpp"

namespace beehive::detail {

Outcome run_reconcile(const std::function<void()>& decode,
                      const std::function<Result()>& reconcile) {
  try {
    decode();
  } catch (const std::exception& e) {
    return {Outcome::quarantined, {}, e.what()};
  } catch (...) {  // a user from_json or converter may throw anything
    return {Outcome::quarantined, {}, "unknown exception"};
  }
  try {
    auto r = reconcile();
    Outcome out{Outcome::success, r.requeue_after, {}};
    out.requeue_now = r.requeue;
    return out;
  } catch (const TerminalError& e) {
    return {Outcome::terminal_error, {}, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::error, {}, e.what()};
  } catch (...) {
    return {Outcome::error, {}, "unknown exception"};
  }
}

const Migrator* ControllerClientCore::migrator() const { return rt_->migrator(gk_); }

namespace {

/// The kind's row, read without the writer, when a converged write may be skipped.
std::optional<ObjectRow> read_committed(BeehiveCore& rt, const Context& ctx, const GroupKind& gk,
                                        ObjectID id) {
  if (ContextAccess::transaction(ctx)) return std::nullopt;  // within sees its own writes
  refuse_write_beside_open_block(&rt, false);
  rt.ensure_running(ctx);
  ctx.throw_if_done();
  auto row = rt.read_committed(ctx, id);
  if (!row || row->meta.group != gk.group || row->meta.kind != gk.kind) return std::nullopt;
  return row;
}

}  // namespace

void ControllerClientCore::update_status(const Context& ctx, ObjectID id,
                                         std::int64_t observed_generation, std::string status,
                                         RowCheck check, const std::vector<Option>& opts) const {
  store::check_observed_generation(observed_generation);
  auto s = OptionSet::from(opts);
  // Unchanged status at the recorded generation, or at an older one: nothing to write
  // (and no writer taken), unless a stale version must be refused. WriteOps::update_status
  // applies the same rules.
  if (auto row = read_committed(*rt_, ctx, gk_, id);
      row && row->status == status && row->status_version == rt_->status_version(gk_) &&
      row->meta.observed_generation && observed_generation <= *row->meta.observed_generation &&
      (!s.resource_version || *s.resource_version == row->meta.resource_version))
    return;
  rt_->write(ctx,
             update_status_request{gk_, id, observed_generation, std::move(status),
                                   rt_->status_version(gk_), s.resource_version},
             std::move(check));
}

void ControllerClientCore::set_condition(const Context& ctx, ObjectID id,
                                         const Condition& c) const {
  store::check_condition(c);
  if (auto row = read_committed(*rt_, ctx, gk_, id))
    for (const auto& existing : row->meta.conditions)
      if (same_observation(existing, c))
        return;  // identical and current (a stale liveness reads Unknown)
  rt_->write(ctx, set_condition_request{gk_, id, c}, {});
}

void ControllerClientCore::record_event(const Context& ctx, ObjectID id, const EventSpec& e) const {
  store::check_event(e);  // before the request copies the detail (recursively)
  rt_->write(ctx, record_event_request{gk_, id, e}, {});
}

void ControllerClientCore::remove_condition(const Context& ctx, ObjectID id,
                                            std::string_view type) const {
  require_name(type, "condition type");
  rt_->write(ctx, remove_condition_request{gk_, id, std::string(type)}, {});
}

void ControllerClientCore::remove_finalizer(const Context& ctx, ObjectID id,
                                            std::string_view finalizer) const {
  require_text(finalizer, "finalizer");
  rt_->write(ctx, remove_finalizer_request{gk_, id, std::string(finalizer)}, {});
}

void ControllerClientCore::add_finalizer(const Context& ctx, ObjectID id,
                                         std::string_view finalizer) const {
  require_new_finalizer(finalizer);
  if (auto row = read_committed(*rt_, ctx, gk_, id))
    for (const auto& f : row->meta.finalizers)
      if (f == finalizer) return;  // present: nothing to write (and no writer taken)
  rt_->write(ctx, add_finalizer_request{gk_, id, std::string(finalizer)}, {});
}

Time ControllerClientCore::now() const { return rt_->clock().now(); }

void ControllerClientCore::log(const Context& ctx, LogLevel level, std::string_view message,
                               LogFields fields) const {
  fields.emplace_back("kind", to_string(gk_));
  if (auto id = ContextAccess::pass_object(ctx)) fields.emplace_back("id", std::to_string(id));
  rt_->log(level, message, fields);
}

void ControllerClientCore::add_dependency(const Context& ctx, ObjectID from, ObjectID to) const {
  if (read_committed(*rt_, ctx, gk_, from))
    for (const auto& ref : rt_->read(
             ctx, [&](store::Reader& r) { return r.related(from, LoadOption::dependencies); }))
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
  return rt_->read(ctx, [id](store::Reader& r) { return r.has_incoming_refs(id); });
}

std::vector<Ref> ControllerClientCore::related(const Context& ctx, ObjectID id,
                                               unsigned relation) const {
  return rt_->related(ctx, id, relation);
}

void ControllerClientCore::within(const Context& ctx,
                                  const std::function<void(const Context&)>& fn) const {
  rt_->within(ctx, fn);
}

namespace {

const char* result_name(const Outcome& o) {
  switch (o.kind) {
    case Outcome::success:
      return o.requeue_now ? "requeue" : o.requeue_after.count() > 0 ? "requeue_after" : "success";
    case Outcome::error:
      return "error";
    case Outcome::terminal_error:
      return "terminal_error";
    case Outcome::quarantined:
      return "quarantined";
    case Outcome::gone:
      return "gone";
    case Outcome::cancelled:
      return "cancelled";
    case Outcome::busy:
      return "busy";
  }
  return "error";
}

/// A pass ended by TerminalError is not retried, so this is its only trace: logged once
/// and kept in the object's event log, where an operator looks for why it stopped.
void report_terminal(const ControllerClientCore& core, const Context& ctx, const ObjectRow& row,
                     const std::string& message) {
  core.log(ctx, LogLevel::warning, "reconcile failed with a terminal error; not retried",
           {{"reason", message}});
  try {
    // The message is the exception's: any bytes, any length. Stored as text the event
    // log holds, so that the one trace of the failure is not refused along with it.
    core.record_event(ctx, row.meta.id,
                      {"reconcile", EventType::Warning, "TerminalError",
                       storable_text(message, store::max_event_message_bytes), nullptr});
  } catch (const std::exception& e) {
    core.log(ctx, LogLevel::error, "recording a terminal error's event failed",
             {{"reason", e.what()}});
  }
}

}  // namespace

std::shared_ptr<BeehiveCore> register_kind(Beehive& bh, const GroupKind& gk, ReconcileFn fn,
                                           const std::vector<Option>& opts) {
  require_name(gk.group, "group");
  require_name(gk.kind, "kind");
  // Every pass goes through here, on the worker's thread: its context names the object
  // (ControllerClient::log), a terminal error is reported, and at debug each pass is logged.
  auto pass = [fn = std::move(fn)](const Context& ctx, const ControllerClientCore& core,
                                   const ObjectRow& row) {
    auto pass_ctx = ContextAccess::for_pass(ctx, row.meta.id);
    auto began = std::chrono::steady_clock::now();
    auto out = fn(pass_ctx, core, row);
    // A pass that stop cancelled has not failed for good, whatever it threw.
    if (out.kind == Outcome::terminal_error && !pass_ctx.done())
      report_terminal(core, pass_ctx, row, out.message);
    auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began);
    core.log(pass_ctx, LogLevel::debug, "reconciled",
             {{"generation", std::to_string(row.meta.generation)},
              {"result", result_name(out)},
              {"duration_ms", std::to_string(took.count())}});
    return out;
  };
  bh.core()->register_kind(gk, std::move(pass), opts);
  return bh.core();
}

}  // namespace beehive::detail
