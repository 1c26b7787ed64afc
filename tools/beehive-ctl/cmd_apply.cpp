// `apply -f FILE|-`: creates or updates objects by slug from JSON documents
// {group, kind, slug, spec, labels}, one object or an array of them.
//
// Every document is checked before the first write, by the library's own rules for
// names and labels too, so that a malformed file writes nothing. Then each is applied in
// order, in its own transaction, spec and labels together (as `kubectl apply` does: an
// error stops the command, the documents before it stay applied). The kind is taken
// literally from the document, not resolved: apply may create a kind's first object.

#include <fstream>
#include <iostream>
#include <iterator>

#include <beehive/detail/codec.hpp>
#include <beehive/errors.hpp>

#include "commands.hpp"
#include "failure.hpp"
#include "names.hpp"
#include "selector.hpp"
#include "store/label_selector.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace beehive::ctl {

namespace {

struct Document {
  GroupKind gk;
  std::string slug;
  nlohmann::json spec;
  std::optional<Labels> labels;  ///< absent: an update leaves the labels as they are
};

std::string read_input(const std::string& file) {
  if (file == "-")
    return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  std::ifstream in(file, std::ios::binary);
  if (!in) throw NotFound("cannot read " + file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string required_string(const nlohmann::json& d, const char* key, const std::string& where) {
  auto it = d.find(key);
  if (it == d.end() || !it->is_string())
    throw std::runtime_error(where + ": \"" + key + "\" must be a string");
  return it->get<std::string>();
}

/// What the library would refuse only once writing (a name too long or not UTF-8, a
/// label Kubernetes' rules refuse), refused here before any document is written.
void check_document(const Document& doc, const std::string& where) {
  try {
    require_name(doc.gk.group, "group");
    require_name(doc.gk.kind, "kind");
    require_name(doc.slug, "slug");
    if (doc.labels) store::validate_labels(*doc.labels);
  } catch (const Error& e) {
    throw Error(e.value(), where + ": " + (e.message().empty() ? e.what() : e.message()));
  }
}

Document parse_document(const nlohmann::json& d, const std::string& where) {
  if (!d.is_object())
    throw std::runtime_error(where + ": expected an object {group, kind, slug, spec, labels}");
  for (auto& [key, value] : d.items())
    if (key != "group" && key != "kind" && key != "slug" && key != "spec" && key != "labels")
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
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number like 1e400
    throw std::runtime_error(name + " is not valid JSON: " + e.what());
  }
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

/// Applies one document; returns what happened: created, configured or unchanged.
const char* apply_one(WriteSession& ws, const Document& doc) {
  auto client = ws.client(doc.gk);
  auto& ctx = ws.context();
  std::optional<JsonClient::ObjectType> before;
  try {
    before = client.get_by_slug(ctx, doc.slug);
  } catch (const Error& e) {
    if (e.code() != make_error_code(errc::not_found)) throw;
  }
  // The labels go with a creation, and are replaced separately on an update: one
  // transaction, so that a failure of either leaves the object as it was.
  JsonClient::ObjectType after;
  ws.within([&](const Context& tx) {
    after =
        client.create_or_update(tx, doc.slug, doc.spec, with_labels(doc.labels.value_or(Labels{})));
    if (doc.labels && after.labels != *doc.labels)
      after = client.set_labels(tx, after.id, *doc.labels);
  });
  if (!before) return "created";
  return after.resource_version == before->resource_version ? "unchanged" : "configured";
}

}  // namespace

int run_apply(WriteSession& ws, const ApplyOptions& o, std::ostream& out) {
  auto docs = parse_documents(read_input(o.file), o.file);
  for (auto& doc : docs) {
    auto what = apply_one(ws, doc);
    out << printable(kind_name(doc.gk) + '/' + doc.slug) << ' ' << what << std::endl;
  }
  return 0;
}

}  // namespace beehive::ctl
