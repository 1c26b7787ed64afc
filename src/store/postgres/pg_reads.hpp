#pragma once

// The Reader interface over a PostgreSQL connection: the pooled reader connections
// (PgReader) and, through the same template, the write connection (PgWriter, whose
// reads see its own open transaction). Reads of several statements run in one
// REPEATABLE READ snapshot, so that they see one committed state.
//
// Not thread-safe, like its connection: used by the one thread holding it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <beehive/errors.hpp>

#include "store/backend.hpp"
#include "store/postgres/pg_connection.hpp"

namespace beehive::store::pg {

/// An object row as the object reads select it (select_objects_sql's columns); liveness
/// conditions of another session than `session` read as Unknown.
/// `first`: the column the object's columns start at.
ObjectRow read_object_row(const Result& r, int row, std::int64_t session, int first = 0);

/// The reads, on a connection someone else owns.
class Reads {
 public:
  Reads(Connection& c, std::int64_t session) : c_(c), session_(session) {}

  std::optional<ObjectRow> get(ObjectID id, unsigned loads);
  std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug, unsigned loads);
  std::vector<ObjectRow> list(const GroupKind& gk, unsigned loads);
  void list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each);
  std::vector<ObjectRow> snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                  const std::shared_ptr<const LabelSelector>& selector,
                                  std::int64_t& rv);
  std::vector<Ref> related(ObjectID id, unsigned relation);
  bool has_incoming_refs(ObjectID id);
  std::vector<ObjectRow> list_owned_objects(const GroupKind& gk, ObjectID owner, unsigned loads);
  std::vector<Event> list_events(ObjectID id, const detail::EventQuery& q);
  std::optional<Event> current_run(ObjectID id, const std::string& category);
  std::vector<event_run> event_snapshot(ObjectID id, const detail::EventQuery& q, std::int64_t& rv);
  std::vector<event_run> event_runs_between(std::int64_t after, std::int64_t through);
  std::vector<std::pair<ObjectID, std::int64_t>> list_ids(const GroupKind& gk, bool unsettled_only);
  std::vector<ObjectRow> list_where(const GroupKind& gk, const ListQuery& q, unsigned loads);
  ChangeLogRead changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                              std::optional<ObjectID> id, const std::vector<std::int64_t>& skip);

 private:
  /// Runs `fn` in one read snapshot (unless already inside the writer's transaction).
  template <class Fn>
  auto in_snapshot(Fn&& fn) -> decltype(fn());
  std::vector<ObjectRow> rows(const Result& r);
  void load(std::vector<ObjectRow*> rows, unsigned loads);
  void load_all(std::vector<ObjectRow>& rows, unsigned loads);
  std::vector<event_run> query_events(ObjectID id, const detail::EventQuery& q);
  std::int64_t head();

  Connection& c_;
  std::int64_t session_;
};

/// Reader (or Writer) operations on a connection of its own.
template <class Interface>
class Reading : public Interface {
 public:
  /// `keep_waiting`: asked while connecting (see Connection::set_keep_waiting).
  Reading(std::string conninfo, std::string schema, std::chrono::milliseconds timeout,
          std::int64_t session, std::chrono::milliseconds stall_limit = {},
          std::function<bool()> keep_waiting = {})
      : conn_(std::move(conninfo), std::move(schema), timeout, stall_limit,
              std::move(keep_waiting)),
        reads_(conn_, session) {}

