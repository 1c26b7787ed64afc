#include "store/row_json.hpp"

#include <nlohmann/json.hpp>

#include <beehive/errors.hpp>

namespace beehive::store {

namespace {

using Json = nlohmann::json;

Json opt_millis(const std::optional<Time>& t) { return t ? Json(to_millis(*t)) : Json(); }

std::optional<Time> millis_of(const Json& j) {
  if (j.is_null()) return std::nullopt;
  return from_millis(j.get<std::int64_t>());
}

}  // namespace

std::string row_to_json(const ObjectRow& row) { return row_json(row).dump(); }

Json row_json(const ObjectRow& row) {
  const auto& m = row.meta;
  Json conditions = Json::array();
  for (const auto& c : m.conditions)
    conditions.push_back({c.type, to_string(c.status), c.reason, c.message, c.liveness,
                          c.observed_generation, to_millis(c.last_transition_at)});
  Json j = {{"id", m.id},
            {"group", m.group},
            {"kind", m.kind},
            {"slug", m.slug ? Json(*m.slug) : Json()},
            {"generation", m.generation},
            {"observed_generation", m.observed_generation ? Json(*m.observed_generation) : Json()},
            {"observed_at", opt_millis(m.observed_at)},
            {"resource_version", m.resource_version},
            {"deletion_requested_at", opt_millis(m.deletion_requested_at)},
            {"finalizers", m.finalizers},
            {"labels", m.labels},
            {"conditions", std::move(conditions)},
            {"created_at", to_millis(m.created_at)},
            {"updated_at", to_millis(m.updated_at)},
            {"spec", row.spec},
            {"spec_version", row.spec_version},
            {"status", row.status ? Json(*row.status) : Json()},
            {"status_version", row.status_version}};
  return j;
}

std::vector<Condition> stored_conditions(std::string_view json, std::int64_t session) {
  std::vector<Condition> out;
  if (json == "[]") return out;
  for (auto& c : Json::parse(json)) {
    Condition cond{c[0].get<std::string>(),
                   condition_status_from_string(c[1]),
                   c[2].get<std::string>(),
                   c[3].get<std::string>(),
                   c[4].get<int>() != 0,
                   c[6].get<std::int64_t>(),
                   from_millis(c[7].get<std::int64_t>())};
    const auto written_in = c[5].get<std::int64_t>();
    if (cond.liveness && written_in != session && written_in != kLeadingSession)
      cond.status = ConditionStatus::Unknown;
    out.push_back(std::move(cond));
  }
  return out;
}

ObjectRow row_from_json(std::string_view text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::store, std::string("a change-log body does not read back: ") + e.what());
  }
  return row_from_json_value(j);
}

ObjectRow row_from_json_value(const Json& j) {
  try {
    ObjectRow row;
    auto& m = row.meta;
    m.id = j.at("id").get<ObjectID>();
    m.group = j.at("group").get<std::string>();
    m.kind = j.at("kind").get<std::string>();
    if (!j.at("slug").is_null()) m.slug = j.at("slug").get<std::string>();
    m.generation = j.at("generation").get<std::int64_t>();
    if (!j.at("observed_generation").is_null())
      m.observed_generation = j.at("observed_generation").get<std::int64_t>();
    m.observed_at = millis_of(j.at("observed_at"));
    m.resource_version = j.at("resource_version").get<std::int64_t>();
    m.deletion_requested_at = millis_of(j.at("deletion_requested_at"));
    m.finalizers = j.at("finalizers").get<std::vector<std::string>>();
    m.labels = j.at("labels").get<Labels>();
    for (const auto& c : j.at("conditions"))
      m.conditions.push_back({c.at(0).get<std::string>(), condition_status_from_string(c.at(1)),
                              c.at(2).get<std::string>(), c.at(3).get<std::string>(),
                              c.at(4).get<bool>(), c.at(5).get<std::int64_t>(),
                              from_millis(c.at(6).get<std::int64_t>())});
    m.created_at = from_millis(j.at("created_at").get<std::int64_t>());
    m.updated_at = from_millis(j.at("updated_at").get<std::int64_t>());
    row.spec = j.at("spec").get<std::string>();
    row.spec_version = j.at("spec_version").get<int>();
    if (!j.at("status").is_null()) row.status = j.at("status").get<std::string>();
    row.status_version = j.at("status_version").get<int>();
    return row;
  } catch (const nlohmann::json::exception& e) {
    throw Error(errc::store, std::string("a change-log body does not read back: ") + e.what());
  }
}

}  // namespace beehive::store
