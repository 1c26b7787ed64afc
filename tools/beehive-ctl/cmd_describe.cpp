// `describe KIND[.GROUP] SLUG|ID`: one object in full, for a person to read.

#include <sstream>

#include <beehive/options.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "terminal_text.hpp"

namespace beehive::ctl {

namespace {

void field(std::ostream& out, const std::string& name, const std::string& value) {
  constexpr std::size_t width = 21;
  out << name << ':' << std::string(name.size() + 1 < width ? width - name.size() - 1 : 1, ' ')
      << printable(value) << '\n';
}

std::string when(const std::optional<Time>& t, Time now) {
  return t ? iso_time(*t) + " (" + age(*t, now) + " ago)" : "-";
}

/// Pretty JSON, indented under its heading.
void json_block(std::ostream& out, const std::string& heading, const Json& value) {
  out << heading << ":\n";
  std::istringstream lines(value.dump(2));
  for (std::string line; std::getline(lines, line);) out << "  " << printable(line) << '\n';
}

/// A relation as "Kind.group/ID (slug)" lines; the slug is read in the same snapshot.
void refs_block(std::ostream& out, Database& db, const std::string& heading,
                const std::vector<Ref>& refs) {
  out << heading << ':' << (refs.empty() ? " -" : "") << '\n';
  for (auto& r : refs) {
    auto row = db.reader().get(r.id);
    out << "  " << printable(ref_name(r, row ? row->meta.slug : std::nullopt)) << '\n';
  }
}

}  // namespace

int run_describe(Database& db, const DescribeOptions& o, std::ostream& out) {
  Database::Snapshot snapshot(db);
  auto gk = resolve_kind(db, o.kind);
  auto row = find_object(
      db, gk, o.object,
      LoadOption::owner | LoadOption::dependencies | LoadOption::dependents | LoadOption::owned);
  auto& m = row.meta;
  auto& rel = m.relations;
  auto now = std::chrono::system_clock::now();

  field(out, "Name", ref_name({m.id, m.group, m.kind}, m.slug));
  field(out, "Created", when(m.created_at, now));
  field(out, "Updated", when(m.updated_at, now));
  field(out, "Generation", std::to_string(m.generation));
  std::string observed = "-";
  if (m.observed_generation) {
    observed = std::to_string(*m.observed_generation);
    if (*m.observed_generation != m.generation) observed += " (behind)";
    if (m.observed_at) observed += ", at " + when(m.observed_at, now);
  }
  field(out, "Observed generation", observed);
  field(out, "Resource version", std::to_string(m.resource_version));
  field(out, "Deletion requested", when(m.deletion_requested_at, now));
  std::string finalizers;
  for (auto& f : m.finalizers) finalizers += (finalizers.empty() ? "" : ", ") + f;
  field(out, "Finalizers", finalizers.empty() ? "-" : finalizers);
  field(out, "Labels", m.labels.empty() ? "-" : labels_text(m.labels));
  auto owner = *rel.owner;
  std::optional<std::string> owner_slug;
  if (owner)
    if (auto r = db.reader().get(owner->id)) owner_slug = r->meta.slug;
  field(out, "Owner", owner ? ref_name(*owner, owner_slug) : "-");

  auto j = object_json(row, {});
  json_block(out, "Spec (schema version " + std::to_string(row.spec_version) + ")", j["spec"]);
  if (row.status)
    json_block(out, "Status (schema version " + std::to_string(row.status_version) + ")",
               j["status"]);
  else
    out << "Status: -\n";

  auto conditions = db.conditions(m.id);
  out << "Conditions:" << (conditions.empty() ? " -" : "") << '\n';
  if (!conditions.empty()) {
    Table t({"CONDITION", "REASON", "SINCE", "GENERATION", "MESSAGE"});
    for (auto& c : conditions) {
      auto name = c.condition.type + "=" + to_string(c.condition.status);
      if (c.condition.liveness)
        name += c.stored == c.condition.status
                    ? " (liveness)"
                    : std::string(" (liveness, written ") + to_string(c.stored) + " by " +
                          db.stale_liveness_writer() + ")";
      // The generation the controller observed it at: an older one than the object's
      // describes a spec since changed.
      auto generation = c.condition.observed_generation == 0
                            ? std::string("-")
                            : std::to_string(c.condition.observed_generation) +
                                  (stale(c.condition, m) ? "(stale)" : "");
      t.add({name, c.condition.reason, age(c.last_transition_at, now) + " ago", generation,
             c.condition.message});
    }
    t.print(out, "  ");
  }

  refs_block(out, db, "Dependencies", *rel.dependencies);
  refs_block(out, db, "Dependents", *rel.dependents);
  refs_block(out, db, "Owned", *rel.owned);

  detail::EventQuery q;
  q.limit = o.events;
  auto runs = db.reader().list_events(m.id, q);
  out << "Events (newest first, up to " << o.events << "):" << (runs.empty() ? " -" : "") << '\n';
  if (!runs.empty()) event_table(runs, now).print(out, "  ");
  return 0;
}

}  // namespace beehive::ctl
