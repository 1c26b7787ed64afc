// The reads of a PostgreSQL connection: objects, relations attached in the same
// snapshot, selections, event runs and the change log. Each mirrors the SQLite
// connection's read of the same name (sqlite_object_reads.cpp, sqlite_event_reads.cpp,
// sqlite_change_log.cpp), which say why they read what they read.
//
// Runs on the thread using the connection; not thread-safe.

#include "store/postgres/pg_reads.hpp"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include <beehive/detail/codec.hpp>
#include <beehive/options.hpp>

#include "store/label_selector.hpp"
#include "store/postgres/pg_faults.hpp"
#include "store/postgres/pg_queries.hpp"
#include "store/row_json.hpp"

namespace beehive::store::pg {

namespace {

constexpr int recent_events_per_category = 10;

std::optional<Time> opt_time(const Result& r, int row, int col) {
  if (r.null(row, col)) return std::nullopt;
  return from_millis(r.i64(row, col));
}

}  // namespace

ObjectRow read_object_row(const Result& r, int i, std::int64_t session, int first) {
  ObjectRow row;
  auto& m = row.meta;
  m.id = r.i64(i, first + 0);
  m.group = r.str(i, first + 1);
  m.kind = r.str(i, first + 2);
  if (!r.null(i, first + 3)) m.slug = r.str(i, first + 3);
  row.spec = r.str(i, first + 4);
  row.spec_version = static_cast<int>(r.i64(i, first + 5));
  if (!r.null(i, first + 6)) row.status = r.str(i, first + 6);
  row.status_version = static_cast<int>(r.i64(i, first + 7));
  m.generation = r.i64(i, first + 8);
  m.observed_generation = r.opt_i64(i, first + 9);
  m.observed_at = opt_time(r, i, first + 10);
  m.resource_version = r.i64(i, first + 11);
  m.deletion_requested_at = opt_time(r, i, first + 12);
  if (auto f = r.text(i, first + 13); f != "[]")
    m.finalizers = nlohmann::json::parse(f).get<std::vector<std::string>>();
  m.created_at = from_millis(r.i64(i, first + 14));
  m.updated_at = from_millis(r.i64(i, first + 15));
  if (!r.null(i, first + 16)) m.labels = nlohmann::json::parse(r.text(i, first + 16)).get<Labels>();
  m.conditions = stored_conditions(r.text(i, first + 17), session);
  return row;
}

namespace {

ObjectRow read_row(const Result& r, int i, std::int64_t session) {
  return read_object_row(r, i, session);
}

event_run read_event(const Result& r, int i) {
  event_run run;
  auto& e = run.event;
  e.id = r.i64(i, 0);
  e.object_id = r.i64(i, 1);
  e.category = r.str(i, 2);
  e.type = event_type_from_string(r.str(i, 3));
  e.reason = r.str(i, 4);
  e.message = r.str(i, 5);
  if (!r.null(i, 6)) e.detail = detail::parse_json(r.str(i, 6));
  e.count = static_cast<int>(r.i64(i, 7));
  e.first_at = from_millis(r.i64(i, 8));
  e.last_at = from_millis(r.i64(i, 9));
  run.resource_version = r.i64(i, 10);
  return run;
}

/// An id list as a PostgreSQL array literal, bound as one parameter.
std::string id_array(const std::vector<ObjectID>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + "}";
}

/// The selector's `?` placeholders as $next, $next+1, ...
std::string numbered(const std::string& where, int next) {
  std::string out;
  for (char ch : where) {
    if (ch == '?') {
      out += '$';
      out += std::to_string(next++);
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

template <class Fn>
auto Reads::in_snapshot(Fn&& fn) -> decltype(fn()) {
  c_.read_pending();  // a transaction begun ahead may have ended already
  if (c_.in_transaction()) return fn();
  c_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  try {
    auto result = fn();
    c_.exec("COMMIT");
    return result;
  } catch (...) {
    if (!c_.lost()) {
      try {
        c_.exec("ROLLBACK");
      } catch (...) {
      }
    }
    throw;
  }
}

std::vector<ObjectRow> Reads::rows(const Result& r) {
  std::vector<ObjectRow> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_row(r, i, session_));
  return out;
}

std::int64_t Reads::head() { return run(c_, Q::head).i64(0, 0); }

std::optional<ObjectRow> Reads::get(ObjectID id, unsigned loads) {
  auto read = [&]() -> std::optional<ObjectRow> {
    auto r = run(c_, Q::get, Params().add(id));
    if (r.rows() == 0) return std::nullopt;
    auto row = read_row(r, 0, session_);
    if (loads) load({&row}, loads);
    return row;
  };
  return loads ? in_snapshot(read) : read();
}

std::optional<ObjectRow> Reads::get_by_slug(const GroupKind& gk, std::string_view slug,
                                            unsigned loads) {
  auto read = [&]() -> std::optional<ObjectRow> {
    auto r = run(c_, Q::get_by_slug, Params().add(gk.group).add(gk.kind).add(slug));
    if (r.rows() == 0) return std::nullopt;
    auto row = read_row(r, 0, session_);
    if (loads) load({&row}, loads);
    return row;
  };
  return loads ? in_snapshot(read) : read();
}

std::vector<ObjectRow> Reads::list(const GroupKind& gk, unsigned loads) {
  auto read = [&] {
    auto out = rows(run(c_, Q::list, Params().add(gk.group).add(gk.kind)));
    load_all(out, loads);
    return out;
  };
  return loads ? in_snapshot(read) : read();
}

void Reads::list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) {
  // In pages of ids, so that a large kind is never held whole as rows: one snapshot.
  in_snapshot([&] {
    static const std::string sql = select_objects_sql(
        R"(o."group" = $1 AND o.kind = $2 AND o.id > $3 ORDER BY o.id LIMIT 500)");
    ObjectID after = 0;
    for (;;) {
      auto r = c_.run("bh_list_page", sql, Params().add(gk.group).add(gk.kind).add(after));
      for (int i = 0; i < r.rows(); ++i) {
        auto row = read_row(r, i, session_);
        after = row.meta.id;
        each(std::move(row));
      }
      if (r.rows() < 500) return 0;
    }
  });
}

std::vector<std::pair<ObjectID, std::int64_t>> Reads::list_ids(const GroupKind& gk,
                                                               bool unsettled_only) {
  auto r = run(c_, unsettled_only ? Q::list_unsettled_ids : Q::list_ids,
               Params().add(gk.group).add(gk.kind));
  std::vector<std::pair<ObjectID, std::int64_t>> out;
  for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.i64(i, 0), r.i64(i, 1));
  return out;
}

std::vector<ObjectRow> Reads::snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                       const std::shared_ptr<const LabelSelector>& selector,
                                       std::int64_t& rv) {
  return in_snapshot([&] {
    rv = head();
    if (!id && selector && !selector->empty())
      return list_where(gk, ListQuery{0, 0, {}, selector}, 0);
    if (!id) return list(gk, 0);
    std::vector<ObjectRow> out;
    auto row = get(*id, 0);
    if (row && row->meta.group == gk.group && row->meta.kind == gk.kind)
      out.push_back(std::move(*row));
    return out;
  });
}

std::vector<Ref> Reads::related(ObjectID id, unsigned relation) {
  std::vector<Ref> out;
  if (relation == LoadOption::owner) {
    auto r = run(c_, Q::owner_of_one, Params().add(id));
    if (r.rows()) out.push_back(Ref{r.i64(0, 0), r.str(0, 1), r.str(0, 2)});
    return out;
  }
  Q q = relation == LoadOption::dependencies ? Q::dependencies_of
        : relation == LoadOption::dependents ? Q::dependents_of
                                             : Q::owned_by;
  auto r = run(c_, q, Params().add(id_array({id})));
  for (int i = 0; i < r.rows(); ++i) out.push_back(Ref{r.i64(i, 1), r.str(i, 2), r.str(i, 3)});
  return out;
}

bool Reads::has_incoming_refs(ObjectID id) {
  return run(c_, Q::has_incoming_refs, Params().add(id)).boolean(0, 0);
}

std::vector<ObjectRow> Reads::list_owned_objects(const GroupKind& gk, ObjectID owner,
                                                 unsigned loads) {
  auto read = [&] {
    auto out = rows(run(c_, Q::list_owned_objects, Params().add(gk.group).add(gk.kind).add(owner)));
    load_all(out, loads);
    return out;
  };
  return loads ? in_snapshot(read) : read();
}

void Reads::load_all(std::vector<ObjectRow>& rows, unsigned loads) {
  if (!loads || rows.empty()) return;
  std::vector<ObjectRow*> ptrs;
  ptrs.reserve(rows.size());
  for (auto& r : rows) ptrs.push_back(&r);
  load(std::move(ptrs), loads);
}

void Reads::load(std::vector<ObjectRow*> rows, unsigned loads) {
  std::vector<ObjectID> id_list;
  std::unordered_map<ObjectID, ObjectRow*> by_id;
  for (auto* r : rows) {
    id_list.push_back(r->meta.id);
    by_id[r->meta.id] = r;
  }
  Params ids;
  ids.add(id_array(id_list));
  auto edges = [&](Q q, auto&& each) {
    auto r = run(c_, q, ids);
    for (int i = 0; i < r.rows(); ++i)
      each(*by_id[r.i64(i, 0)], Ref{r.i64(i, 1), r.str(i, 2), r.str(i, 3)});
  };
  auto attach = [&](Q q, auto member) {
    for (auto* r : rows) (r->meta.relations.*member).emplace();
    edges(q, [&](ObjectRow& row, Ref&& ref) { (row.meta.relations.*member)->push_back(ref); });
  };
  if (loads & LoadOption::owner) {
    for (auto* r : rows) r->meta.relations.owner.emplace();
    edges(Q::owner_of, [](ObjectRow& row, Ref&& ref) { row.meta.relations.owner = ref; });
  }
  if (loads & LoadOption::dependencies) attach(Q::dependencies_of, &LoadedRelations::dependencies);
  if (loads & LoadOption::dependents) attach(Q::dependents_of, &LoadedRelations::dependents);
  if (loads & LoadOption::owned) attach(Q::owned_by, &LoadedRelations::owned);
  if (loads & LoadOption::events) {
    for (auto* r : rows) r->meta.relations.events.emplace();
    auto r = run(c_, Q::recent_events,
                 Params().add(id_array(id_list)).add(std::int64_t{recent_events_per_category}));
    for (int i = 0; i < r.rows(); ++i) {
      auto e = read_event(r, i).event;
      by_id[e.object_id]->meta.relations.events->push_back(std::move(e));
    }
  }
}

std::vector<event_run> Reads::query_events(ObjectID id, const detail::EventQuery& q) {
  Params p;
  p.add(id).add(q.category);
  if (q.type)
    p.add(to_string(*q.type));
  else
    p.add_null();
  p.add(q.reason);
  if (q.since)
    p.add(to_millis(*q.since));
  else
    p.add_null();
  if (q.limit)
    p.add(static_cast<std::int64_t>(*q.limit));
  else
    p.add_null();
  auto r = run(c_, Q::list_events, p);
  std::vector<event_run> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_event(r, i));
  return out;
}

