// `apply -f FILE|-`: creates or updates objects by slug from JSON documents
// {group, kind, slug, spec, spec_version, labels}, one object or an array of them.
//
// Every document is checked before the first write, by the library's own rules for
// names and labels too, so that a malformed file writes nothing. Then each is applied in
// order, in its own transaction, spec and labels together (as `kubectl apply` does: an
// error stops the command, the documents before it stay applied). The kind is taken
// literally from the document, not resolved: apply may create a kind's first object.

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>

#include "commands.hpp"
#include "failure.hpp"
#include "names.hpp"
#include "selector.hpp"
#include "store/label_selector.hpp"
#include "store/object_limits.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace beehive::ctl {

namespace {

struct Document {
  GroupKind gk;
  std::string slug;
  nlohmann::json spec;
  /// The schema version the spec is written in; absent: 0, for a kind none of whose
  /// specs is versioned (check_versions refuses it for the others).
  std::optional<int> spec_version;
  std::optional<Labels> labels;  ///< absent: an update leaves the labels as they are
};

/// The most input apply reads: far above any real batch of documents (a spec or a
/// label set is at most 8 MiB), and a mistyped -f (/dev/zero, a log) ends here instead
/// of exhausting the host's memory.
constexpr std::size_t max_input = 64u << 20;

std::string read_all(std::istream& in, const std::string& name) {
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_input)
      throw std::runtime_error(name + ": more than 64 MiB of input; apply it in parts");
  }
  // A failed read (libstdc++'s filebuf throws, and read() turns it into badbit).
  if (in.bad()) throw std::runtime_error("cannot read " + name + ": " + std::strerror(errno));
  return text;
}

std::string read_input(const std::string& file) {
  if (file == "-") return read_all(std::cin, "standard input");
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw NotFound("cannot read " + file + ": a directory");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw NotFound("cannot read " + file + ": " + std::strerror(errno));
  return read_all(in, file);
}

/// Parses `text`, refusing an object with two members of one name: JSON leaves which
/// one counts to the reader, and the tool would silently take the last.
nlohmann::json parse_unique_members(const std::string& text, const std::string& name) {
  struct Duplicate {
    std::string member;
  };
  std::vector<std::set<std::string>> open;  // the members of each object being read
  auto check = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open.emplace_back();
    if (event == E::object_end && !open.empty()) open.pop_back();
    if (event == E::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second)
      throw Duplicate{parsed.get<std::string>()};
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const Duplicate& d) {
    throw std::runtime_error(name + " is not valid input: the member \"" + d.member +
                             "\" appears twice in one object");
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number like 1e400
    // Without nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string what = e.what();
    if (auto end = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && end != std::string::npos)
      what.erase(0, end + 2);
    throw std::runtime_error(name + " is not valid JSON: " + what);
  }
}

std::string required_string(const nlohmann::json& d, const char* key, const std::string& where) {
  auto it = d.find(key);
  if (it == d.end() || !it->is_string())
    throw std::runtime_error(where + ": \"" + key + "\" must be a string");
  return it->get<std::string>();
}

/// What the library would refuse only once writing (a name too long or not UTF-8, a
/// label Kubernetes' rules refuse, a spec or labels over the size limit), refused here
/// before any document is written.
void check_document(const Document& doc, const std::string& where) {
  try {
    require_name(doc.gk.group, "group");
    require_name(doc.gk.kind, "kind");
    require_name(doc.slug, "slug");
    auto require_within = [](std::size_t size, const char* what) {
      if (size > store::default_max_object_bytes)
        throw Error(errc::invalid_argument, std::string(what) + " of " + std::to_string(size) +
                                                " bytes is over the limit of " +
                                                std::to_string(store::default_max_object_bytes));
    };
    if (doc.labels) {
      store::validate_labels(*doc.labels);
      std::size_t bytes = 0;
      for (const auto& [key, value] : *doc.labels) bytes += key.size() + value.size();
      require_within(bytes, "labels");
    }
    require_within(doc.spec.dump().size(), "a spec");
  } catch (const Error& e) {
    throw Error(e.value(), where + ": " + (e.message().empty() ? e.what() : e.message()));
  }
}

Document parse_document(const nlohmann::json& d, const std::string& where) {
  if (!d.is_object())
    throw std::runtime_error(
        where + ": expected an object {group, kind, slug, spec, spec_version, labels}");
  for (auto& [key, value] : d.items())
    if (key != "group" && key != "kind" && key != "slug" && key != "spec" &&
        key != "spec_version" && key != "labels")
      throw std::runtime_error(where + ": unknown member \"" + key + "\"");
  Document doc;
  // The core group may be left out.
  doc.gk.group = d.contains("group") ? required_string(d, "group", where) : "";
  doc.gk.kind = required_string(d, "kind", where);
  doc.slug = required_string(d, "slug", where);
  // An empty slug is a slug like any other (the library's); an empty kind names none.
  if (doc.gk.kind.empty()) throw std::runtime_error(where + ": \"kind\" must not be empty");
  if (!d.contains("spec")) throw std::runtime_error(where + ": \"spec\" is missing");
  doc.spec = d["spec"];
  if (auto it = d.find("spec_version"); it != d.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > std::numeric_limits<int>::max())
      throw std::runtime_error(where + ": \"spec_version\" must be an integer from 0 to " +
                               std::to_string(std::numeric_limits<int>::max()));
    doc.spec_version = it->get<int>();
  }
  if (auto it = d.find("labels"); it != d.end()) {
    if (!it->is_object())
      throw std::runtime_error(where + ": \"labels\" must be an object of strings");
    Labels labels;
    for (auto& [k, v] : it->items()) {
      if (!v.is_string())
        throw std::runtime_error(where + ": label \"" + k + "\" must have a string value");
      labels[k] = v.get<std::string>();
    }
    doc.labels = std::move(labels);
  }
  check_document(doc, where);
  return doc;
}

