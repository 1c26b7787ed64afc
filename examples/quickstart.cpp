// Quickstart: a complete beehive application in one file.
//
//   1. a kind (`kstack.sh/Cluster`) with a spec (desired state) and a status (observed state);
//   2. a controller that reconciles it: it handles deletion by removing its finalizer,
//      "provisions" the spec, records an event and reports status with the generation
//      handshake;
//   3. main opens the store, registers the controller, starts, creates a few clusters,
//      waits (bounded, through a watch) until every cluster has been observed at its current
//      generation, prints them with their events, deletes one and waits until it is gone,
//      and stops with a deadline.
//
// The database is ./var/quickstart.db (relative to the working directory), recreated on
// every run.

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <beehive/beehive.hpp>

using namespace std::chrono_literals;

// --- the kind ---------------------------------------------------------------------------

const beehive::GroupKind cluster_kind{"kstack.sh", "Cluster"};
const std::string cluster_finalizer = "kstack.sh/cluster";

struct ClusterSpec {  // what the user wants
  std::string region;
  int nodes = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClusterSpec, region, nodes)

struct ClusterStatus {  // what the controller observed
  std::string phase;
  int ready_nodes = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClusterStatus, phase, ready_nodes)

using Cluster = beehive::Object<ClusterSpec, ClusterStatus>;

// --- the controller ---------------------------------------------------------------------

// Reconcile is level-triggered: it looks only at the object as it is stored now, never at
// what woke it, so it must be idempotent. Throwing retries the object with backoff.
class ClusterController : public beehive::Controller<ClusterSpec, ClusterStatus> {
 public:
  beehive::Result reconcile(const beehive::Context& ctx,
                            beehive::ControllerClient<ClusterStatus>& client,
                            const Cluster& obj) override {
    // Deletion: the object stays (deletion_requested_at set) until its finalizers are
    // removed. Tear down external resources first, then release the object.
    if (obj.deletion_requested_at) {
      // ... remove the real cluster described by obj.spec here ...
      client.remove_finalizer(ctx, obj.id, cluster_finalizer);
      return {};
    }

    // Drive the world toward obj.spec (here we only pretend to provision nodes). If it is
    // not there yet, ask to be called again later: `return beehive::Result{5s};`
    const std::string what = std::to_string(obj.spec.nodes) + " node(s) in " + obj.spec.region +
                             " (generation " + std::to_string(obj.generation) + ")";

    // An observation for the object's event log ("lifecycle" is the event's category).
    client.record_event(ctx, obj.id,
                        {"lifecycle", beehive::EventType::Normal, "Provisioned", what});

    // Report what was observed, and for which generation of the spec. Writing the same
    // status again is free: it only writes when something changed.
    client.update_status(ctx, obj.id, obj.generation, ClusterStatus{"Running", obj.spec.nodes});
    return {};
  }
};

// --- helpers ----------------------------------------------------------------------------

// Every example recreates its database so that reruns start from nothing.
std::shared_ptr<beehive::Store> fresh_store(const std::filesystem::path& file) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix);
  return beehive::sqlite::open(file);  // creates ./var/ if needed
}

bool settled(const Cluster& c) { return c.observed_generation == c.generation; }

// --- main -------------------------------------------------------------------------------

int run() {
  auto store = fresh_store("var/quickstart.db");
  beehive::Beehive bh(store);

  // Register before start. The returned ControllerClient lets the application write status
  // from its own threads too; this program does not need it.
  beehive::register_controller<ClusterSpec, ClusterStatus>(bh, cluster_kind,
                                                           std::make_shared<ClusterController>());

  beehive::Context ctx;  // the background context: no deadline
  beehive::Stop stop = bh.start(ctx);

  // The application's handle on the kind. It writes specs; it can never write status.
  beehive::Client<ClusterSpec, ClusterStatus> clusters(bh, cluster_kind);

  std::map<std::string, ClusterSpec> wanted{
      {"prod", {"eu-west", 3}}, {"staging", {"eu-west", 1}}, {"dev", {"us-east", 1}}};
  for (const auto& [slug, spec] : wanted)
    clusters.create(ctx, spec, beehive::with_slug(slug),
                    beehive::with_finalizers({cluster_finalizer}));
  // A real spec change moves the generation (1 -> 2); the controller sees the new spec.
  auto prod = clusters.get_by_slug(ctx, "prod");
  clusters.update(ctx, prod.id, {"eu-west", 5});
  std::cout << "created " << wanted.size() << " clusters; prod updated to generation "
            << clusters.get(ctx, prod.id).generation << "\n";

  // Wait until every cluster is settled (observed_generation == generation). A watch
  // delivers the current state of every object first, then each later change, so no
  // polling or sleeping is needed; the context bounds the wait.
  {
    auto changes = clusters.watch_list(ctx.with_timeout(5s));
    std::map<beehive::ObjectID, bool> state;
    auto all_settled = [&] {
      if (state.size() < wanted.size()) return false;
      for (const auto& [id, ok] : state)
        if (!ok) return false;
      return true;
    };
    while (!all_settled()) {
      auto change = changes.next();
      if (!change) throw std::runtime_error("the clusters did not settle within 5 s");
      state[change->object.id] = settled(change->object);
    }
  }

  std::cout << "\nevery cluster is settled:\n";
  for (const auto& c : clusters.list(ctx)) {
    std::cout << "  #" << c.id << " " << c.slug.value_or("-") << ": " << c.spec.nodes
              << " node(s) in " << c.spec.region << ", generation " << c.generation << ", observed "
              << c.observed_generation.value_or(0) << ", status "
              << (c.status ? c.status->phase + " with " + std::to_string(c.status->ready_nodes) +
                                 " ready node(s)"
                           : std::string("none"))
              << "\n";
    for (const auto& e : clusters.list_events(ctx, c.id))
      std::cout << "      event [" << e.category << "] " << beehive::to_string(e.type) << " "
                << e.reason << " x" << e.count << ": " << e.message << "\n";
  }

  // Delete one cluster. remove() only requests the deletion; the controller removes its
  // finalizer, and then beehive removes the row and every watch sees `Deleted`.
  auto staging = clusters.get_by_slug(ctx, "staging");
  auto watch = clusters.watch(ctx.with_timeout(5s), staging.id);
  clusters.remove(ctx, staging.id);
  std::cout << "\ndeleting #" << staging.id << " staging:\n";
  for (;;) {
    auto change = watch.next();
    if (!change) throw std::runtime_error("staging was not deleted within 5 s");
    const auto& o = change->object;
    std::cout << "  " << beehive::to_string(change->type) << ": finalizers " << o.finalizers.size()
              << ", deletion requested " << (o.deletion_requested_at ? "yes" : "no") << "\n";
    if (change->type == beehive::ChangeType::Deleted) break;
  }
  std::cout << "remaining clusters: " << clusters.list(ctx).size() << "\n";

  // Stop: new calls are refused, in-flight reconciles finish (bounded by the deadline),
  // queued writes land, and watches end.
  try {
    stop(beehive::Context{}.with_timeout(10s));
  } catch (const beehive::Error& e) {
    std::cerr << "beehive: shutdown did not drain cleanly: " << e.what() << "\n";
    return 1;
  }
  std::cout << "stopped cleanly\n";
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "quickstart: " << e.what() << "\n";
    return 1;
  }
}
