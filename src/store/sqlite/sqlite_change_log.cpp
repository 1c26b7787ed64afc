// The reads of a SQLite Connection that select: a kind's objects by label selector,
// owner and page (SQL built from the selector, see label_selector.hpp), and the change
// log above a version, folded per object.
//
// Runs on the thread using the connection; not thread-safe.

#include <algorithm>
#include <unordered_map>

#include "store/label_selector.hpp"
#include "store/row_json.hpp"
#include "store/sqlite/sqlite_connection.hpp"

namespace beehive::store {

std::vector<ObjectRow> Connection::list_where(const GroupKind& gk, const ListQuery& q,
                                              unsigned loads) {
  // A required label value walks the labels' primary key (key, value, object_id) from the
  // page's start, in id order, testing each row's other requirements by lookups: a page
  // of a label most objects carry costs the page, where a list of every match would be
  // built first. Otherwise an owner, or a selector that requires one of some values (or
  // a key), drives the read from the edges' or the labels' index, one rowid lookup per
  // match. Either way the unary `+` keeps SQLite (which has no statistics here) from
  // walking the kind's index and testing every object instead. A selector of negations
  // alone cannot drive: it walks the kind.
  using Op = LabelRequirement::Op;
  static const std::vector<LabelRequirement> none;
  const auto& reqs = q.selector ? q.selector->requirements() : none;
  auto walk =
      q.owner ? reqs.end()
              : std::find_if(reqs.begin(), reqs.end(), [](auto& r) { return r.op == Op::equals; });
  bool driven = q.owner || std::any_of(reqs.begin(), reqs.end(), [](auto& r) {
                  return r.op == Op::equals || r.op == Op::in || r.op == Op::exists;
                });
  std::string where = driven ? R"(+o."group" = ?1 AND +o.kind = ?2 AND +o.id > ?3)"
                             : R"(o."group" = ?1 AND o.kind = ?2 AND o.id > ?3)";
  const char* from = "objects AS o";
  SqlFilter filter;
  if (walk != reqs.end()) {
    from = "labels AS d CROSS JOIN objects AS o";  // CROSS: labels first, whatever the guess
    where =
        R"(d.key = ?4 AND d.value = ?5 AND d.object_id > ?3 AND o.id = d.object_id AND )" + where;
    std::vector<LabelRequirement> rest(reqs.begin(), walk);
    rest.insert(rest.end(), walk + 1, reqs.end());
    filter = to_correlated_sql(rest, "o.id");
  } else if (!reqs.empty()) {
    filter = to_sql(*q.selector, "o.id");
  }
  if (q.owner)
    where += " AND o.id IN (SELECT from_id FROM refs WHERE to_id = ?4 AND relation = 'owned_by')";
  if (!filter.where.empty()) where += " AND " + filter.where;
  where += walk != reqs.end() ? " ORDER BY d.object_id" : " ORDER BY o.id";
  if (q.limit > 0) where += " LIMIT " + std::to_string(q.limit);
  auto sql = select_objects_sql(where, from);
  return snapshot(loads, [&] {
    std::vector<ObjectRow> rows;
    {
      auto s = use_rows(sql);
      s->bind(1, gk.group);
      s->bind(2, gk.kind);
      s->bind(3, q.after);
      int next = 4;
      if (q.owner) s->bind(next++, *q.owner);
      if (walk != reqs.end()) {
        s->bind(next++, walk->key);
        s->bind(next++, walk->values.at(0));
      }
      for (const auto& b : filter.binds) s->bind(next++, b);
      while (s->step()) rows.push_back(s->row(session_));
    }
    load_all(rows, loads);
    return rows;
  });
}

ChangeLogRead Connection::changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                                        std::optional<ObjectID> id,
                                        const std::vector<std::int64_t>& skip) {
  return snapshot(LoadOption::owner /* any: forces one read transaction */, [&] {
    ChangeLogRead out;
    {
      auto s = use(Query::current_resource_version);
      s->executeStep();
      out.head = s->getColumn(0).getInt64();
    }
    {
      auto s = use(Query::change_log_horizon);
      if (s->executeStep()) out.horizon = s->getColumn(0).getInt64();
    }
    std::unordered_map<ObjectID, std::size_t> at;
    {
      auto s = use(Query::change_log_since);
      s->bind(1, rv);
      while (s->executeStep()) {
        ObjectID oid = s->getColumn(1).getInt64();
        if (id && oid != *id) continue;
        if (std::binary_search(skip.begin(), skip.end(), s->getColumn(0).getInt64())) continue;
        std::string group = s->getColumn(2).getString(), kind = s->getColumn(3).getString();
        if (gk && (group != gk->group || kind != gk->kind)) continue;
        auto [it, fresh] = at.try_emplace(oid, out.changes.size());
        auto& c = fresh ? out.changes.emplace_back() : out.changes[it->second];
        c.resource_version = s->getColumn(0).getInt64();
        if (fresh) {
          c.ref = Ref{oid, group, kind};
          c.first_version = c.resource_version;
        }
        c.parts |= static_cast<unsigned>(s->getColumn(4).getInt64());
        if (!s->getColumn(5).isNull()) {  // a removal, with the final body
          c.type = ChangeType::Deleted;
          c.row = row_from_json(s->getColumn(5).getString());
        }
      }
    }
    for (auto& c : out.changes) {
      if (c.type == ChangeType::Deleted) continue;
      if (c.parts & object_change::created) c.type = ChangeType::Added;
      if ((c.parts & kObjectParts) == 0) continue;  // only a requeue: no object changed
      c.row = get(c.ref.id);
    }
    std::sort(out.changes.begin(), out.changes.end(),
              [](auto& a, auto& b) { return a.resource_version < b.resource_version; });
    return out;
  });
}

}  // namespace beehive::store
