#include <beehive/detail/client_core.hpp>

#include <iostream>

#include <beehive/beehive.hpp>
#include <beehive/detail/codec.hpp>

#include "beehive_core.hpp"
#include "context_internal.hpp"
#include "continue_token.hpp"
#include "names.hpp"
#include "options_internal.hpp"
#include "store/label_selector.hpp"
#include "store/request_checks.hpp"
#include "thread_guards.hpp"

namespace beehive::detail {

namespace {

[[noreturn]] void throw_not_found(const GroupKind& gk, const std::string& what) {
  throw Error(errc::not_found, "no " + to_string(gk) + " " + what);
}

std::optional<ObjectRow> first(std::vector<ObjectRow> rows) {
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

bool same_kind(const ObjectRow& row, const GroupKind& gk) {
  return row.meta.group == gk.group && row.meta.kind == gk.kind;
}

/// The callbacks run after the commit: a throw is logged, never reported as the
/// create's failure (the object is stored). Their context is the caller's, outside the
/// transaction, which has ended by then: calls made with it work.
void run_on_create(BeehiveCore& rt, const OptionSet& s, const Context& ctx) {
  for (auto& fn : s.on_create)
    rt.after_commit(ctx, [fn, after = ContextAccess::outside_transactions(ctx), &rt] {
      try {
        fn(after);
      } catch (const std::exception& e) {
        rt.log(LogLevel::error, "a with_on_create callback threw", {{"reason", e.what()}});
      } catch (...) {
        rt.log(LogLevel::error, "a with_on_create callback threw",
               {{"reason", "unknown exception"}});
      }
    });
}

}  // namespace

ClientCore::ClientCore(const Beehive& bh, GroupKind gk) : rt_(bh.core()), gk_(std::move(gk)) {
  require_name(gk_.group, "group");
  require_name(gk_.kind, "kind");
}

namespace {
/// The options' text and sizes, checked whether the call creates or not: bad input is
/// refused whatever the store holds (a converged create_or_update takes no write).
void check_options(const OptionSet& s, const BeehiveCore& rt) {
  if (s.slug) require_name(*s.slug, "slug");
  for (auto& f : s.finalizers) require_new_finalizer(f);
  store::check_finalizers_bytes(s.finalizers);
  if (!s.labels.empty()) {
    store::validate_labels(s.labels);
    store::check_labels_bytes(s.labels, rt.max_object_bytes());
  }
}
}  // namespace

const Migrator* ClientCore::migrator() const { return rt_->migrator(gk_); }

ObjectRow ClientCore::create(const Context& ctx, std::string spec,
                             const std::vector<Option>& opts) const {
  auto s = OptionSet::from(opts);
  check_options(s, *rt_);
  auto version = rt_->writing_spec_version(gk_);
  auto r = rt_->write(ctx,
                      create_request{gk_, std::move(spec), s.slug, s.finalizers, s.owner,
                                     version.version(), std::move(s.labels)},
                      {});
  version.keep();
  run_on_create(*rt_, s, ctx);
  return std::move(r.row);
}

/// A converged write: the stored row already holds this spec, so the write would change
/// nothing and need not take the writer at all. Not inside `within`, whose reads must see
/// the transaction. The spec is held when the row has these bytes at this version, or
/// an older blob that `m` converts to these very bytes: writing it would only re-stamp
/// the blob (the next real write does), yet count as a spec change (a generation, a
/// reconcile) once per object after a migrator is added.
bool already_stored(const Context& ctx, const std::optional<ObjectRow>& row, const GroupKind& gk,
                    const std::string& spec, int version, const Migrator* m) {
  if (ContextAccess::transaction(ctx) || !row || !same_kind(*row, gk)) return false;
  if (row->spec_version == version) return row->spec == spec;
  if (!m || row->spec_version > version) return false;
  try {
    return detail::dump_json(detail::load_blob(row->spec, row->spec_version, m, true)) == spec;
  } catch (const std::exception&) {  // it does not convert: the write says so
    return false;
  }
}

ObjectRow ClientCore::create_or_update(const Context& ctx, std::string_view slug, std::string spec,
                                       RowCheck check, const std::vector<Option>& opts) const {
  auto s = OptionSet::from(opts);
  if (s.slug)
    throw Error(errc::conflicting_option, "create_or_update takes its slug as an argument");
  // It writes over whatever is stored: a precondition would be dropped in silence.
  if (s.resource_version)
    throw Error(errc::conflicting_option,
                "create_or_update checks no resource version: get the object and update it "
                "with with_resource_version");
  check_options(s, *rt_);
  require_name(slug, "slug");
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (!ContextAccess::transaction(ctx)) {
    refuse_write_beside_open_block(rt_.get(), false);
    auto row = rt_->read(ctx, [&](store::Reader& r) { return r.get_by_slug(gk_, slug, 0); });
    if (already_stored(ctx, row, gk_, spec, rt_->spec_version(gk_), migrator())) {
      if (check) check(*row);
      return std::move(*row);
    }
  }
  create_or_update_request req;
  req.gk = gk_;
  req.slug = std::string(slug);
  req.spec = std::move(spec);
  auto version = rt_->writing_spec_version(gk_);
  req.spec_version = version.version();
  req.finalizers = s.finalizers;
  req.owner = s.owner;
  req.labels = s.labels;
  if (s.on_create.empty()) {
    auto row = rt_->write(ctx, std::move(req), std::move(check)).row;
    version.keep();
    return row;
  }
  // with_on_create runs only when this call creates: whether the slug was free is read
  // in the same transaction as the write.
  ObjectRow out;
  rt_->within(ctx, [&](const Context& inner) {
    bool existed = !rt_->read_in_transaction(inner, ReadOp{ReadOp::get_by_slug, gk_, 0, req.slug})
                        .rows.empty();
    out = rt_->write(inner, std::move(req), std::move(check)).row;
    if (!existed) run_on_create(*rt_, s, inner);
  });
  version.keep();
  return out;
}

std::pair<ObjectRow, bool> ClientCore::get_or_create(const Context& ctx, std::string_view slug,
                                                     std::string spec,
                                                     const std::vector<Option>& opts,
                                                     RowCheck check) const {
  auto s = OptionSet::from(opts);
  if (s.slug) throw Error(errc::conflicting_option, "get_or_create takes its slug as an argument");
  check_options(s, *rt_);
  require_name(slug, "slug");
  auto version = rt_->writing_spec_version(gk_);
  auto r = rt_->write(ctx,
                      get_or_create_request{gk_, std::string(slug), std::move(spec), s.finalizers,
                                            s.owner, version.version(), s.labels},
                      std::move(check));
  if (r.flag) version.keep();  // one it only read was written by someone else
  if (r.flag) run_on_create(*rt_, s, ctx);
  return {std::move(r.row), r.flag};
}

ObjectRow ClientCore::update(const Context& ctx, ObjectID id, std::string spec, RowCheck check,
                             const std::vector<Option>& opts) const {
  auto s = OptionSet::from(opts);
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (!ContextAccess::transaction(ctx)) {
    refuse_write_beside_open_block(rt_.get(), false);
    auto row = rt_->read_committed(ctx, id);
    // A converged write with a stale version is still a conflict: the writer says so.
    bool version_ok =
        !s.resource_version || (row && row->meta.resource_version == *s.resource_version);
    if (version_ok && already_stored(ctx, row, gk_, spec, rt_->spec_version(gk_), migrator())) {
      if (check) check(*row);
      return std::move(*row);
    }
  }
  auto version = rt_->writing_spec_version(gk_);
  auto row =
      rt_->write(ctx,
                 update_request{gk_, id, std::move(spec), version.version(), s.resource_version},
                 std::move(check))
          .row;
  version.keep();
  return row;
}

ObjectRow ClientCore::set_labels(const Context& ctx, ObjectID id, Labels labels, RowCheck check,
                                 const std::vector<Option>& opts) const {
  auto s = OptionSet::from(opts);
  return rt_
      ->write(ctx, set_labels_request{gk_, id, std::move(labels), s.resource_version},
              std::move(check))
      .row;
}

void check_list_read(const ReadSettings& read) {
  if (read.resume_from)
    throw Error(errc::invalid_argument,
                "with_resume_from applies to watch and watch_list, not to a list");
}

ClientCore::RowPage ClientCore::list_page(const Context& ctx, std::size_t limit,
                                          std::string_view continue_token, unsigned loads,
                                          const ReadSettings& read) const {
  store::ListQuery q;
  if (read.selector) q.selector = store::parse_selector(*read.selector);
  // The token names the selection, not its spelling: texts that parse alike share tokens.
  const std::string selector = q.selector ? q.selector->to_string() : std::string();
  q.after = parse_continue_token(continue_token, gk_, selector);
  q.set_page(limit);
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  RowPage page;
  if (ContextAccess::transaction(ctx)) {
    ReadOp op{ReadOp::list_where, gk_, 0, {}, loads};
    op.where = q;
    page.rows = read_in_transaction(ctx, std::move(op));
  } else {
    page.rows = rt_->read(ctx, [&](store::Reader& r) { return r.list_where(gk_, q, loads); });
  }
  if (limit != 0 && page.rows.size() > limit) {
    page.rows.resize(limit);
    page.continue_token = make_continue_token(page.rows.back().meta.id, gk_, selector);
  }
  return page;
}

std::vector<ObjectRow> ClientCore::read_in_transaction(const Context& ctx, ReadOp op) const {
  return rt_->read_in_transaction(ctx, std::move(op)).rows;
}

ObjectRow ClientCore::get(const Context& ctx, ObjectID id, unsigned loads) const {
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  auto row = ContextAccess::transaction(ctx)
                 ? first(read_in_transaction(ctx, ReadOp{ReadOp::get, gk_, id, {}, loads}))
                 : rt_->read(ctx, [&](store::Reader& r) { return r.get(id, loads); });
  if (!row || !same_kind(*row, gk_)) throw_not_found(gk_, "with id " + std::to_string(id));
  return std::move(*row);
}

ObjectRow ClientCore::get_by_slug(const Context& ctx, std::string_view slug, unsigned loads) const {
  require_name(slug, "slug");
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  auto row =
      ContextAccess::transaction(ctx)
          ? first(read_in_transaction(
                ctx, ReadOp{ReadOp::get_by_slug, gk_, 0, std::string(slug), loads}))
          : rt_->read(ctx, [&](store::Reader& r) { return r.get_by_slug(gk_, slug, loads); });
  if (!row) throw_not_found(gk_, "with slug \"" + std::string(slug) + "\"");
  return std::move(*row);
}

std::vector<ObjectRow> ClientCore::list(const Context& ctx, unsigned loads) const {
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx))
    return read_in_transaction(ctx, ReadOp{ReadOp::list, gk_, 0, {}, loads});
  return rt_->read(ctx, [&](store::Reader& r) { return r.list(gk_, loads); });
}