std::vector<Event> Reads::list_events(ObjectID id, const detail::EventQuery& q) {
  std::vector<Event> out;
  for (auto& r : query_events(id, q)) out.push_back(std::move(r.event));
  return out;
}

std::vector<event_run> Reads::event_snapshot(ObjectID id, const detail::EventQuery& q,
                                             std::int64_t& rv) {
  return in_snapshot([&] {
    rv = head();
    auto runs = query_events(id, q);
    std::reverse(runs.begin(), runs.end());
    return runs;
  });
}

std::vector<event_run> Reads::event_runs_between(std::int64_t after, std::int64_t through) {
  auto r = run(c_, Q::event_runs_between, Params().add(after).add(through));
  std::vector<event_run> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_event(r, i));
  return out;
}

std::optional<Event> Reads::current_run(ObjectID id, const std::string& category) {
  auto r = run(c_, Q::current_run, Params().add(id).add(category));
  if (r.rows() == 0) return std::nullopt;
  return read_event(r, 0).event;
}

std::vector<ObjectRow> Reads::list_where(const GroupKind& gk, const ListQuery& q, unsigned loads) {
  std::string where = R"(o."group" = $1 AND o.kind = $2 AND o.id > $3)";
  Params p;
  p.add(gk.group).add(gk.kind).add(q.after);
  if (q.owner) {
    where += " AND o.id IN (SELECT from_id FROM refs WHERE to_id = $4 AND relation = 'owned_by')";
    p.add(*q.owner);
  }
  if (q.selector && !q.selector->empty()) {
    // EXISTS / NOT EXISTS: PostgreSQL plans them as semi- and anti-joins (or index
    // lookups per row under a LIMIT). A NOT IN subquery it never turns into an anti-join:
    // once the ids it lists outgrow work_mem, each row re-scans them.
    auto filter = to_correlated_sql(q.selector->requirements(), "o.id");
    where += " AND " + numbered(filter.where, static_cast<int>(p.size()) + 1);
    for (const auto& b : filter.binds) p.add(b);
  }
  where += " ORDER BY o.id";
  if (q.limit > 0) where += " LIMIT " + std::to_string(q.limit);
  auto read = [&] {
    // Built at run time: run unprepared (selector shapes vary without bound).
    auto out = rows(c_.run("", select_objects_sql(where), p));
    load_all(out, loads);
    return out;
  };
  return loads ? in_snapshot(read) : read();
}

