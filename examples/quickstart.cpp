// Quickstart: declare a kind, create a few objects in a SQLite file under ./var/,
// update one, read them back, and request the deletion of one.

#include <iostream>

#include <beehive/beehive.hpp>

struct ClusterSpec {
  std::string region;
  int nodes = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClusterSpec, region, nodes)

struct ClusterStatus {};  // an empty struct needs no converter

int main() {
  const beehive::GroupKind clusters_kind{"kstack.sh", "Cluster"};
  auto store = beehive::sqlite::open("var/quickstart.db");
  beehive::Beehive bh(store);
  beehive::Client<ClusterSpec, ClusterStatus> clusters(bh, clusters_kind);
  beehive::Context ctx;  // background: no deadline

  // Idempotent across runs: the slug keys each object.
  auto [prod, created] = clusters.get_or_create(ctx, "prod", {"eu-west", 3});
  clusters.create_or_update(ctx, "staging", {"eu-west", 1});
  clusters.update(ctx, prod.id, {"eu-west", 5});
  clusters.remove_by_slug(ctx, "scratch");  // absent: a successful no-op

  for (const auto& c : clusters.list(ctx))
    std::cout << c.id << "  " << c.slug.value_or("-") << "  " << c.spec.region << " x"
              << c.spec.nodes << "  generation " << c.generation << "  rv "
              << c.resource_version << (created && c.id == prod.id ? "  (new)" : "") << "\n";
}