std::vector<Document> parse_documents(const std::string& text, const std::string& file) {
  auto name = file == "-" ? std::string("<stdin>") : file;
  auto j = parse_unique_members(text, name);
  // What parses may still lose digits (an integer beyond 64 bits becomes a double) or
  // nest deeper than beehive stores: refused before anything is written.
  detail::require_json_text(text, name);
  std::vector<Document> docs;
  if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      docs.push_back(parse_document(j[i], name + " [" + std::to_string(i) + "]"));
  } else {
    docs.push_back(parse_document(j, name));
  }
  return docs;
}

/// A spec without a version, for a kind whose application versions its specs (a
/// Migrator): written at version 0, it would be converted as the oldest format there is.
/// Which version the document is in, only its author knows: refused before any write
/// when the kind has versioned specs stored, or another document of the input versions
/// the kind. (A kind none of whose stored specs is versioned cannot be told from an
/// unversioned one.)
///
/// A spec older than the one stored for its object (or written by an earlier document of
/// the input) would be refused as a downgrade while writing, after the documents before
/// it were applied: refused here too, before any write.
void check_versions(Database& db, const std::vector<Document>& docs, const std::string& file) {
  std::set<GroupKind> stated;
  for (auto& doc : docs)
    if (doc.spec_version) stated.insert(doc.gk);
  std::map<GroupKind, int> newest;
  std::map<std::pair<GroupKind, std::string>, int> written;  // by earlier documents
  for (std::size_t i = 0; i < docs.size(); ++i) {
    auto& doc = docs[i];
    auto where = (file == "-" ? std::string("<stdin>") : file) +
                 (docs.size() > 1 ? " [" + std::to_string(i) + "]" : std::string());
    if (doc.spec_version) {
      auto [at, first] = written.try_emplace({doc.gk, doc.slug}, 0);
      if (first)
        if (auto row = db.reader().get_by_slug(doc.gk, doc.slug)) at->second = row->spec_version;
      if (at->second > *doc.spec_version)
        throw std::runtime_error(where + ": " + printable(kind_name(doc.gk) + '/' + doc.slug) +
                                 ": spec stored at schema version " + std::to_string(at->second) +
                                 " cannot be overwritten at version " +
                                 std::to_string(*doc.spec_version));
      at->second = *doc.spec_version;
      continue;
    }
    auto say = std::string(": say which version this spec is written in (\"spec_version\")");
    auto [it, fresh] = newest.try_emplace(doc.gk, 0);
    if (fresh) it->second = db.newest_spec_version(doc.gk);
    if (it->second > 0)
      throw std::runtime_error(where + ": " + printable(kind_name(doc.gk)) +
                               " has specs stored at schema version " + std::to_string(it->second) +
                               say);
    if (stated.count(doc.gk))
      throw std::runtime_error(where + ": other documents give " + printable(kind_name(doc.gk)) +
                               " specs a schema version" + say);
  }
}

/// Applies one document; returns what happened: created, configured or unchanged.
const char* apply_one(WriteSession& ws, const Document& doc) {
  auto client = ws.client(doc.gk);
  std::optional<JsonClient::ObjectType> before;
  // The labels go with a creation, and are replaced separately on an update: one
  // transaction, so that a failure of either leaves the object as it was. The object
  // as it was is read in it too: another process's write in between would make the
  // report lie (created for an object it made, configured for one it changed).
  ObjectRow after;
  ws.within([&](const Context& tx) {
    try {
      before = client.get_by_slug(tx, doc.slug);
    } catch (const Error& e) {
      if (e.code() != make_error_code(errc::not_found)) throw;
    }
    after = ws.create_or_update(tx, doc.gk, doc.slug, doc.spec, doc.spec_version.value_or(0),
                                doc.labels.value_or(Labels{}));
    if (doc.labels && after.meta.labels != *doc.labels)
      after = ws.set_labels(tx, doc.gk, after.meta.id, *doc.labels);
  });
  if (!before) return "created";
  return after.meta.resource_version == before->resource_version ? "unchanged" : "configured";
}

}  // namespace

void read_apply_input(ApplyOptions& o) {
  o.text = read_input(o.file);
  (void)parse_documents(o.text, o.file);
}

int run_apply(WriteSession& ws, const ApplyOptions& o, std::ostream& out) {
  auto docs = parse_documents(o.text, o.file);
  check_versions(ws.db(), docs, o.file);
  for (auto& doc : docs) {
    auto what = apply_one(ws, doc);
    out << printable(kind_name(doc.gk) + '/' + doc.slug) << ' ' << what << std::endl;
  }
  return 0;
}

}  // namespace beehive::ctl