bool ClientCore::list_each(const Context& ctx, unsigned loads,
                           const std::function<void(ObjectRow&&)>& each) const {
  if (loads != 0 || ContextAccess::transaction(ctx)) return false;
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  rt_->read(ctx, [&](store::Reader& r) {
    r.list_each(gk_, each);
    return true;
  });
  return true;
}

std::vector<ObjectRow> ClientCore::list_owned_objects(const Context& ctx, ObjectID owner,
                                                      unsigned loads) const {
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx))
    return read_in_transaction(ctx, ReadOp{ReadOp::list_owned, gk_, owner, {}, loads});
  return rt_->read(ctx, [&](store::Reader& r) { return r.list_owned_objects(gk_, owner, loads); });
}

std::vector<Ref> ClientCore::related(const Context& ctx, ObjectID id, unsigned relation) const {
  return rt_->related(ctx, id, relation);
}

void ClientCore::remove(const Context& ctx, ObjectID id, const std::vector<Option>& opts) const {
  auto s = OptionSet::from(opts);
  rt_->write(ctx, remove_request{gk_, id, s.resource_version}, {});
}

void ClientCore::remove_by_slug(const Context& ctx, std::string_view slug) const {
  require_name(slug, "slug");
  rt_->write(ctx, remove_by_slug_request{gk_, std::string(slug)}, {});
}

