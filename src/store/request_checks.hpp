#pragma once

// The checks an application actor's requests get in the store_writer: the ones the
// blocking facade makes before it sends its own (client_core.cpp, controller_client.cpp,
// the codec), since an actor's request reaches the writer directly. Text must be UTF-8,
// a spec or status JSON text nested at most max_json_depth deep (stored in canonical
// form, as the facade encodes it), an event detail storable as itself; an unset schema
// version becomes the kind's.
//
// Pure functions over plain values: any thread.

#include <functional>
#include <string>
#include <string_view>

#include <beehive/actor/requests.hpp>
#include <beehive/group_kind.hpp>

#include "store/write_engine.hpp"

namespace beehive::store {

/// Throws Error(errc::invalid_argument) for a request the facade would have refused.
void check_request(const create_request& r);
void check_request(const update_request& r);
void check_request(const create_or_update_request& r);
void check_request(const get_or_create_request& r);
void check_request(const remove_request& r);
void check_request(const remove_by_slug_request& r);
void check_request(const update_status_request& r);
void check_request(const set_condition_request& r);
void check_request(const remove_condition_request& r);
void check_request(const remove_finalizer_request& r);
void check_request(const add_finalizer_request& r);
void check_request(const add_dependency_request& r);
void check_request(const remove_dependency_request& r);
void check_request(const record_event_request& r);
/// Beehive's own requests (gc, event_log) need no check.
inline void check_request(const collect_request&) {}
inline void check_request(const trim_events_request&) {}
void check_request(const get_request& r);
void check_request(const get_by_slug_request& r);
void check_request(const list_request& r);
inline void check_request(const relation_request&) {}
inline void check_request(const has_incoming_refs_request&) {}
void check_request(const list_events_request& r);

/// The kind's schema versions, for a request that leaves them unset.
using SchemaVersionsOf = std::function<SchemaVersions(const GroupKind&)>;

/// Checks JSON text (as check_request) and rewrites it as the facade would have encoded
/// it: sorted and compact, so that an equal value stores the same bytes (no-op detection
/// compares them).
void make_canonical_json(std::string& text, std::string_view what);

/// Checks `r` and brings it into the form the facade sends: JSON text in canonical form
/// and schema versions set (from `versions`, when given). Throws as check_request.
template <class Request>
Request prepare_request(Request r, const SchemaVersionsOf& versions) {
  check_request(r);
  if constexpr (requires { r.spec_version; }) {
    make_canonical_json(r.spec, "spec");
    if (!r.spec_version) r.spec_version = versions ? versions(r.gk).spec : 0;
  }
  if constexpr (requires { r.status_version; }) {
    make_canonical_json(r.status, "status");
    if (!r.status_version) r.status_version = versions ? versions(r.gk).status : 0;
  }
  return r;
}

}  // namespace beehive::store
