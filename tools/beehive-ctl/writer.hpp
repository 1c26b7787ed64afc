#pragma once

// A beehive database opened for writing, for apply, delete, label and requeue: a Beehive
// over the file (or PostgreSQL schema) that is never started, so that writes go through the
// library's own checks, transactions and change log exactly as an application's do, while no
// controller, timer or GC runs here. A beehive running in another process on the same
// store sees each commit in the change log (its foreign-commit poll) and reacts as to its
// own: watches get the change, the kind's controller the wake.
//
// Kinds and objects are named through a read-only Database beside it (selector.hpp), so
// that writes resolve names exactly as reads do.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include <beehive/beehive.hpp>

#include "database.hpp"

namespace beehive::ctl {

/// The typed client of the write commands: specs and statuses as plain JSON.
using JsonClient = Client<nlohmann::json, nlohmann::json>;

class WriteSession {
 public:
  /// Throws NotFound for a missing store: a typo in --db (or --schema) must not create
  /// a database.
  explicit WriteSession(const Location& where);
  ~WriteSession();
  WriteSession(const WriteSession&) = delete;
  WriteSession& operator=(const WriteSession&) = delete;

  /// Reads, and resolves names; sees every commit of this session once it returns.
  Database& db() { return *db_; }
  JsonClient client(const GroupKind& gk) const { return JsonClient(*bh_, gk); }
  /// Records a requeue of the object in the change log (log_requeue_request): the kind's
  /// controller, in whichever process runs it, reconciles the object (first forgetting
  /// its retry backoff, with `reset_backoff`). Throws not_found.
  void log_requeue(const GroupKind& gk, ObjectID id, bool reset_backoff);
  const Context& context() const { return ctx_; }
  /// Runs `fn` in one transaction (Beehive's `within`): the writes made with the context
  /// it is given commit together, or not at all when it throws.
  void within(const std::function<void(const Context&)>& fn);
  /// Creates the object of `slug` with `spec` and `labels`, or updates its spec, the
  /// spec stamped with `spec_version` whatever the kind's migrator (this process has
  /// none): apply's write, with `tx` from `within`. Returns the row as written.
  ObjectRow create_or_update(const Context& tx, const GroupKind& gk, const std::string& slug,
                             const nlohmann::json& spec, int spec_version, const Labels& labels);
  /// Replaces the object's labels (with `tx` from `within`).
  ObjectRow set_labels(const Context& tx, const GroupKind& gk, ObjectID id, const Labels& labels);

 private:
  std::shared_ptr<Store> store_;
  std::unique_ptr<Beehive> bh_;
  std::unique_ptr<Database> db_;
  Context ctx_;
  std::chrono::milliseconds timeout_;
};

}  // namespace beehive::ctl
