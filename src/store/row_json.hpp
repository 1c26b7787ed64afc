#pragma once

// An ObjectRow as JSON text and back: how the change log keeps a removed object's final
// body, so that a watch resuming after the removal (or another process learning of it)
// still gets the body, as a live watch does. Relations are not kept.
//
// Pure functions: safe on any thread.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <beehive/object_row.hpp>

namespace beehive::store {

std::string row_to_json(const ObjectRow& row);
/// Appends the same text to `out`, for a row carried inside a larger document
/// (commit_note).
void append_row_json(std::string& out, const ObjectRow& row);

/// The session a PostgreSQL read reports for a condition written by the process that
/// leads now (holds an unexpired lease): every process trusts that one's liveness
/// conditions, since its controllers are the ones that keep them current.
constexpr std::int64_t kLeadingSession = -1;
/// The session a PostgreSQL read reports for another process's liveness condition while
/// one leads: sessions count from 1, so that no process trusts it.
constexpr std::int64_t kNoSession = 0;

/// An object's conditions as both stores' reads return them, one JSON array of
/// [type, status, reason, message, liveness, session, observed_generation,
/// last_transition_at] per condition. A liveness condition written in another session
/// than `session` (or kLeadingSession) reads as Unknown: it is only as current as the
/// process that wrote it.
std::vector<Condition> stored_conditions(std::string_view json, std::int64_t session);
/// Throws Error(errc::store) for text that row_to_json did not write.
ObjectRow row_from_json(std::string_view text);
/// The same from a JSON value that row_json wrote.
ObjectRow row_from_json_value(const nlohmann::json& j);

}  // namespace beehive::store
