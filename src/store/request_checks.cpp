// The facade's checks for requests that arrive from application actors (see
// request_checks.hpp).

#include "store/request_checks.hpp"

#include <string>
#include <type_traits>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>

namespace beehive::store {

using detail::dump_json;
using detail::parse_json;
using detail::require_json_text;
using detail::require_storable;
using detail::require_utf8;

namespace {

void check_kind(const GroupKind& gk) {
  require_utf8(gk.group, "group");
  require_utf8(gk.kind, "kind");
}

void check_finalizers(const std::vector<std::string>& finalizers) {
  for (auto& f : finalizers) require_utf8(f, "finalizer");
}

void check_filter(const EventFilter& f) {
  if (f.category) require_utf8(*f.category, "event category");
  if (f.reason) require_utf8(*f.reason, "event reason");
}

}  // namespace

void make_canonical_json(std::string& text, std::string_view what) {
  require_json_text(text, what);
  text = dump_json(parse_json(text));
}

void check_request(const create_request& r) {
  check_kind(r.gk);
  if (r.slug) require_utf8(*r.slug, "slug");
  check_finalizers(r.finalizers);
  require_json_text(r.spec, "spec");
}
void check_request(const update_request& r) {
  check_kind(r.gk);
  require_json_text(r.spec, "spec");
}
void check_request(const create_or_update_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
  check_finalizers(r.finalizers);
  require_json_text(r.spec, "spec");
}
void check_request(const get_or_create_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
  check_finalizers(r.finalizers);
  require_json_text(r.spec, "spec");
}
void check_request(const remove_request& r) { check_kind(r.gk); }
void check_request(const remove_by_slug_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
}
void check_request(const update_status_request& r) {
  check_kind(r.gk);
  require_json_text(r.status, "status");
}
void check_request(const set_condition_request& r) {
  check_kind(r.gk);
  for (auto* text : {&r.condition.type, &r.condition.reason, &r.condition.message})
    require_utf8(*text, "condition text");
  if (r.condition.type.empty()) throw Error(errc::invalid_argument, "a condition needs a type");
}
void check_request(const remove_condition_request& r) {
  check_kind(r.gk);
  require_utf8(r.type, "condition type");
}
void check_request(const remove_finalizer_request& r) {
  check_kind(r.gk);
  require_utf8(r.finalizer, "finalizer");
}
void check_request(const add_finalizer_request& r) {
  check_kind(r.gk);
  require_utf8(r.finalizer, "finalizer");
  if (r.finalizer.empty()) throw Error(errc::invalid_argument, "a finalizer needs a name");
}
void check_request(const add_dependency_request& r) { check_kind(r.gk); }
void check_request(const remove_dependency_request& r) { check_kind(r.gk); }
void check_request(const record_event_request& r) {
  check_kind(r.gk);
  for (auto* text : {&r.event.category, &r.event.reason, &r.event.message})
    require_utf8(*text, "event text");
  require_storable(r.event.detail, "event detail");
}
void check_request(const get_request& r) { check_kind(r.gk); }
void check_request(const get_by_slug_request& r) {
  check_kind(r.gk);
  require_utf8(r.slug, "slug");
}
void check_request(const list_request& r) { check_kind(r.gk); }
void check_request(const list_events_request& r) { check_filter(r.filter); }

}  // namespace beehive::store
