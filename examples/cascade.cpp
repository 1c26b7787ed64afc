// Cascade: owners, children and finalizers.
//
// A Project owns Environments (`with_owner`). Both kinds carry a finalizer
// (`with_finalizers`), so neither row disappears before its controller has cleaned up:
//
//   * deleting the project marks every environment it owns for deletion too;
//   * each environment's controller tears its environment down and removes its finalizer;
//   * the project's controller keeps its own finalizer while anything still points at the
//     project (`has_incoming_refs`), and removes it only once the last child is gone.
//
// The program prints the order of the `Deleted` notifications: children first, owner last.
// The database is ./var/cascade.db, recreated on every run.

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <beehive/beehive.hpp>

using namespace std::chrono_literals;

const beehive::GroupKind project_kind{"example.com", "Project"};
const beehive::GroupKind environment_kind{"example.com", "Environment"};
const std::string teardown = "example.com/teardown";

struct ProjectSpec {
  std::string team;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProjectSpec, team)

struct EnvironmentSpec {
  std::string name;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EnvironmentSpec, name)

struct Empty {};  // an empty status needs no JSON converter

using Projects = beehive::Client<ProjectSpec, Empty>;
using Environments = beehive::Client<EnvironmentSpec, Empty>;

// Controllers run on their own threads: print whole lines under a lock.
void say(const std::string& line) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::cout << line << std::endl;
}

// --- controllers ------------------------------------------------------------------------

beehive::Result reconcile_environment(const beehive::Context& ctx,
                                      beehive::ControllerClient<Empty>& client,
                                      const beehive::Object<EnvironmentSpec, Empty>& env) {
  if (env.deletion_requested_at) {
    say("  [environment controller] tearing down '" + env.spec.name + "', removing finalizer");
    client.remove_finalizer(ctx, env.id, teardown);
    return {};
  }
  client.update_status(ctx, env.id, env.generation, Empty{});
  return {};
}

beehive::Result reconcile_project(const beehive::Context& ctx,
                                  beehive::ControllerClient<Empty>& client,
                                  const beehive::Object<ProjectSpec, Empty>& project) {
  if (project.deletion_requested_at) {
    // Gate the project's own teardown on its children: an owned child (or a dependent that
    // is not itself being deleted) is a live claim on the project.
    if (client.has_incoming_refs(ctx, project.id)) {
      say("  [project controller] project still referenced by " +
          std::to_string(client.list_owned(ctx, project.id).size()) +
          " environment(s), keeping its finalizer");
      return {};  // removing a child wakes the project again; no polling needed
    }
    say("  [project controller] nothing references the project any more, removing finalizer");
    client.remove_finalizer(ctx, project.id, teardown);
    return {};
  }
  client.update_status(ctx, project.id, project.generation, Empty{});
  return {};
}

// --- main -------------------------------------------------------------------------------

std::shared_ptr<beehive::Store> fresh_store(const std::filesystem::path& file) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix);
  return beehive::sqlite::open(file);
}

struct Removal {
  std::int64_t resource_version;  // every removal is a change of its own, with its own version
  std::string what;
};

int run() {
  auto store = fresh_store("var/cascade.db");
  beehive::Beehive bh(store);
  // A plain function (any callable) works as a controller.
  beehive::register_controller<ProjectSpec, Empty>(bh, project_kind, reconcile_project);
  beehive::register_controller<EnvironmentSpec, Empty>(bh, environment_kind, reconcile_environment);
  beehive::Context ctx;
  auto stop = bh.start(ctx);

  Projects projects(bh, project_kind);
  Environments environments(bh, environment_kind);

  auto shop = projects.create(ctx, {"web"}, beehive::with_slug("shop"),
                              beehive::with_finalizers({teardown}));
  for (std::string name : {"dev", "staging", "prod"})
    environments.create(ctx, {name}, beehive::with_slug("shop-" + name),
                        beehive::with_owner(shop.id), beehive::with_finalizers({teardown}));
  // Not owned by the project: the cascade leaves it alone.
  environments.create(ctx, {"sandbox"}, beehive::with_slug("sandbox"),
                      beehive::with_finalizers({teardown}));

  // Relations are read on request: load_owned() attaches the owned children's refs;
  // list_owned_objects returns this kind's children fully decoded.
  auto loaded = projects.get(ctx, shop.id, beehive::load_owned());
  std::cout << "project 'shop' (#" << shop.id << ") owns " << loaded.list_owned().size()
            << " objects:";
  for (const auto& env : environments.list_owned_objects(ctx, shop.id))
    std::cout << " " << env.spec.name << " (#" << env.id << ", owner #"
              << environments.get_owner(ctx, env.id)->id << ")";
  std::cout << "\n\ndeleting project 'shop':\n";

  // Watch both kinds, then request the deletion of the owner only.
  auto deadline = ctx.with_timeout(5s);
  auto project_changes = projects.watch(deadline, shop.id);
  auto environment_changes = environments.watch_list(deadline);
  projects.remove(ctx, shop.id);

  std::vector<Removal> removals;
  for (std::size_t children = 0; children < 3;) {
    auto change = environment_changes.next();
    if (!change) throw std::runtime_error("the environments were not removed within 5 s");
    if (change->type != beehive::ChangeType::Deleted) continue;
    removals.push_back(
        {change->object.resource_version, "environment '" + change->object.spec.name + "'"});
    ++children;
  }
  for (;;) {
    auto change = project_changes.next();
    if (!change) throw std::runtime_error("the project was not removed within 5 s");
    if (change->type != beehive::ChangeType::Deleted) continue;
    removals.push_back({change->object.resource_version, "project 'shop'"});
    break;
  }

  // Order the removals as they were committed (resource versions are global).
  std::sort(removals.begin(), removals.end(), [](const Removal& a, const Removal& b) {
    return a.resource_version < b.resource_version;
  });
  std::cout << "\nDeleted, in commit order:\n";
  for (std::size_t i = 0; i < removals.size(); ++i)
    std::cout << "  " << i + 1 << ". " << removals[i].what << " (resource version "
              << removals[i].resource_version << ")\n";
  if (removals.back().what != "project 'shop'")
    throw std::runtime_error("the owner was not removed last");

  std::cout << "\nleft: " << projects.list(ctx).size() << " project(s), environments:";
  for (const auto& env : environments.list(ctx)) std::cout << " '" << env.spec.name << "'";
  std::cout << "\n";

  stop(beehive::Context{}.with_timeout(10s));
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "cascade: " << e.what() << "\n";
    return 1;
  }
}
