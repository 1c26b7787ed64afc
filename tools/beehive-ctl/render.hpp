#pragma once

// How beehive-ctl spells values: times, ages, object and event JSON, the table rows that
// several commands share.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <beehive/event.hpp>
#include <beehive/object_row.hpp>
#include <beehive/time.hpp>

#include "database.hpp"
#include "table.hpp"

namespace beehive::ctl {

/// Output keeps the order fields are written in (and a spec's own key order).
using Json = nlohmann::ordered_json;

/// "45s", "12m", "5h", "3d": how long before `now` `t` was (kubectl's AGE). A time after
/// `now` (a manual clock ahead of this one) gets a leading "-".
std::string age(Time t, Time now);
/// UTC, to the millisecond: "2026-11-29T23:06:04.123Z" (JSON and describe).
std::string iso_time(Time t);
/// Local wall-clock time, "23:06:04", with the date in front when it is not today.
std::string clock_time(Time t, Time now);

/// The whole object: meta, spec and status (parsed from the stored text, so values and
/// key order are as written), conditions with their transition times, and the relations
/// the row was read with.
/// `j` as -o json prints it: indented, and with the C1 and bidirectional controls that
/// JSON allows raw escaped as \uNNNN too (the same value), so that stored text cannot
/// drive the terminal it is printed on.
std::string json_output(const Json& j);
Json object_json(const ObjectRow& row, const std::vector<ConditionRow>& conditions);
Json event_json(const Event& e);

/// A slug as a table cell: "<none>" without one; as a JSON string (`""`, `"<none>"`)
/// when it is empty (a blank cell would read as the next column's value), is spelled
/// "<none>" or starts with a quote.
std::string slug_cell(const std::optional<std::string>& slug);

/// "Kind.group/ID", plus " (slug)" when `slug` is given.
std::string ref_name(const Ref& r, const std::optional<std::string>& slug = std::nullopt);

/// "Kind.group/slug" ("Kind.group/ID" without a slug): how the write commands name
/// what they wrote.
std::string object_name(const ObjectMeta& m);

/// Whether `c` was observed at an older generation of the object than its current one (a
/// condition that gives no generation is taken as current).
bool stale(const Condition& c, const ObjectMeta& m);

/// The Ready condition's status, "(stale)" appended when it was observed at an older
/// generation; "-" without one (the READY column).
std::string ready_status(const ObjectMeta& m);

/// "k=v,k2=v2" by key, "<none>" without labels (the LABELS column).
std::string labels_text(const Labels& labels);

/// The `get` table: ID, SLUG, GENERATION, OBSERVED, READY, CONDITIONS, AGE, DELETING,
/// LABELS.
Table object_table();
void add_object_row(Table& t, const ObjectRow& row, Time now);

/// The event timeline (newest first), one run per row like the reference's
/// connection-health panel: LAST, CATEGORY, TYPE, REASON, COUNT, FIRST..LAST, MESSAGE.
Table event_table(const std::vector<Event>& runs, Time now);

}  // namespace beehive::ctl
