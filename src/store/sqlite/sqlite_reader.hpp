#pragma once

// The Reader interface over a SQLite Connection: the pooled read-only connections
// (SqliteReader) and, through the same template, the write connection (SqliteWriter,
// whose reads see its own open transaction).
//
// Not thread-safe, like its connection: a SqliteReader is used by the one caller's
// thread that leased it from SqliteStore's pool; the writer by the thread running it.

#include <filesystem>

#include <beehive/errors.hpp>
#include <beehive/sqlite.hpp>

#include "store/backend.hpp"
#include "store/sqlite/sqlite_connection.hpp"

namespace beehive::store {

/// Shared by SqliteReader and SqliteWriter.
template <class Interface>
class ConnectionReader : public Interface {
 public:
  ConnectionReader(const std::filesystem::path& file, bool read_only, const sqlite::Options& opts,
                   std::int64_t session, bool immutable = false)
      : conn_(file, read_only, opts, session, immutable) {}

  std::optional<ObjectRow> get(ObjectID id, unsigned loads) override {
    return watched([&] { return conn_.get(id, loads); });
  }
  std::optional<ObjectRow> get_by_slug(const GroupKind& gk, std::string_view slug,
                                       unsigned loads) override {
    return watched([&] { return conn_.get_by_slug(gk, slug, loads); });
  }
  std::vector<ObjectRow> list(const GroupKind& gk, unsigned loads) override {
    return watched([&] { return conn_.list(gk, loads); });
  }
  void list_each(const GroupKind& gk, const std::function<void(ObjectRow&&)>& each) override {
    watched([&] { conn_.list_each(gk, each); });
  }
  std::vector<ObjectRow> snapshot(const GroupKind& gk, std::optional<ObjectID> id,
                                  const std::shared_ptr<const LabelSelector>& selector,
                                  std::int64_t& rv) override {
    return watched([&] { return conn_.snapshot(gk, id, selector, rv); });
  }
  std::vector<Ref> related(ObjectID id, unsigned relation) override {
    return watched([&] { return conn_.related(id, relation); });
  }
  std::vector<Event> list_events(ObjectID id, const detail::EventQuery& q) override {
    return watched([&] { return conn_.list_events(id, q); });
  }
  std::vector<event_run> event_snapshot(ObjectID id, const detail::EventQuery& q,
                                        std::int64_t& rv) override {
    return watched([&] { return conn_.event_snapshot(id, q, rv); });
  }
  std::optional<Event> current_run(ObjectID id, const std::string& category) override {
    return watched([&] { return conn_.current_run(id, category); });
  }
  bool has_incoming_refs(ObjectID id) override {
    return watched([&] { return conn_.has_incoming_refs(id); });
  }
  std::vector<ObjectRow> list_owned_objects(const GroupKind& gk, ObjectID owner,
                                            unsigned loads) override {
    return watched([&] { return conn_.list_owned_objects(gk, owner, loads); });
  }
  std::vector<std::pair<ObjectID, std::int64_t>> list_ids(const GroupKind& gk,
                                                          bool unsettled_only) override {
    return watched([&] { return conn_.list_ids(gk, unsettled_only); });
  }

  std::vector<ObjectRow> list_where(const GroupKind& gk, const ListQuery& q,
                                    unsigned loads) override {
    return watched([&] { return conn_.list_where(gk, q, loads); });
  }
  ChangeLogRead changes_since(std::int64_t rv, const std::optional<GroupKind>& gk,
                              std::optional<ObjectID> id,
                              const std::vector<std::int64_t>& skip) override {
    return watched([&] { return conn_.changes_since(rv, gk, id, skip); });
  }
  std::vector<event_run> event_runs_between(std::int64_t after, std::int64_t through) override {
    return watched([&] { return conn_.event_runs_between(after, through); });
  }

  /// A store failure seen on this connection (its file may have gone bad).
  bool failed() const { return failed_; }

 protected:
  /// Runs a read, remembering a store failure: the pool replaces such a connection
  /// instead of handing it out again.
  template <class Fn>
  auto watched(Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const Error& e) {
      if (e.value() == errc::store) failed_ = true;
      throw;
    }
  }

  Connection conn_;
  bool failed_ = false;
};

class SqliteReader : public ConnectionReader<Reader> {
 public:
  /// `immutable`: see Connection.
  SqliteReader(const std::filesystem::path& file, const sqlite::Options& opts, std::int64_t session,
               bool immutable = false)
      : ConnectionReader(file, true, opts, session, immutable) {}
};

}  // namespace beehive::store
