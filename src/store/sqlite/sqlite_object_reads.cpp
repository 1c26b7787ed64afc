// The object reads of a SQLite Connection: one object, a kind, ids, snapshots with the
// store's resource version, the changes since a version, and the relations (owner,
// dependencies, dependents, owned, recent events) attached in the same read snapshot.
//
// Runs on the thread using the connection: a caller's thread with a leased reader, or
// the writer's thread (whose reads see its open transaction). Not thread-safe.

#include <unordered_map>

#include <nlohmann/json.hpp>

#include <beehive/options.hpp>

#include "store/label_selector.hpp"
#include "store/sqlite/sqlite_connection.hpp"

namespace beehive::store {

std::optional<ObjectRow> Connection::get(ObjectID id, unsigned loads) {
  return snapshot(loads, [&]() -> std::optional<ObjectRow> {
    std::optional<ObjectRow> row;
    {
      auto s = use_rows(Query::get);
      s->bind(1, id);
      if (!s->step()) return std::nullopt;
      row = s->row(session_);
    }
    if (loads) load({&*row}, loads);
    return row;
  });
}

std::optional<ObjectRow> Connection::get_by_slug(const GroupKind& gk, std::string_view slug,
                                                 unsigned loads) {
  return snapshot(loads, [&]() -> std::optional<ObjectRow> {
    std::optional<ObjectRow> row;
    {
      auto s = use_rows(Query::get_by_slug);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      s->bind(3, slug);
      if (!s->step()) return std::nullopt;
      row = s->row(session_);
    }
    if (loads) load({&*row}, loads);
    return row;
  });
}

std::vector<ObjectRow> Connection::list(const GroupKind& gk, unsigned loads) {
  return snapshot(loads, [&] {
    std::vector<ObjectRow> rows;
    {
      auto s = use_rows(Query::list);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      while (s->step()) rows.push_back(s->row(session_));
    }
    load_all(rows, loads);
    return rows;
  });
}

void Connection::list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) {
  guarded([&] {
    auto s = use_rows(Query::list);
    s->bind(1, gk.group);
    s->bind(2, gk.kind);
    while (s->step()) each(s->row(session_));
  });
}

std::vector<std::pair<ObjectID, std::int64_t>> Connection::list_ids(const GroupKind& gk,
                                                                    bool unsettled_only) {
  return guarded([&] {
    auto s = use(unsettled_only ? Query::list_unsettled_ids : Query::list_ids);
    s->bindNoCopy(1, gk.group);
    s->bindNoCopy(2, gk.kind);
    std::vector<std::pair<ObjectID, std::int64_t>> ids;
    while (s->executeStep())
      ids.emplace_back(s->getColumn(0).getInt64(), s->getColumn(1).getInt64());
    return ids;
  });
}

std::vector<ObjectRow> Connection::snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                            const std::shared_ptr<const LabelSelector>& selector,
                                            std::int64_t& resource_version) {
  return snapshot(LoadOption::owner /* any: forces one read transaction */, [&] {
    {
      auto s = use(Query::current_resource_version);
      s->executeStep();
      resource_version = s->getColumn(0).getInt64();
    }
    std::vector<ObjectRow> rows;
    if (!id && selector && !selector->empty())
      return list_where(gk, ListQuery{0, 0, {}, selector}, 0);
    if (!id) return list(gk);
    auto row = get(*id);
    if (row && row->meta.group == gk.group && row->meta.kind == gk.kind)
      rows.push_back(std::move(*row));
    return rows;
  });
}

std::vector<Ref> Connection::related(ObjectID id, unsigned relation) {
  Query q = relation == LoadOption::owner          ? Query::owner_of
            : relation == LoadOption::dependencies ? Query::dependencies_of
            : relation == LoadOption::dependents   ? Query::dependents_of
                                                   : Query::owned_by;
  return guarded([&] {
    std::vector<Ref> out;
    if (relation == LoadOption::owner) {
      auto s = use(Query::owner_of_one);
      s->bind(1, id);
      if (s->executeStep())
        out.push_back(Ref{s->getColumn(0).getInt64(), s->getColumn(1).getString(),
                          s->getColumn(2).getString()});
      return out;
    }
    auto ids = nlohmann::json::array({id}).dump();  // a one-id list, as load() passes
    for (auto& [from, ref] : edges(q, ids)) out.push_back(ref);
    return out;
  });
}

bool Connection::has_incoming_refs(ObjectID id) {
  return guarded([&] {
    auto s = use(Query::has_incoming_refs);
    s->bind(1, id);
    s->executeStep();
    return s->getColumn(0).getInt() != 0;
  });
}

std::vector<ObjectRow> Connection::list_owned_objects(const GroupKind& gk, ObjectID owner,
                                                      unsigned loads) {
  return snapshot(loads, [&] {
    std::vector<ObjectRow> rows;
    {
      auto s = use_rows(Query::list_owned_objects);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      s->bind(3, owner);
      while (s->step()) rows.push_back(s->row(session_));
    }
    load_all(rows, loads);
    return rows;
  });
}

std::vector<std::pair<ObjectID, Ref>> Connection::edges(Query q, const std::string& ids) {
  auto s = use(q);
  s->bindNoCopy(1, ids);
  std::vector<std::pair<ObjectID, Ref>> out;
  while (s->executeStep())
    out.emplace_back(
        s->getColumn(0).getInt64(),
        Ref{s->getColumn(1).getInt64(), s->getColumn(2).getString(), s->getColumn(3).getString()});
  return out;
}

void Connection::load_all(std::vector<ObjectRow>& rows, unsigned loads) {
  if (!loads || rows.empty()) return;
  std::vector<ObjectRow*> ptrs;
  ptrs.reserve(rows.size());
  for (auto& r : rows) ptrs.push_back(&r);
  load(std::move(ptrs), loads);
}

void Connection::load(std::vector<ObjectRow*> rows, unsigned loads) {
  nlohmann::json id_list = nlohmann::json::array();
  std::unordered_map<ObjectID, ObjectRow*> by_id;
  for (auto* r : rows) {
    id_list.push_back(r->meta.id);
    by_id[r->meta.id] = r;
  }
  auto ids = id_list.dump();
  auto attach = [&](Query q, auto member) {
    for (auto* r : rows) (r->meta.relations.*member).emplace();
    for (auto& [id, ref] : edges(q, ids)) (by_id[id]->meta.relations.*member)->push_back(ref);
  };
  if (loads & LoadOption::owner) {
    for (auto* r : rows) r->meta.relations.owner.emplace();
    for (auto& [id, ref] : edges(Query::owner_of, ids)) by_id[id]->meta.relations.owner = ref;
  }
  if (loads & LoadOption::dependencies)
    attach(Query::dependencies_of, &LoadedRelations::dependencies);
  if (loads & LoadOption::dependents) attach(Query::dependents_of, &LoadedRelations::dependents);
  if (loads & LoadOption::owned) attach(Query::owned_by, &LoadedRelations::owned);
  if (loads & LoadOption::events) {
    for (auto* r : rows) r->meta.relations.events.emplace();
    for (auto& e : recent_events(ids)) by_id[e.object_id]->meta.relations.events->push_back(e);
  }
}

}  // namespace beehive::store
