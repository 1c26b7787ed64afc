// The public actor surface: error conversion, the actors' handles, and the checks an
// application actor's requests get (the facade's, which they bypass).

#include <beehive/actors.hpp>

#include "actors/store_writer.hpp"
#include "runtime.hpp"

namespace beehive {

caf::error make_error(errc code, std::string what) {
  if (what.empty()) return {static_cast<std::uint8_t>(code), error_category_atom};
  return {static_cast<std::uint8_t>(code), error_category_atom, caf::make_message(std::move(what))};
}

std::optional<errc> to_errc(const caf::error& err) {
  if (!err) return std::nullopt;
  if (err.category() == error_category_atom) return static_cast<errc>(err.code());
  if (err == caf::sec::request_receiver_down || err.category() == caf::atom("exit"))
    return errc::stopped;
  if (err == caf::sec::request_timeout) return errc::deadline_exceeded;
  return errc::store;
}

std::string error_message(const caf::error& err) {
  if (err.context().match_elements<std::string>()) return err.context().get_as<std::string>(0);
  return {};
}

void add_message_types(caf::actor_system_config& cfg) {
#define BEEHIVE_TYPE(T) cfg.add_message_type<T>("beehive::" #T)
  BEEHIVE_TYPE(GroupKind);
  BEEHIVE_TYPE(Ref);
  BEEHIVE_TYPE(Condition);
  BEEHIVE_TYPE(EventSpec);
  BEEHIVE_TYPE(Event);
  BEEHIVE_TYPE(Schedule);
  BEEHIVE_TYPE(ObjectRow);
  BEEHIVE_TYPE(object_change);
  BEEHIVE_TYPE(event_run);
  BEEHIVE_TYPE(commit_record);
  BEEHIVE_TYPE(create_request);
  BEEHIVE_TYPE(update_request);
  BEEHIVE_TYPE(create_or_update_request);
  BEEHIVE_TYPE(get_or_create_request);
  BEEHIVE_TYPE(get_or_create_reply);
  BEEHIVE_TYPE(remove_request);
  BEEHIVE_TYPE(remove_by_slug_request);
  BEEHIVE_TYPE(update_status_request);
  BEEHIVE_TYPE(set_condition_request);
  BEEHIVE_TYPE(remove_condition_request);
  BEEHIVE_TYPE(remove_finalizer_request);
  BEEHIVE_TYPE(add_dependency_request);
  BEEHIVE_TYPE(remove_dependency_request);
  BEEHIVE_TYPE(record_event_request);
  BEEHIVE_TYPE(collect_request);
  BEEHIVE_TYPE(trim_events_request);
  BEEHIVE_TYPE(transaction_request);
  BEEHIVE_TYPE(get_request);
  BEEHIVE_TYPE(get_by_slug_request);
  BEEHIVE_TYPE(list_request);
  BEEHIVE_TYPE(relation_request);
  BEEHIVE_TYPE(has_incoming_refs_request);
  BEEHIVE_TYPE(list_events_request);
  BEEHIVE_TYPE(store_writer_state);
  BEEHIVE_TYPE(watch_request);
  BEEHIVE_TYPE(event_watch_request);
  BEEHIVE_TYPE(watch_ended);
  BEEHIVE_TYPE(watch_hub_state);
  BEEHIVE_TYPE(requeue_request);
  BEEHIVE_TYPE(schedule_watch_request);
  BEEHIVE_TYPE(schedule_change);
  BEEHIVE_TYPE(controller_state);
  BEEHIVE_TYPE(gc_state);
  BEEHIVE_TYPE(event_log_state);
  BEEHIVE_TYPE(scheduler_state);
#undef BEEHIVE_TYPE
  // Replies that are lists.
  cfg.add_message_type<std::vector<ObjectRow>>("std::vector<beehive::ObjectRow>");
  cfg.add_message_type<std::vector<Event>>("std::vector<beehive::Event>");
  cfg.add_message_type<std::vector<Ref>>("std::vector<beehive::Ref>");
  cfg.add_message_type<std::vector<object_change>>("std::vector<beehive::object_change>");
  cfg.add_error_category(error_category_atom,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = "beehive: ";
                           out += to_string(static_cast<errc>(code));
                           if (ctx.match_elements<std::string>())
                             out += " (" + ctx.get_as<std::string>(0) + ")";
                           return out;
                         });
}

