#pragma once

// The checks an application actor's requests get in the store_writer: the ones the
// blocking facade makes before it sends its own (client_core.cpp, controller_client.cpp,
// the codec), since an actor's request reaches the writer directly. Text must be UTF-8,
// a spec or status JSON text nested at most max_json_depth deep (stored in canonical
// form, as the facade encodes it), an event detail storable as itself; an unset schema
// version becomes the kind's.
//
// Pure functions over plain values: any thread.

#include <concepts>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/actor/requests.hpp>
#include <beehive/condition.hpp>
#include <beehive/detail/codec.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>

#include "store/write_engine.hpp"

namespace beehive::store {

void check_kind(const GroupKind& gk);
void check_text(const std::string& text, std::string_view what);
void check_text(const std::optional<std::string>& text, std::string_view what);
/// The same for a name: at most max_name_bytes (names.hpp).
void check_name(const std::string& name, std::string_view what);
void check_name(const std::optional<std::string>& name, std::string_view what);
/// A finalizer being added: text, not empty (a removal only needs text).
void check_new_finalizer(const std::string& finalizer);
/// An object's finalizers together: at most max_finalizers_bytes.
void check_finalizers_bytes(const std::vector<std::string>& finalizers);
/// An object's labels together (keys and values): at most `limit` (with_max_object_bytes).
void check_labels_bytes(const Labels& labels, std::size_t limit);
void check_condition(const Condition& c);
/// An observed generation (of a status or a condition): 0 (none) or above.
void check_observed_generation(std::int64_t generation);
void check_event(const EventSpec& e);
void check_filter(const EventFilter& f);
/// A read's `loads`: LoadOption bits, none unknown.
void check_loads(unsigned loads);
/// A relation_request's `relation`: exactly one of owner, dependencies, dependents, owned.
void check_relation(unsigned relation);
/// A schema version a request names: 0 (unversioned) or above.
void check_schema_version(const std::optional<int>& version, std::string_view what);

/// Throws Error(errc::invalid_argument) for a request the facade would have refused.
/// The checks follow the request's fields, so that a new request is checked like the
/// others without a line here: a kind, slugs and finalizers must be text (a kind and a
/// slug at most max_name_bytes), a spec or status JSON text nested at most max_json_depth
/// deep, a condition or event as the facade takes them, an event filter's text UTF-8 and
/// its limit not negative, load and relation bits among LoadOption's, schema versions and
/// observed generations not negative.
template <class Request>
void check_request(const Request& r) {
  if constexpr (requires { r.gk; }) check_kind(r.gk);
  if constexpr (requires { r.slug; }) check_name(r.slug, "slug");
  if constexpr (requires { r.finalizers; })
    for (auto& f : r.finalizers) check_new_finalizer(f);
  if constexpr (std::same_as<Request, add_finalizer_request>)
    check_new_finalizer(r.finalizer);
  else if constexpr (requires { r.finalizer; })
    check_text(r.finalizer, "finalizer");
  if constexpr (requires { r.spec; }) detail::require_json_text(r.spec, "spec");
  if constexpr (requires { r.status; }) detail::require_json_text(r.status, "status");
  if constexpr (requires { r.condition; }) check_condition(r.condition);
  if constexpr (requires { r.observed_generation; })
    check_observed_generation(r.observed_generation);
  if constexpr (requires {
                  { r.type } -> std::convertible_to<std::string_view>;
                })
    check_name(r.type, "condition type");
  if constexpr (requires { r.event; }) check_event(r.event);
  if constexpr (requires { r.filter; }) check_filter(r.filter);
  if constexpr (requires { r.loads; }) check_loads(r.loads);
  if constexpr (requires { r.relation; }) check_relation(r.relation);
  if constexpr (requires { r.spec_version; }) check_schema_version(r.spec_version, "spec");
  if constexpr (requires { r.status_version; }) check_schema_version(r.status_version, "status");
}

/// The kind's schema versions, for a request that leaves them unset; `defaults` (VersionDefault
/// bits) says which of them the request is about to store.
using SchemaVersionsOf = std::function<SchemaVersions(const GroupKind&, unsigned defaults)>;

/// Refuses `version` when the kind is versioned (`current` > 0) and it is above `current`.
void check_version_readable(const std::optional<int>& version, int current, std::string_view what);

/// Checks JSON text (as check_request) and rewrites it as the facade would have encoded
/// it: sorted and compact, so that an equal value stores the same bytes (no-op detection
/// compares them).
void make_canonical_json(std::string& text, std::string_view what);

/// Checks `r` and brings it into the form the facade sends: JSON text in canonical form
/// and schema versions set (from `versions`, when given). Throws as check_request.
/// An explicit version above the kind's (a versioned kind's) is `invalid_argument`: the
/// row would be committed, and then refused by every read here as a downgrade.
///
/// Checked before it is copied: copying a JSON value recurses, and a detail nested
/// too deep would overflow the stack before the check refused it.
template <class Request>
Request prepare_request(const Request& in, const SchemaVersionsOf& versions) {
  check_request(in);
  Request r = in;
  constexpr bool has_spec = requires { r.spec_version; };
  constexpr bool has_status = requires { r.status_version; };
  if constexpr (has_spec || has_status) {
    unsigned defaults = 0;
    if constexpr (has_spec) {
      make_canonical_json(r.spec, "spec");
      if (!r.spec_version) defaults |= kDefaultSpec;
    }
    if constexpr (has_status) {
      make_canonical_json(r.status, "status");
      if (!r.status_version) defaults |= kDefaultStatus;
    }
    // Looked up once the texts are good: `defaults` notes what a write will store.
    auto current = versions ? versions(r.gk, defaults) : SchemaVersions{};
    if constexpr (has_spec) {
      check_version_readable(r.spec_version, current.spec, "spec");
      if (!r.spec_version) r.spec_version = current.spec;
    }
    if constexpr (has_status) {
      check_version_readable(r.status_version, current.status, "status");
      if (!r.status_version) r.status_version = current.status;
    }
  }
  return r;
}

}  // namespace beehive::store
