// The store_reader actor (see store_reader.hpp): the actor surface's reads on the read
// connections. Runs on its own (detached) thread.

#include "actors/store_reader.hpp"
#include "actors/thread_name.hpp"

#include <string>
#include <utility>

#include <caf/result.hpp>

#include "store/label_selector.hpp"
#include "store/request_checks.hpp"

namespace beehive::detail {

namespace {

ObjectRow require_kind(std::optional<ObjectRow> row, const GroupKind& gk, const std::string& what) {
  if (!row || row->meta.group != gk.group || row->meta.kind != gk.kind)
    throw Error(errc::not_found, "no " + to_string(gk) + " " + what);
  return std::move(*row);
}

ObjectRow read(store::Reader& r, const get_request& q) {
  return require_kind(r.get(q.id, q.loads), q.gk, "with id " + std::to_string(q.id));
}
ObjectRow read(store::Reader& r, const get_by_slug_request& q) {
  return require_kind(r.get_by_slug(q.gk, q.slug, q.loads), q.gk, "with slug \"" + q.slug + "\"");
}
std::vector<ObjectRow> read(store::Reader& r, const list_request& q) {
  if (auto selector = store::parse_selector(q.selector)) {
    store::ListQuery where;
    where.owner = q.owner;
    where.selector = std::move(selector);
    return r.list_where(q.gk, where, q.loads);
  }
  return q.owner ? r.list_owned_objects(q.gk, *q.owner, q.loads) : r.list(q.gk, q.loads);
}
std::vector<Ref> read(store::Reader& r, const relation_request& q) {
  return r.related(q.id, q.relation);
}
bool read(store::Reader& r, const has_incoming_refs_request& q) {
  return r.has_incoming_refs(q.id);
}
std::vector<Event> read(store::Reader& r, const list_events_request& q) {
  return r.list_events(q.id, q.filter);
}

/// One handler per read request: checks it as the facade checks its reads, then reads.
template <class Request>
struct ReadHandler {
  std::shared_ptr<store::Backend> backend;
  caf::result<typename Request::reply_type> operator()(const Request& q) const {
    return reply_or_error([&] {
      store::check_request(q);
      auto lease = backend->reader();
      return read(*lease, q);
    });
  }
};

template <class... Rs>
store_reader_actor::behavior_type behavior_for(type_list<Rs...>,
                                               const std::shared_ptr<store::Backend>& backend) {
  return {ReadHandler<Rs>{backend}...};
}

}  // namespace

store_reader_actor::behavior_type store_reader(store_reader_actor::pointer,
                                               std::shared_ptr<store::Backend> backend) {
  name_this_thread("bh.store-read");
  return behavior_for(read_request_types{}, backend);
}

}  // namespace beehive::detail