namespace detail {

namespace {

// What the blocking facade checks before it sends a request (client_core.cpp,
// controller_client.cpp, codec): an actor's request reaches the writer directly.

void check_kind(const GroupKind& gk) {
  require_utf8(gk.group, "group");
  require_utf8(gk.kind, "kind");
}
void check_finalizers(const std::vector<std::string>& finalizers) {
  for (auto& f : finalizers) require_utf8(f, "finalizer");
}

void check(const create_request& r) {
  check_kind(r.gk);
  if (r.slug) require_utf8(*r.slug, "slug");
  check_finalizers(r.finalizers);
  require_json_text(r.spec, "spec");
}
void check(const update_request& r) {
  check_kind(r.gk);
  require_json_text(r.spec, "spec");
}
void check(const create_or_update_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
  require_json_text(r.spec, "spec");
}
void check(const get_or_create_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
  check_finalizers(r.finalizers);
  require_json_text(r.spec, "spec");
}
void check(const remove_request& r) { check_kind(r.gk); }
void check(const remove_by_slug_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
}
void check(const update_status_request& r) {
  check_kind(r.gk);
  require_json_text(r.status, "status");
}
void check(const set_condition_request& r) {
  check_kind(r.gk);
  for (auto* text : {&r.condition.type, &r.condition.reason, &r.condition.message})
    require_utf8(*text, "condition text");
  if (r.condition.type.empty()) throw Error(errc::invalid_argument, "a condition needs a type");
}
void check(const remove_condition_request& r) {
  check_kind(r.gk);
  require_utf8(r.type, "condition type");
}
void check(const remove_finalizer_request& r) {
  check_kind(r.gk);
  require_utf8(r.finalizer, "finalizer");
}
void check(const add_dependency_request& r) { check_kind(r.gk); }
void check(const remove_dependency_request& r) { check_kind(r.gk); }
void check(const record_event_request& r) {
  check_kind(r.gk);
  for (auto* text : {&r.event.category, &r.event.reason, &r.event.message})
    require_utf8(*text, "event text");
  require_storable(r.event.detail, "event detail");
}
// Beehive's own requests (gc, event_log, within sessions) need no check.
void check(const collect_request&) {}
void check(const trim_events_request&) {}
void check(const SessionCmd&) {}
void check(const ReadOp&) {}

}  // namespace

void check_request(const WriteOp& op) {
  std::visit([](const auto& r) { check(r); }, op);
}

void check_request(const get_by_slug_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
}

void check_request(const list_events_request& r) {
  if (r.category) require_utf8(*r.category, "event category");
  if (r.reason) require_utf8(*r.reason, "event reason");
}

store_writer_actor store_writer_of(const Beehive& bh) { return bh.runtime()->store_writer(); }

watch_hub_actor watch_hub_of(const Beehive& bh) {
  return caf::actor_cast<watch_hub_actor>(bh.runtime()->watch_hub());
}

std::optional<controller_actor> controller_of(const Beehive& bh, const GroupKind& gk) {
  auto c = bh.runtime()->controller(gk);
  if (!c) return std::nullopt;
  return caf::actor_cast<controller_actor>(c);
}

gc_actor gc_of(const Beehive& bh) { return caf::actor_cast<gc_actor>(bh.runtime()->gc()); }

event_log_actor event_log_of(const Beehive& bh) {
  return caf::actor_cast<event_log_actor>(bh.runtime()->event_log());
}

scheduler_actor scheduler_of(const Beehive& bh) { return bh.runtime()->scheduler(); }

}  // namespace detail
}  // namespace beehive
