#include "store/commit_note.hpp"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "store/row_json.hpp"

namespace beehive::store {

namespace {

using Json = nlohmann::json;

Json refs_json(const std::vector<Ref>& refs) {
  Json out = Json::array();
  for (const auto& r : refs) out.push_back({r.id, r.group, r.kind});
  return out;
}

Ref ref_from(const Json& j) {
  return Ref{j.at(0).get<ObjectID>(), j.at(1).get<std::string>(), j.at(2).get<std::string>()};
}

std::vector<Ref> refs_from(const Json& j) {
  std::vector<Ref> out;
  for (const auto& r : j) out.push_back(ref_from(r));
  return out;
}

/// Whether every receiver would publish the record exactly as the committing process did.
bool travels(const commit_record& rec) {
  if (!rec.events.empty() || rec.lost_through != 0) return false;
  return std::none_of(rec.changes.begin(), rec.changes.end(), [](const object_change& c) {
    const auto& conds = c.row.meta.conditions;
    return std::any_of(conds.begin(), conds.end(), [](const Condition& k) { return k.liveness; });
  });
}

std::string header(std::int64_t session, std::int64_t after, std::int64_t through) {
  return std::to_string(session) + ' ' + std::to_string(after) + ' ' + std::to_string(through);
}

/// Reads one integer at `at` and moves past it; false when there is none.
bool read_int(std::string_view text, std::size_t& at, std::int64_t& out) {
  auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), out);
  if (ec != std::errc{}) return false;
  at = static_cast<std::size_t>(end - text.data());
  return true;
}

}  // namespace

std::string write_commit_note(std::int64_t session, std::int64_t after, std::int64_t through,
                              const commit_record* record) {
  auto text = header(session, after, through);
  if (!record || !travels(*record)) return text;
  Json changes = Json::array();
  for (const auto& c : record->changes)
    changes.push_back({static_cast<int>(c.type), c.parts,
                       c.owner ? Json{c.owner->id, c.owner->group, c.owner->kind} : Json(),
                       row_json(c.row)});
  Json j = {{"c", std::move(changes)},
            {"w", refs_json(record->wakes)},
            {"q", refs_json(record->requeues)},
            {"b", refs_json(record->backoff_resets)},
            {"x", record->edges_removed}};
  auto body = j.dump();
  if (text.size() + 1 + body.size() > kMaxCommitNoteBytes) return text;
  text += '\n';
  text += body;
  return text;
}

std::optional<std::int64_t> commit_note_session(std::string_view text) {
  std::size_t at = 0;
  std::int64_t session = 0;
  if (!read_int(text, at, session)) return std::nullopt;
  return session;
}

CommitNote read_commit_note(std::string_view text) {
  CommitNote note;
  std::size_t at = 0;
  if (!read_int(text, at, note.session)) return note;
  std::int64_t after = 0, through = 0;
  if (at >= text.size() || text[at] != ' ' || !read_int(text, ++at, after) || at >= text.size() ||
      text[at] != ' ' || !read_int(text, ++at, through) || after > through)
    return note;
  note.after = after;
  note.through = through;
  if (at >= text.size() || text[at] != '\n') return note;
  try {
    auto j = Json::parse(text.substr(at + 1));
    commit_record rec;
    for (const auto& c : j.at("c")) {
      object_change change;
      auto type = c.at(0).get<int>();
      if (type < static_cast<int>(ChangeType::Added) ||
          type > static_cast<int>(ChangeType::Deleted))
        return note;
      change.type = static_cast<ChangeType>(type);
      change.parts = c.at(1).get<unsigned>();
      if (!c.at(2).is_null()) change.owner = ref_from(c.at(2));
      change.row = row_from_json_value(c.at(3));
      rec.changes.push_back(std::move(change));
    }
    rec.wakes = refs_from(j.at("w"));
    rec.requeues = refs_from(j.at("q"));
    rec.backoff_resets = refs_from(j.at("b"));
    rec.edges_removed = j.at("x").get<bool>();
    note.record = std::move(rec);
  } catch (const std::exception&) {  // JSON or Error: read the log instead
  }
  return note;
}

}  // namespace beehive::store
