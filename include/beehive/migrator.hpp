#pragma once

/// `Migrator`: converts a kind's stored spec and status blobs written at an older schema
/// version up to the version this build writes, on read, before decoding. Versions
/// start at 0 (unversioned), so once a migrator is attached its converters must accept
/// `from == 0`; register_controller refuses a migrator at a negative version
/// (`invalid_argument`). Spec and status version independently; a blob is re-stamped
/// only when it is next written. A blob at a newer version than the migrator's is a
/// downgrade and fails to decode (`errc::schema_version_downgrade`).
///
/// Called from several threads at once; implementations must be thread-safe.

#include <nlohmann/json.hpp>

namespace beehive {

class Migrator {
 public:
  virtual ~Migrator() = default;
  virtual int schema_version_spec() const = 0;    ///< 0 = not versioned
  virtual int schema_version_status() const = 0;  ///< 0 = not versioned
  virtual nlohmann::json convert_spec(int from, nlohmann::json raw) const = 0;
  virtual nlohmann::json convert_status(int from, nlohmann::json raw) const = 0;
};

}  // namespace beehive
