#include "store/row_json.hpp"

#include <nlohmann/json.hpp>

#include <beehive/errors.hpp>

#include "store/json_out.hpp"

namespace beehive::store {

namespace {

using Json = nlohmann::json;

std::optional<Time> millis_of(const Json& j) {
  if (j.is_null()) return std::nullopt;
  return from_millis(j.get<std::int64_t>());
}

}  // namespace

std::string row_to_json(const ObjectRow& row) {
  std::string out;
  append_row_json(out, row);
  return out;
}

void append_row_json(std::string& out, const ObjectRow& row) {
  using namespace json_out;
  const auto& m = row.meta;
  auto opt_int = [&](const std::optional<std::int64_t>& v) {
    if (v)
      put_int(out, *v);
    else
      out.append("null");
  };
  auto opt_millis = [&](const std::optional<Time>& t) {
    opt_int(t ? std::optional<std::int64_t>(to_millis(*t)) : std::nullopt);
  };
  auto opt_string = [&](const std::optional<std::string>& v) {
    if (v)
      put_string(out, *v);
    else
      out.append("null");
  };
  out.reserve(out.size() + 256 + row.spec.size() + (row.status ? row.status->size() : 0));
  out.push_back('{');
  put_key(out, "id", true);
  put_int(out, m.id);
  put_key(out, "group");
  put_string(out, m.group);
  put_key(out, "kind");
  put_string(out, m.kind);
  put_key(out, "slug");
  opt_string(m.slug);
  put_key(out, "generation");
  put_int(out, m.generation);
  put_key(out, "observed_generation");
  opt_int(m.observed_generation);
  put_key(out, "observed_at");
  opt_millis(m.observed_at);
  put_key(out, "resource_version");
  put_int(out, m.resource_version);
  put_key(out, "deletion_requested_at");
  opt_millis(m.deletion_requested_at);
  put_key(out, "finalizers");
  out.push_back('[');
  for (std::size_t i = 0; i < m.finalizers.size(); ++i) {
    if (i) out.push_back(',');
    put_string(out, m.finalizers[i]);
  }
  out.append("]");
  put_key(out, "labels");
  out.push_back('{');
  bool first = true;
  for (const auto& [key, value] : m.labels) {
    put_key(out, key, first);
    put_string(out, value);
    first = false;
  }
  out.push_back('}');
  put_key(out, "conditions");
  out.push_back('[');
  for (std::size_t i = 0; i < m.conditions.size(); ++i) {
    const auto& c = m.conditions[i];
    if (i) out.push_back(',');
    out.push_back('[');
    put_string(out, c.type);
    out.push_back(',');
    put_string(out, to_string(c.status));
    out.push_back(',');
    put_string(out, c.reason);
    out.push_back(',');
    put_string(out, c.message);
    out.push_back(',');
    put_bool(out, c.liveness);
    out.push_back(',');
    put_int(out, c.observed_generation);
    out.push_back(',');
    put_int(out, to_millis(c.last_transition_at));
    out.push_back(']');
  }
  out.push_back(']');
  put_key(out, "created_at");
  put_int(out, to_millis(m.created_at));
  put_key(out, "updated_at");
  put_int(out, to_millis(m.updated_at));
  put_key(out, "spec");
  put_string(out, row.spec);
  put_key(out, "spec_version");
  put_int(out, row.spec_version);
  put_key(out, "status");
  opt_string(row.status);
  put_key(out, "status_version");
  put_int(out, row.status_version);
  out.push_back('}');
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