ChangeLogRead Reads::changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                                   std::optional<ObjectID> id,
                                   const std::vector<std::int64_t>& skip) {
  // One statement, hence one snapshot and one round trip: the store's version and the
  // horizon, each log entry above `rv` (but those in `skip`: an anti-join, linear in
  // both, where `<> ALL` compared every entry with every skipped version, 9 s for a block
  // of 40 000 writes), and with each object's
  // latest entry the object as it stands now and its owner (the commit record wants
  // it). Only the latest: an object written a thousand times since `rv` comes once, not
  // a thousand times, in the result held in memory. The object and the owner are looked
  // up per entry (LATERAL, kept apart by OFFSET 0): the generic plan of a prepared
  // statement guesses a third of the log above `rv` and would otherwise join by scanning
  // objects.
  static const std::string sql =
      R"sql(SELECT m.head, m.horizon, l.resource_version, l.object_id, l."group", l.kind, l.parts,
             l.final_body, ow.id, ow."group", ow.kind, )sql" +
      object_columns_sql() +
      R"sql( FROM (SELECT (SELECT value FROM beehive_meta WHERE key = 'resource_version') AS head,
                     (SELECT value FROM beehive_meta WHERE key = 'change_log_horizon') AS horizon)
             AS m
           LEFT JOIN (SELECT c.*, c.resource_version = max(c.resource_version)
                                OVER (PARTITION BY c.object_id) AS latest
                        FROM change_log AS c
                       WHERE c.resource_version > $1
                         AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[]) AS own(v)
                                          WHERE own.v = c.resource_version)
                         AND ($3::text IS NULL OR (c."group" = $3 AND c.kind = $4::text))
                         AND ($5::bigint IS NULL OR c.object_id = $5))
             AS l ON true
           LEFT JOIN LATERAL (SELECT * FROM objects WHERE l.latest AND id = l.object_id OFFSET 0)
             AS o ON true
           LEFT JOIN LATERAL (SELECT ow.id, ow."group", ow.kind FROM refs AS r
                                JOIN objects AS ow ON ow.id = r.to_id
                               WHERE l.latest AND r.from_id = l.object_id
                                 AND r.relation = 'owned_by'
                              OFFSET 0) AS ow ON true
           ORDER BY l.resource_version)sql";
  constexpr int object_at = 11;
  if (faults::fail_change_log_reads) {
    ++faults::change_log_reads_failed;
    throw Error(errc::store, "postgres: connection lost (injected before a change-log read)");
  }
  // With a generic plan: the plan cache would plan the statement afresh on every run
  // (its generic plan looks costly for the same guess), which costs more than running
  // it (0.2 ms against 0.03). One round trip; a failure rolls the SET back with it.
  std::vector<Statement> s;
  s.push_back({"bh_generic_plans", "SET plan_cache_mode = force_generic_plan", {}});
  // Only the kind's, or the object's, entries: a resumed watch of one kind reads no other
  // kind's bodies.
  Params p;
  p.add(rv).add(id_array(skip));
  p.add(gk ? std::optional<std::string>(gk->group) : std::nullopt);
  p.add(gk ? std::optional<std::string>(gk->kind) : std::nullopt);
  p.add(id ? std::optional<std::int64_t>(*id) : std::nullopt);
  s.push_back({"bh_changes_since", sql, std::move(p)});
  s.push_back({"bh_default_plans", "RESET plan_cache_mode", {}});
  auto r = std::move(c_.pipeline(std::move(s))[1]);
  ChangeLogRead out;
  out.head = r.rows() ? r.i64(0, 0) : 0;
  out.horizon = r.rows() ? r.i64(0, 1) : 0;
  std::unordered_map<ObjectID, std::size_t> at;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.null(i, 2)) continue;  // no entry: the head and horizon alone
    ObjectID oid = r.i64(i, 3);
    auto version = r.i64(i, 2);
    auto group = r.text(i, 4), kind = r.text(i, 5);
    auto [it, fresh] = at.try_emplace(oid, out.changes.size());
    auto& c = fresh ? out.changes.emplace_back() : out.changes[it->second];
    if (fresh) {
      c.ref = Ref{oid, std::string(group), std::string(kind)};
      c.first_version = version;
    }
    c.resource_version = version;
    c.parts |= static_cast<unsigned>(r.i64(i, 6));
    // The object and its owner come with its latest entry, the last of its entries here.
    c.owner_read = true;
    c.owner.reset();
    if (!r.null(i, 8)) c.owner = Ref{r.i64(i, 8), r.str(i, 9), r.str(i, 10)};
    if (!r.null(i, 7)) {  // a removal, with the final body
      c.type = ChangeType::Deleted;
      c.row = row_from_json(r.text(i, 7));
    } else if (c.type != ChangeType::Deleted && (c.parts & kObjectParts) != 0) {
      c.row.reset();
      if (!r.null(i, object_at)) c.row = read_object_row(r, i, session_, object_at);
    }
  }
  for (auto& c : out.changes)
    if (c.type != ChangeType::Deleted && (c.parts & object_change::created))
      c.type = ChangeType::Added;
  std::sort(out.changes.begin(), out.changes.end(),
            [](auto& a, auto& b) { return a.resource_version < b.resource_version; });
  return out;
}

}  // namespace beehive::store::pg
