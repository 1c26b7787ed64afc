#include "store/commit_note.hpp"

#include <algorithm>
#include <charconv>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include "store/json_out.hpp"
#include "store/row_json.hpp"

namespace beehive::store {

namespace {

using Json = nlohmann::json;

void put_ref(std::string& out, const Ref& r) {
  out.push_back('[');
  json_out::put_int(out, r.id);
  out.push_back(',');
  json_out::put_string(out, r.group);
  out.push_back(',');
  json_out::put_string(out, r.kind);
  out.push_back(']');
}

void put_refs(std::string& out, std::string_view key, const std::vector<Ref>& refs) {
  json_out::put_key(out, key);
  out.push_back('[');
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (i) out.push_back(',');
    put_ref(out, refs[i]);
  }
  out.push_back(']');
}

Ref ref_from(const Json& j) {
  return Ref{j.at(0).get<ObjectID>(), j.at(1).get<std::string>(), j.at(2).get<std::string>()};
}

std::vector<Ref> refs_from(const Json& j) {
  std::vector<Ref> out;
  for (const auto& r : j) out.push_back(ref_from(r));
  return out;
}

/// Whether every receiver would publish the record exactly as the committing process
/// did, and it may fit: the rows' large parts are counted before anything is written
/// (this runs while the transaction holds the store's counters).
bool travels(const commit_record& rec) {
  if (!rec.events.empty() || rec.lost_through != 0) return false;
  constexpr std::size_t kPerChange = 300;  // a row's other fields, its keys and refs
  std::size_t bytes = 0;
  for (const auto& c : rec.changes) {
    const auto& m = c.row.meta;
    bytes += kPerChange + m.group.size() + m.kind.size() + m.slug.value_or("").size();
    for (const auto& k : m.conditions) {
      if (k.liveness) return false;
      bytes += 40 + k.type.size() + k.message.size() + k.reason.size();
    }
    bytes += c.row.spec.size() + (c.row.status ? c.row.status->size() : 0);
    for (const auto& [key, value] : m.labels) bytes += 6 + key.size() + value.size();
    for (const auto& f : m.finalizers) bytes += 3 + f.size();
    if (bytes >= kMaxCommitNoteBytes) return false;
  }
  return true;
}

constexpr std::size_t kMacHex = 64;  // HMAC-SHA256, in hex

/// A note's parts: the header, the signature (empty when none) and the body.
struct Parts {
  std::string_view header, signature, body;
};

/// Splits `text` after the header that ends at `end`; nullopt when what follows is
/// neither nothing nor a signature and a body.
std::optional<Parts> split(std::string_view text, std::size_t end) {
  Parts p{text.substr(0, end), {}, {}};
  if (end == text.size()) return p;
  if (text.size() < end + 2 + kMacHex || text[end] != ' ' || text[end + 1 + kMacHex] != '\n')
    return std::nullopt;
  p.signature = text.substr(end + 1, kMacHex);
  p.body = text.substr(end + 2 + kMacHex);
  return p;
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

struct NoteKey::Impl {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;
  ~Impl() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }
};

NoteKey::NoteKey() = default;
NoteKey::~NoteKey() = default;
NoteKey::NoteKey(NoteKey&&) noexcept = default;
NoteKey& NoteKey::operator=(NoteKey&&) noexcept = default;

NoteKey::NoteKey(std::string_view key) {
  if (key.empty()) return;
  auto impl = std::make_unique<Impl>();
  impl->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (impl->mac) impl->keyed = EVP_MAC_CTX_new(impl->mac);
  if (!impl->keyed) return;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(impl->keyed, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                   params))
    impl_ = std::move(impl);
}

