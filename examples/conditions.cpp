// Conditions, liveness, and a dependency wake across two kinds.
//
// A Database has two conditions, both set by its controller:
//   * `Ready`     a durable condition: store truth, it survives restarts;
//   * `Connected` a liveness condition: it describes a connection that exists only in this
//                 process, so after the store is reopened it reads `Unknown` until a
//                 controller confirms it again.
//
// An App depends on a Database (`add_dependency`). When the database's conditions change,
// beehive reconciles the app again: the app's controller never polls and never calls the
// database's controller. The app kind even has resync disabled, so the only thing that can
// wake it is the dependency.
//
// The database is ./var/conditions.db, recreated on every run.

#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <beehive/beehive.hpp>

using namespace std::chrono_literals;
using beehive::Condition;
using beehive::ConditionStatus;

const beehive::GroupKind database_kind{"example.com", "Database"};
const beehive::GroupKind app_kind{"example.com", "App"};

struct DatabaseSpec {
  bool online = false;  // stands in for "the database server is up"
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DatabaseSpec, online)

struct AppSpec {
  std::string database;  // slug of the Database the app needs
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AppSpec, database)

struct Empty {};

using Databases = beehive::Client<DatabaseSpec, Empty>;
using Apps = beehive::Client<AppSpec, Empty>;

void say(const std::string& line) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::cout << line << std::endl;
}

std::optional<Condition> find(const std::vector<Condition>& conditions, const std::string& type) {
  for (const auto& c : conditions)
    if (c.type == type) return c;
  return std::nullopt;
}

std::string show(const std::vector<Condition>& conditions) {
  std::string out;
  for (const auto& c : conditions)
    out += " " + c.type + "=" + beehive::to_string(c.status) + "(" + c.reason + ")" +
           (c.liveness ? "[liveness]" : "");
  return out.empty() ? " (none)" : out;
}

// --- controllers ------------------------------------------------------------------------

beehive::Result reconcile_database(const beehive::Context& ctx,
                                   beehive::ControllerClient<Empty>& client,
                                   const beehive::Object<DatabaseSpec, Empty>& db) {
  // Pretend to dial the database: this process now holds a live connection to it.
  Condition connected{"Connected", ConditionStatus::True, "Dialed", "pool of 4"};
  connected.liveness = true;
  client.set_condition(ctx, db.id, connected);
  // Durable store truth: is the database serving?
  client.set_condition(
      ctx, db.id,
      db.spec.online ? Condition{"Ready", ConditionStatus::True, "Online", "accepting queries"}
                     : Condition{"Ready", ConditionStatus::False, "Starting", "not serving"});
  client.update_status(ctx, db.id, db.generation, Empty{});
  return {};
}

// The app controller reads databases through a Client of that kind, made from the Beehive
// (clients are cheap handles; the Beehive outlives every reconcile).
std::function<beehive::Result(const beehive::Context&, beehive::ControllerClient<Empty>&,
                              const beehive::Object<AppSpec, Empty>&)>
app_controller(const beehive::Beehive& bh) {
  return [&bh](const beehive::Context& ctx, beehive::ControllerClient<Empty>& client,
               const beehive::Object<AppSpec, Empty>& app) {
    auto db = Databases(bh, database_kind).get_by_slug(ctx, app.spec.database);
    // Declare the edge (repeating it writes nothing): from now on a change of the database's
    // conditions requeues this app.
    client.add_dependency(ctx, app.id, db.id);
    auto ready = find(db.conditions, "Ready");
    bool ok = ready && ready->status == ConditionStatus::True;
    say("  [app controller] reconciling app #" + std::to_string(app.id) +
        ": database Ready=" + (ready ? beehive::to_string(ready->status) : "absent"));
    client.set_condition(ctx, app.id,
                         ok ? Condition{"DatabaseReady", ConditionStatus::True, "Ready", ""}
                            : Condition{"DatabaseReady", ConditionStatus::False, "Waiting",
                                        "database " + app.spec.database + " is not ready"});
    client.update_status(ctx, app.id, app.generation, Empty{});
    return beehive::Result{};
  };
}

// --- helpers ----------------------------------------------------------------------------

// Waits, through a watch, until `pred` holds for object `id` (bounded by 5 s).
template <class Spec, class Status, class Pred>
beehive::Object<Spec, Status> wait_for(const beehive::Client<Spec, Status>& client,
                                       beehive::ObjectID id, Pred pred, const std::string& what) {
  auto changes = client.watch(beehive::Context{}.with_timeout(5s), id);
  while (auto change = changes.next())
    if (pred(change->object)) return change->object;
  throw std::runtime_error("timed out waiting for " + what);
}

bool has(const std::vector<Condition>& conditions, const std::string& type, ConditionStatus s) {
  auto c = find(conditions, type);
  return c && c->status == s;
}

// --- main -------------------------------------------------------------------------------

int run() {
  const std::filesystem::path file = "var/conditions.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix);
  beehive::Context ctx;
  beehive::ObjectID db_id = 0;

  {
    say("== first process: a dependency wake");
    auto store = beehive::sqlite::open(file);
    beehive::Beehive bh(store);
    Databases databases(bh, database_kind);
    Apps apps(bh, app_kind);
    beehive::register_controller<DatabaseSpec, Empty>(bh, database_kind, reconcile_database);
    beehive::register_controller<AppSpec, Empty>(bh, app_kind, app_controller(bh),
                                                 beehive::with_resync_interval(0ms));
    auto stop = bh.start(ctx);

    auto db = databases.create(ctx, {/*online=*/false}, beehive::with_slug("orders-db"));
    db_id = db.id;
    auto app = apps.create(ctx, {"orders-db"}, beehive::with_slug("orders"));

    auto waiting = wait_for(
        apps, app.id,
        [](const auto& a) { return has(a.conditions, "DatabaseReady", ConditionStatus::False); },
        "the app to wait for its database");
    say("app:     " + show(waiting.conditions));
    say("app depends on database #" + std::to_string(apps.list_dependencies(ctx, app.id).at(0).id) +
        "; the database has " + std::to_string(databases.list_dependents(ctx, db.id).size()) +
        " dependent(s)");

    // The database comes online. Its controller flips Ready; that condition change is what
    // requeues the app.
    say("bringing the database online");
    databases.update(ctx, db.id, {/*online=*/true});
    auto ready = wait_for(
        apps, app.id,
        [](const auto& a) { return has(a.conditions, "DatabaseReady", ConditionStatus::True); },
        "the app to see its database ready");
    say("app:     " + show(ready.conditions));
    say("database:" + show(databases.get(ctx, db.id).conditions));

    stop(beehive::Context{}.with_timeout(10s));
  }  // the beehive and the store close here, as at the end of a process

  {
    say("\n== second process: liveness after a restart");
    auto store = beehive::sqlite::open(file);
    beehive::Beehive bh(store);
    Databases databases(bh, database_kind);

    // Before any controller runs: the durable condition is still True, the liveness
    // condition written by the previous "process" is no longer vouched for.
    say("before start:" + show(databases.get(ctx, db_id).conditions));

    beehive::register_controller<DatabaseSpec, Empty>(bh, database_kind, reconcile_database);
    auto stop = bh.start(ctx);  // start reconciles every object once: it re-dials
    auto confirmed = wait_for(
        databases, db_id,
        [](const auto& d) { return has(d.conditions, "Connected", ConditionStatus::True); },
        "the database to be reconnected");
    say("after start: " + show(confirmed.conditions));
    stop(beehive::Context{}.with_timeout(10s));
  }
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "conditions: " << e.what() << "\n";
    return 1;
  }
}
