// `label KIND[.GROUP] SLUG|ID k=v k2- [--resource-version RV]`: sets and removes labels,
// keeping the others (kubectl label; values are overwritten without --overwrite, since
// beehive has no annotation-like second map to protect).

#include <set>

#include <beehive/errors.hpp>

#include "commands.hpp"
#include "failure.hpp"
#include "render.hpp"
#include "selector.hpp"
#include "store/label_selector.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace beehive::ctl {

namespace {

struct LabelChange {
  std::string key;
  std::optional<std::string> value;  ///< absent: remove the key
};

LabelChange parse_change(const std::string& text) {
  LabelChange c;
  if (auto eq = text.find('='); eq != std::string::npos) {
    c.key = text.substr(0, eq);
    c.value = text.substr(eq + 1);
  } else if (!text.empty() && text.back() == '-') {
    c.key = text.substr(0, text.size() - 1);
  } else {
    throw UsageError("\"" + text + "\" is neither KEY=VALUE nor KEY-");
  }
  // Bad keys and values are the command line's fault: status 2, before any write.
  try {
    store::validate_label_key(c.key);
    if (c.value) store::validate_label_value(*c.value);
  } catch (const Error& e) {
    throw UsageError(e.message().empty() ? e.what() : e.message());
  }
  return c;
}

}  // namespace

void check_label_usage(const LabelOptions& o) {
  check_kind_text(o.target.kind);
  // Two changes of one key contradict each other, or one is redundant: which one was
  // meant is the user's to say (kubectl refuses them too).
  std::set<std::string> keys;
  for (auto& text : o.changes)
    if (auto c = parse_change(text); !keys.insert(c.key).second)
      throw UsageError("label \"" + c.key + "\" is changed twice in one command");
}

int run_label(WriteSession& ws, const LabelOptions& o, std::ostream& out) {
  auto gk = resolve_kind(ws.db(), o.target.kind);
  auto client = ws.client(gk);
  auto& ctx = ws.context();
  // Read, change, write with the version read as precondition, so that a label set by
  // someone else in between is never overwritten: on a conflict, read again (a few
  // times). With --resource-version, the caller's version is the precondition instead,
  // and a conflict is the answer.
  for (int attempt = 0;; ++attempt) {
    auto row = find_object(ws.db(), gk, o.target.object);
    auto labels = row.meta.labels;
    for (auto& text : o.changes) {
      auto c = parse_change(text);
      if (c.value)
        labels[c.key] = *c.value;
      else
        labels.erase(c.key);
    }
    try {
      auto rv = o.target.resource_version.value_or(row.meta.resource_version);
      auto after = client.set_labels(ctx, row.meta.id, labels, with_resource_version(rv));
      bool changed = after.resource_version != row.meta.resource_version;
      out << printable(object_name(row.meta)) << (changed ? " labeled" : " unchanged") << std::endl;
      return 0;
    } catch (const Error& e) {
      if (e.code() != make_error_code(errc::conflict) || o.target.resource_version || attempt >= 4)
        throw;
    }
  }
}

}  // namespace beehive::ctl
