#pragma once

/// `Condition`: a controller's current observation of one aspect of an object, kept
/// per (object, type) and overwritten in place. A condition marked `liveness` is valid
/// only while the store that wrote it is open: after a restart (or a new
/// `sqlite::open` of the file) it reads back as `Unknown` until re-confirmed.
///
/// A plain value: copyable, thread-compatible.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <beehive/time.hpp>

namespace beehive {

enum class ConditionStatus { True, False, Unknown };

/// "True", "False" or "Unknown", as stored and as JSON spells it.
const char* to_string(ConditionStatus s) noexcept;
/// Inverse of to_string; throws Error(errc::decode) for any other text.
ConditionStatus condition_status_from_string(const std::string& s);

struct Condition {
  std::string type;
  ConditionStatus status = ConditionStatus::Unknown;
  std::string reason{};   ///< machine-readable token, e.g. "DialTimeout"
  std::string message{};  ///< human-readable detail
  bool liveness = false;
  /// The generation of the object this observation was made at, as the controller
  /// gives it (so that a reader can tell a stale condition from a current one); 0 = not
  /// given; negative is `invalid_argument`.
  std::int64_t observed_generation = 0;
  /// When `status` last changed, set by the store (whatever a write gives here is
  /// ignored) and read back by every read; the epoch on a condition not read from the
  /// store.
  Time last_transition_at{};

  friend bool operator==(const Condition&, const Condition&) = default;
};

/// Whether writing `next` over `stored` would change nothing: every field but
/// `last_transition_at` (the store's) is equal.
bool same_observation(const Condition& stored, const Condition& next) noexcept;

void to_json(nlohmann::json& j, ConditionStatus s);
void from_json(const nlohmann::json& j, ConditionStatus& s);

}  // namespace beehive