std::shared_ptr<StreamCore<object_change>> ClientCore::watch(const Context& ctx,
                                                             std::optional<ObjectID> id,
                                                             const ReadSettings& read) const {
  auto selector = read.selector ? store::parse_selector(*read.selector) : nullptr;
  return rt_->watch(ctx, gk_, id, std::move(selector), read.resume_from);
}

std::vector<Event> ClientCore::list_events(const Context& ctx, ObjectID id,
                                           const EventQuery& q) const {
  store::check_filter(q);
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx))
    return rt_->read_in_transaction(ctx, ReadOp{ReadOp::events, gk_, id, {}, 0, q}).events;
  return rt_->read(ctx, [&](store::Reader& r) { return r.list_events(id, q); });
}

std::optional<Event> ClientCore::current_run(const Context& ctx, ObjectID id,
                                             std::string_view category) const {
  require_name(category, "event category");
  rt_->ensure_running(ctx);
  ctx.throw_if_done();
  if (ContextAccess::transaction(ctx)) {
    EventQuery q;
    q.category = std::string(category);
    auto runs = rt_->read_in_transaction(ctx, ReadOp{ReadOp::current, gk_, id, {}, 0, q}).events;
    return runs.empty() ? std::nullopt : std::optional<Event>(std::move(runs.front()));
  }
  return rt_->read(ctx, [&](store::Reader& r) { return r.current_run(id, std::string(category)); });
}