std::string NoteKey::sign(std::string_view header, std::string_view body) const {
  if (!impl_) return {};
  // A copy of the keyed context per note: the key's work is done once.
  EVP_MAC_CTX* c = EVP_MAC_CTX_dup(impl_->keyed);
  if (!c) return {};
  auto bytes = [](std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); };
  unsigned char out[EVP_MAX_MD_SIZE];
  std::size_t len = 0;
  bool ok = EVP_MAC_update(c, bytes(header), header.size()) && EVP_MAC_update(c, bytes("\n"), 1) &&
            EVP_MAC_update(c, bytes(body), body.size()) && EVP_MAC_final(c, out, &len, sizeof out);
  EVP_MAC_CTX_free(c);
  if (!ok) return {};
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (std::size_t i = 0; i < len; ++i) {
    hex.push_back(digits[out[i] >> 4]);
    hex.push_back(digits[out[i] & 15]);
  }
  return hex;
}

std::string write_commit_note(std::int64_t session, std::int64_t after, std::int64_t through,
                              const commit_record* record, const NoteKey& key) {
  auto text = header(session, after, through);
  if (!record || key.empty() || !travels(*record)) return text;
  std::string body = "{\"c\":[";
  for (std::size_t i = 0; i < record->changes.size(); ++i) {
    const auto& c = record->changes[i];
    if (i) body.push_back(',');
    body.push_back('[');
    json_out::put_int(body, static_cast<int>(c.type));
    body.push_back(',');
    json_out::put_int(body, c.parts);
    body.push_back(',');
    if (c.owner)
      put_ref(body, *c.owner);
    else
      body.append("null");
    body.push_back(',');
    append_row_json(body, c.row);
    body.push_back(']');
  }
  body.push_back(']');
  put_refs(body, "w", record->wakes);
  put_refs(body, "q", record->requeues);
  put_refs(body, "b", record->backoff_resets);
  json_out::put_key(body, "x");
  json_out::put_bool(body, record->edges_removed);
  body.push_back('}');
  if (text.size() + 2 + kMacHex + body.size() > kMaxCommitNoteBytes) return text;
  auto signature = key.sign(text, body);
  if (signature.size() != kMacHex) return text;
  text.append(1, ' ').append(signature).append(1, '\n').append(body);
  return text;
}

std::optional<std::int64_t> commit_note_session(std::string_view text) {
  std::size_t at = 0;
  std::int64_t session = 0;
  if (!read_int(text, at, session)) return std::nullopt;
  return session;
}

namespace {

/// Reads the header into `note`; returns where it ends, or nullopt when it does not read
/// (an older build's note, the session alone, ends after the session).
std::optional<std::size_t> read_header(std::string_view text, CommitNote& note) {
  std::size_t at = 0;
  if (!read_int(text, at, note.session)) return std::nullopt;
  if (at == text.size()) return at;
  std::int64_t after = 0, through = 0;
  if (text[at] != ' ' || !read_int(text, ++at, after) || at >= text.size() || text[at] != ' ' ||
      !read_int(text, ++at, through) || after > through)
    return std::nullopt;
  note.after = after;
  note.through = through;
  return at;
}

}  // namespace

std::string trusted_commit_note(std::string_view text, const NoteKey& key) {
  CommitNote note;
  auto end = read_header(text, note);
  if (!end) return std::string(text);  // no record read from it either
  auto parts = split(text, *end);
  if (!parts || parts->signature.empty()) return std::string(text.substr(0, *end));
  auto expected = key.sign(parts->header, parts->body);
  if (expected.size() == kMacHex &&
      CRYPTO_memcmp(expected.data(), parts->signature.data(), kMacHex) == 0)
    return std::string(text);
  return std::string(parts->header);
}

CommitNote read_commit_note(std::string_view text) {
  CommitNote note;
  auto end = read_header(text, note);
  if (!end || note.after < 0) return note;
  auto parts = split(text, *end);
  if (!parts || parts->body.empty()) return note;
  try {
    auto j = Json::parse(parts->body);
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
      auto rv = change.row.meta.resource_version;
      if (rv <= note.after || rv > note.through) return note;
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
