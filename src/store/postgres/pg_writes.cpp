// The PostgreSQL writer's statements: objects, edges, conditions, labels, the change
// log, events, and the garbage collector's queries and removals. Each mirrors the
// SQLite writer's (sqlite_object_writes.cpp, sqlite_event_writes.cpp).
//
// Runs on the thread running the writer, inside its open transaction; not thread-safe.

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "store/postgres/pg_queries.hpp"
#include "store/postgres/pg_writer.hpp"
#include "store/row_json.hpp"

namespace beehive::store::pg {

void PgWriter::insert_object(const ObjectRow& row, std::optional<ObjectID> owner) {
  Params p;
  p.add(row.meta.id).add(row.meta.group).add(row.meta.kind).add(row.meta.slug).add(row.spec);
  p.add(std::int64_t{row.spec_version}).add(row.meta.resource_version);
  p.add(nlohmann::json(row.meta.finalizers).dump()).add(to_millis(row.meta.created_at));
  if (row.meta.labels.empty())
    p.add_null();
  else
    p.add(nlohmann::json(row.meta.labels).dump());
  owners_.erase(row.meta.id);
  later(Q::insert_object, std::move(p));
  if (owner) later(Q::add_ref, Params().add(row.meta.id).add("owned_by").add(*owner));
  if (!row.meta.labels.empty()) insert_labels(row.meta.id, row.meta.labels);
}

void PgWriter::insert_labels(ObjectID id, const Labels& labels) {
  for (const auto& [key, value] : labels)
    later(Q::insert_label, Params().add(id).add(key).add(value));
}

void PgWriter::set_labels(ObjectID id, const Labels& labels, std::int64_t rv, Time now) {
  Params p;
  p.add(id);
  if (labels.empty())
    p.add_null();
  else
    p.add(nlohmann::json(labels).dump());
  p.add(rv).add(to_millis(now));
  later(Q::set_labels, std::move(p));
  later(Q::delete_labels, Params().add(id));
  insert_labels(id, labels);
}

void PgWriter::log_change(std::int64_t rv, const ObjectMeta& meta, unsigned parts, Time at,
                          const ObjectRow* final_body) {
  Params p;
  p.add(rv).add(meta.id).add(meta.group).add(meta.kind).add(static_cast<std::int64_t>(parts));
  p.add(to_millis(at));
  if (final_body)
    p.add(row_to_json(*final_body));
  else
    p.add_null();
  // With the write's own statement, when it was the last queued: the log has no foreign
  // keys, so neither depends on the other.
  if (join_last(Q::log_change, p)) return;
  later(Q::log_change, std::move(p));
}

std::optional<std::int64_t> PgWriter::change_log_cut(std::int64_t keep_entries, Time older_than,
                                                     std::int64_t at_most,
                                                     std::optional<Time>* first_young_at) {
  auto r = run(conn_, Q::change_log_first_young, Params().add(to_millis(older_than)));
  if (r.rows() == 0 || r.null(0, 0)) return std::nullopt;  // an empty log
  auto oldest = r.i64(0, 0);
  auto first_young = r.opt_i64(0, 2);
  if (first_young_at && first_young) *first_young_at = from_millis(r.i64(0, 3));
  if (first_young && *first_young == oldest) return std::nullopt;  // nothing old enough
  std::int64_t cut = first_young ? *first_young - 1 : r.i64(0, 1);
  if (keep_entries > 0) {
    auto n = run(conn_, Q::change_log_nth_newest, Params().add(keep_entries));
    if (n.rows() == 0) return std::nullopt;  // fewer entries than that
    cut = std::min(cut, n.i64(0, 0) - 1);
  }
  cut = std::min(cut, at_most);
  if (cut < oldest) return std::nullopt;
  return cut;
}

int PgWriter::trim_change_log(std::int64_t cut) {
  int removed = write_now(Q::trim_change_log, Params().add(cut)).affected();
  write_now(Q::set_change_log_horizon, Params().add(cut));
  return removed;
}

std::optional<std::int64_t> PgWriter::change_log_nth_oldest(std::int64_t n) {
  auto r = run(conn_, Q::change_log_nth_oldest, Params().add(n));
  if (r.rows() == 0) return std::nullopt;
  return r.i64(0, 0);
}

std::optional<std::pair<std::int64_t, Time>> PgWriter::newest_change_log_entry() {
  auto r = run(conn_, Q::change_log_newest, Params());
  if (r.rows() == 0) return std::nullopt;
  return std::pair{r.i64(0, 0), from_millis(r.i64(0, 1))};
}

void PgWriter::lower_change_log_times(std::int64_t up_to, Time at) {
  write_now(Q::lower_change_log_times, Params().add(up_to).add(to_millis(at)));
}

bool PgWriter::add_ref(ObjectID from, const char* relation, ObjectID to) {
  owners_.erase(from);
  return write_now(Q::add_ref, Params().add(from).add(relation).add(to)).affected() > 0;
}

bool PgWriter::remove_ref(ObjectID from, const char* relation, ObjectID to) {
  owners_.erase(from);
  return write_now(Q::remove_ref, Params().add(from).add(relation).add(to)).affected() > 0;
}

std::optional<bool> PgWriter::being_deleted(ObjectID id) {
  auto r = run(conn_, Q::object_being_deleted, Params().add(id));
  if (r.rows() == 0) return std::nullopt;
  return r.boolean(0, 0);
}

std::vector<ObjectID> PgWriter::cascade_candidates(std::int64_t limit) {
  return ids(Q::cascade_candidates, limit);
}

std::vector<ObjectID> PgWriter::collectible(std::int64_t limit) {
  return ids(Q::collectible, limit);
}

void PgWriter::drop_pending_dependencies(ObjectID target) {
  later(Q::drop_pending_dependencies, Params().add(target));
}

void PgWriter::delete_object(ObjectID id) {
  owners_.erase(id);
  later(Q::delete_object, Params().add(id));
}

void PgWriter::update_spec(ObjectID id, const std::string& spec, int spec_version,
                           std::int64_t generation, std::int64_t rv, Time now) {
  later(Q::update_spec, Params()
                            .add(id)
                            .add(spec)
                            .add(std::int64_t{spec_version})
                            .add(generation)
                            .add(rv)
                            .add(to_millis(now)));
}

void PgWriter::request_deletion(ObjectID id, Time at, std::int64_t rv) {
  later(Q::request_deletion, Params().add(id).add(to_millis(at)).add(rv));
}

void PgWriter::update_status(ObjectID id, const std::optional<std::string>& status,
                             int status_version, std::optional<std::int64_t> observed_generation,
                             std::optional<Time> observed_at, std::int64_t rv, Time now) {
  Params p;
  p.add(id).add(status).add(std::int64_t{status_version}).add(observed_generation);
  if (observed_at)
    p.add(to_millis(*observed_at));
  else
    p.add_null();
  p.add(rv).add(to_millis(now));
  later(Q::update_status, std::move(p));
}

void PgWriter::upsert_condition(ObjectID id, const Condition& c, Time now) {
  later(Q::upsert_condition, Params()
                                 .add(id)
                                 .add(c.type)
                                 .add(to_string(c.status))
                                 .add(c.reason)
                                 .add(c.message)
                                 .add(std::int64_t{c.liveness ? 1 : 0})
                                 .add(session_)
                                 .add(to_millis(now))
                                 .add(static_cast<std::int64_t>(c.observed_generation)));
}

bool PgWriter::delete_condition(ObjectID id, const std::string& type) {
  return write_now(Q::delete_condition, Params().add(id).add(type)).affected() > 0;
}

void PgWriter::set_finalizers(ObjectID id, const std::vector<std::string>& finalizers,
                              std::int64_t rv, Time now) {
  later(Q::set_finalizers,
        Params().add(id).add(nlohmann::json(finalizers).dump()).add(rv).add(to_millis(now)));
}

void PgWriter::conditions_changed(ObjectID id, std::int64_t rv, Time now) {
  later(Q::conditions_changed, Params().add(id).add(rv).add(to_millis(now)));
}

EventID PgWriter::insert_event(ObjectID id, const EventSpec& e,
                               const std::optional<std::string>& detail, Time now,
                               std::int64_t rv) {
  auto r = write_now(Q::insert_event, Params()
                                          .add(id)
                                          .add(e.category)
                                          .add(to_string(e.type))
                                          .add(e.reason)
                                          .add(e.message)
                                          .add(detail)
                                          .add(to_millis(now))
                                          .add(rv));
  return r.i64(0, 0);
}

void PgWriter::extend_event(EventID id, const std::string& message,
                            const std::optional<std::string>& detail, Time now, std::int64_t rv) {
  later(Q::extend_event, Params().add(id).add(message).add(detail).add(to_millis(now)).add(rv));
}

std::int64_t PgWriter::events_high_water() { return run(conn_, Q::events_high_water).i64(0, 0); }

namespace {

std::vector<GroupKind> kinds_of(const Result& r) {
  std::vector<GroupKind> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back({r.str(i, 0), r.str(i, 1)});
  return out;
}

}  // namespace

std::optional<std::int64_t> PgWriter::event_page_end(EventPaging by, std::int64_t after, int runs) {
  auto r =
      run(conn_, by == EventPaging::by_object ? Q::event_page_end : Q::event_page_end_by_version,
          Params().add(after).add(std::int64_t{runs}));
  if (r.rows() == 0) return std::nullopt;
  return r.i64(0, 0);
}

std::vector<GroupKind> PgWriter::kinds_with_runs_in(EventPaging by, std::int64_t after,
                                                    std::int64_t upto) {
  return kinds_of(run(
      conn_, by == EventPaging::by_object ? Q::kinds_with_runs_in : Q::kinds_with_runs_in_versions,
      Params().add(after).add(upto)));
}

std::vector<GroupKind> PgWriter::kinds_with_runs_before(Time before) {
  return kinds_of(run(conn_, Q::kinds_with_runs_before, Params().add(to_millis(before))));
}

int PgWriter::trim_event_runs(const GroupKind& gk, int per_object, EventPaging by,
                              std::int64_t after, std::int64_t upto) {
  Params p;
  p.add(gk.group).add(gk.kind).add(std::int64_t{per_object}).add(after).add(upto);
  return write_now(
             by == EventPaging::by_object ? Q::trim_event_runs : Q::trim_event_runs_in_versions, p)
      .affected();
}

std::optional<Time> PgWriter::old_events_page_end(const GroupKind& gk, Time after, Time before,
                                                  int runs) {
  Params p;
  p.add(gk.group).add(gk.kind).add(to_millis(after)).add(to_millis(before)).add(std::int64_t{runs});
  auto r = run(conn_, Q::old_events_page_end, p);
  if (r.rows() == 0) return std::nullopt;
  return from_millis(r.i64(0, 0));
}

int PgWriter::trim_old_events(const GroupKind& gk, Time after, std::optional<Time> through,
                              Time before) {
  Params p;
  p.add(gk.group).add(gk.kind).add(to_millis(after));
  p.add(through ? to_millis(*through) : std::numeric_limits<std::int64_t>::max());
  p.add(to_millis(before));
  return write_now(Q::trim_old_events, p).affected();
}

}  // namespace beehive::store::pg