  std::optional<ObjectRow> get(ObjectID id, unsigned loads) override {
    return again_if_dropped([&] { return reads_.get(id, loads); });
  }
  std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug,
                                       unsigned loads) override {
    return again_if_dropped([&] { return reads_.get_by_slug(gk, slug, loads); });
  }
  std::vector<ObjectRow> list(const GroupKind& gk, unsigned loads) override {
    return again_if_dropped([&] { return reads_.list(gk, loads); });
  }
  void list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) override {
    bool handed = false;  // rows already handed out are not handed out again
    again_if_dropped(
        [&] {
          reads_.list_each(gk, [&](ObjectRow&& row) {
            handed = true;
            each(std::move(row));
          });
        },
        &handed);
  }
  std::vector<ObjectRow> snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                  const std::shared_ptr<const LabelSelector>& selector,
                                  std::int64_t& rv) override {
    return again_if_dropped([&] { return reads_.snapshot(gk, id, selector, rv); });
  }
  std::vector<Ref> related(ObjectID id, unsigned relation) override {
    return again_if_dropped([&] { return reads_.related(id, relation); });
  }
  bool has_incoming_refs(ObjectID id) override {
    return again_if_dropped([&] { return reads_.has_incoming_refs(id); });
  }
  std::vector<ObjectRow> list_owned_objects(const GroupKind& gk, ObjectID owner,
                                            unsigned loads) override {
    return again_if_dropped([&] { return reads_.list_owned_objects(gk, owner, loads); });
  }
  std::vector<Event> list_events(ObjectID id, const detail::EventQuery& q) override {
    return again_if_dropped([&] { return reads_.list_events(id, q); });
  }
  std::optional<Event> current_run(ObjectID id, const std::string& category) override {
    return again_if_dropped([&] { return reads_.current_run(id, category); });
  }
  std::vector<event_run> event_snapshot(ObjectID id, const detail::EventQuery& q,
                                        std::int64_t& rv) override {
    return again_if_dropped([&] { return reads_.event_snapshot(id, q, rv); });
  }
  std::vector<std::pair<ObjectID, std::int64_t>> list_ids(const GroupKind& gk,
                                                          bool unsettled_only) override {
    return again_if_dropped([&] { return reads_.list_ids(gk, unsettled_only); });
  }
  std::vector<ObjectRow> list_where(const GroupKind& gk, const ListQuery& q,
                                    unsigned loads) override {
    return again_if_dropped([&] { return reads_.list_where(gk, q, loads); });
  }
  ChangeLogRead changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                              std::optional<ObjectID> id,
                              const std::vector<std::int64_t>& skip) override {
    return again_if_dropped([&] { return reads_.changes_since(rv, gk, id, skip); });
  }
  std::vector<event_run> event_runs_between(std::int64_t after, std::int64_t through) override {
    return again_if_dropped([&] { return reads_.event_runs_between(after, through); });
  }

  /// The connection was lost: the pool closes it rather than lending it again.
  bool failed() const { return conn_.lost(); }
  /// See Connection::set_keep_waiting: a reader whose caller gave up cuts its connection.
  void wait_while(std::function<bool()> keep_waiting) {
    conn_.set_keep_waiting(std::move(keep_waiting));
  }
  /// Round trips to the server so far (tests check how many a write costs).
  std::uint64_t round_trips() const { return conn_.round_trips(); }

 protected:
  /// Runs the read `fn` once more on a new session when the server ended the idle one as
  /// it was sent (an idle_session_timeout, an operator's pg_terminate_backend, a restart):
  /// a goodbye that had not arrived yet when the call looked (Connection::ensure). A
  /// read inside the writer's transaction is not: the transaction went with the session.
  /// Nor one whose caller gave up (which cuts the connection), nor one that already
  /// handed something out (`*handed`), nor one that made its session itself (a server
  /// out of reach: another connect would only double the wait).
  template <class Fn>
  auto again_if_dropped(Fn&& fn, const bool* handed = nullptr) -> decltype(fn()) {
    const bool idle = !conn_.in_transaction() && !conn_.lost();
    const auto connects = conn_.connects();
    try {
      return fn();
    } catch (const Error&) {
      if (!idle || !conn_.lost() || conn_.connects() != connects || !conn_.caller_waits() ||
          (handed && *handed))
        throw;
    }
    return fn();
  }

  Connection conn_;
  Reads reads_;
};

using PgReader = Reading<Reader>;

}  // namespace beehive::store::pg