std::shared_ptr<StreamCore<event_run>> ClientCore::watch_events(const Context& ctx, ObjectID id,
                                                                const EventQuery& q) const {
  store::check_filter(q);
  return rt_->watch_events(ctx, id, q);
}

std::shared_ptr<StreamCore<Schedule>> ClientCore::watch_schedule(const Context& ctx,
                                                                 ObjectID id) const {
  return rt_->watch_schedule(ctx, gk_, id);
}

Schedule ClientCore::get_schedule(ObjectID id) const {
  auto kind = rt_->kind(gk_);
  return kind ? kind->schedules->get(id) : Schedule{};
}

void ClientCore::requeue(const Context& ctx, ObjectID id, bool reset_backoff) const {
  get(ctx, id, 0);  // not_found for a missing or foreign id
  // A standby's controller reconciles nothing: the requeue goes through the change log
  // to the leader's, in whichever process it runs.
  if (rt_->is_standby()) {
    if (!rt_->kind(gk_)) throw Error(errc::no_controller, to_string(gk_) + " has no controller");
    rt_->write(ctx, log_requeue_request{gk_, id, reset_backoff}, {});
    return;
  }
  if (ContextAccess::transaction(ctx)) {
    if (!rt_->kind(gk_)) throw Error(errc::no_controller, to_string(gk_) + " has no controller");
    // A side effect of the block: after its outermost commit, never after a rollback
    // (the controller checks the object against what is committed, which the block's
    // own writes are not yet). Not bound by the block's deadline: the commit is not.
    rt_->after_commit(ctx, [rt = rt_, gk = gk_, id, reset_backoff] {
      try {
        rt->requeue_after_commit(gk, id, reset_backoff);
      } catch (const std::exception& e) {
        rt->log(LogLevel::warning, "a requeue made in a within block failed after its commit",
                {{"kind", to_string(gk)}, {"id", std::to_string(id)}, {"reason", e.what()}});
      }
    });
    return;
  }
  rt_->requeue(ctx, gk_, id, reset_backoff);
}

void ClientCore::report_skipped(const ObjectRow& row, const std::exception& e) const {
  rt_->log(
      LogLevel::warning,
      "skipping " + to_string(gk_) + " " + std::to_string(row.meta.id) + " that does not decode",
      {{"kind", to_string(gk_)}, {"id", std::to_string(row.meta.id)}, {"reason", e.what()}});
}

bool ClientCore::undecodable_change(StreamCoreBase& stream, const object_change& ch,
                                    const std::exception& e) const {
  if (ch.type == ChangeType::Deleted) return true;
  report_skipped(ch.row, e);
  stream.hold_below(ch.row.meta.id,
                    ch.first_version > 0 ? ch.first_version : ch.row.meta.resource_version);
  return false;
}

}  // namespace beehive::detail
