#pragma once

/// `ObjectMeta`: everything about a stored object except its spec and status — the
/// part of `Object<Spec, Status>` that does not depend on the user's types.
///
/// Relations (owner, dependencies, dependents, owned children, recent events) are
/// present only when the read that produced the object asked for them with a
/// `LoadOption`; their accessors throw `Error(errc::not_loaded)` otherwise, so a
/// forgotten load fails loudly instead of looking empty.
///
/// A plain value: copyable, thread-compatible (its const accessors may run on several
/// threads at once).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/condition.hpp>
#include <beehive/event.hpp>
#include <beehive/group_kind.hpp>
#include <beehive/time.hpp>

namespace beehive {

/// An object's labels: key -> value, in Kubernetes' syntax (a key is an optional DNS
/// subdomain prefix and '/', then a name of at most 63 characters; a value is empty or a
/// name). Selected by `with_selector`.
using Labels = std::map<std::string, std::string>;

/// Relations attached by a read; an empty optional means "not loaded".
struct LoadedRelations {
  std::optional<std::optional<Ref>> owner;
  std::optional<std::vector<Ref>> dependencies;
  std::optional<std::vector<Ref>> dependents;
  std::optional<std::vector<Ref>> owned;
  std::optional<std::vector<Event>> events;
};

struct ObjectMeta {
  ObjectID id = 0;
  std::string group;
  std::string kind;
  std::optional<std::string> slug;  ///< nullopt when created without with_slug
  std::int64_t generation = 0;      ///< 1 at create, +1 per real spec change
  std::optional<std::int64_t> observed_generation;
  std::optional<Time> observed_at;  ///< when observed_generation was recorded
  std::int64_t resource_version = 0;
  std::optional<Time> deletion_requested_at;
  std::vector<std::string> finalizers;
  Labels labels;  ///< set by with_labels at create, replaced by set_labels
  std::vector<Condition> conditions;
  Time created_at{};
  Time updated_at{};

  /// The owner, or nullopt when the object has none. Throws not_loaded without
  /// load_owner().
  std::optional<Ref> get_owner() const;
  /// Throw not_loaded unless the matching load option was given.
  const std::vector<Ref>& list_dependencies() const;
  const std::vector<Ref>& list_dependents() const;
  const std::vector<Ref>& list_owned() const;
  const std::vector<Event>& list_events() const;

  GroupKind group_kind() const { return {group, kind}; }

  LoadedRelations relations;
};

/// The condition of `type` on `meta`, or null; the pointer lives as long as `meta`.
const Condition* find_condition(const ObjectMeta& meta, std::string_view type) noexcept;
/// Whether `meta` has a condition of `type` whose status is True.
bool is_condition_true(const ObjectMeta& meta, std::string_view type) noexcept;

}  // namespace beehive
