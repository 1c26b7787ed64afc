#pragma once

/// Identity of objects: `GroupKind` names a type of object ("" group for the core,
/// a domain such as "acme.com" for plugins), `ObjectID` names one object (never
/// reused, even after the object is removed), `Ref` names an object with its kind, as
/// relation lookups return it. Plain values; thread-compatible.

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace beehive {

using ObjectID = std::int64_t;

struct GroupKind {
  std::string group;
  std::string kind;

  friend bool operator==(const GroupKind&, const GroupKind&) = default;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  friend auto operator<=>(const GroupKind&, const GroupKind&) = default;
};

/// "Kind" for the core group, "Kind.group" otherwise (as kubectl spells it).
std::string to_string(const GroupKind& gk);

struct Ref {
  ObjectID id = 0;
  std::string group{};
  std::string kind{};

  friend bool operator==(const Ref&, const Ref&) = default;
};

}  // namespace beehive

template <>
struct std::hash<beehive::GroupKind> {
  std::size_t operator()(const beehive::GroupKind& gk) const noexcept {
    auto h = std::hash<std::string>{}(gk.group);
    return h ^ (std::hash<std::string>{}(gk.kind) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};
