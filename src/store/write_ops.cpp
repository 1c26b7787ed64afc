#include "store/write_ops.hpp"

#include <beehive/errors.hpp>

namespace beehive::store {

ObjectRow WriteOps::reread(ObjectID id) {
  auto row = w_.get(id);
  if (!row) throw Error(errc::store, "row vanished inside its own transaction");
  return std::move(*row);
}

ObjectRow WriteOps::require(const GroupKind& gk, ObjectID id) {
  auto row = w_.get(id);
  if (!row || row->meta.group != gk.group || row->meta.kind != gk.kind)
    throw Error(errc::not_found, "no " + to_string(gk) + " with id " + std::to_string(id));
  return std::move(*row);
}

ObjectRow WriteOps::create(const GroupKind& gk, const std::string& spec,
                           const std::optional<std::string>& slug,
                           const std::vector<std::string>& finalizers) {
  if (slug && w_.get_by_slug(gk, *slug))
    throw Error(errc::already_exists, to_string(gk) + " slug \"" + *slug + "\" is taken");
  NewObject o{gk, slug, spec, 0, finalizers, w_.next_resource_version(), now_};
  auto row = reread(w_.insert_object(o));
  changes_.push_back({ChangeType::Added, row});
  return row;
}

ObjectRow WriteOps::update_row(const ObjectRow& row, const std::string& spec) {
  // Re-applying the stored bytes is no write at all: no generation, no version, no wake.
  if (row.spec == spec && row.spec_version == 0) return row;
  w_.update_spec(row.meta.id, spec, 0, row.meta.generation + 1, w_.next_resource_version(),
                 now_);
  auto updated = reread(row.meta.id);
  changes_.push_back({ChangeType::Modified, updated});
  return updated;
}

ObjectRow WriteOps::update(const GroupKind& gk, ObjectID id, const std::string& spec) {
  return update_row(require(gk, id), spec);
}

ObjectRow WriteOps::create_or_update(const GroupKind& gk, const std::string& slug,
                                     const std::string& spec) {
  if (auto row = w_.get_by_slug(gk, slug)) return update_row(*row, spec);
  return create(gk, spec, slug, {});
}

std::pair<ObjectRow, bool> WriteOps::get_or_create(const GroupKind& gk, const std::string& slug,
                                                   const std::string& spec,
                                                   const std::vector<std::string>& finalizers) {
  if (auto row = w_.get_by_slug(gk, slug)) return {std::move(*row), false};
  return {create(gk, spec, slug, finalizers), true};
}

ObjectRow WriteOps::mark_deleted(const ObjectRow& row) {
  if (row.meta.deletion_requested_at) return row;
  w_.request_deletion(row.meta.id, now_, w_.next_resource_version());
  auto updated = reread(row.meta.id);
  changes_.push_back({ChangeType::Modified, updated});
  return updated;
}

ObjectRow WriteOps::remove(const GroupKind& gk, ObjectID id) {
  return mark_deleted(require(gk, id));
}

bool WriteOps::remove_by_slug(const GroupKind& gk, const std::string& slug) {
  auto row = w_.get_by_slug(gk, slug);
  if (!row || row->meta.deletion_requested_at) return false;
  mark_deleted(*row);
  return true;
}

}  // namespace beehive::store
