#pragma once

/// `ObjectRow`: an object as the store holds it, with spec and status still JSON text
/// at the schema version they were written at. This is what beehive's actors exchange
/// and what the typed `Object<Spec, Status>` is decoded from.
///
/// A plain value: copyable, thread-compatible.

#include <optional>
#include <string>

#include <beehive/object_meta.hpp>

namespace beehive {

struct ObjectRow {
  ObjectMeta meta;
  std::string spec;                   ///< JSON text
  int spec_version = 0;               ///< schema version the spec was written at
  std::optional<std::string> status;  ///< JSON text; nullopt = no status yet
  int status_version = 0;
};

}  // namespace beehive
