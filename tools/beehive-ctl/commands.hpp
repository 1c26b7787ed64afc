#pragma once

// The beehive-ctl commands. The read commands read through `db` (read-only); the write
// commands (apply, delete, label, requeue) through a WriteSession (writer.hpp). Each writes
// its result to `out` and returns the exit status; failures are thrown (failure.hpp) and
// turned into messages and statuses by main.

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace beehive::ctl {

class Database;
class WriteSession;

enum class Output { table, json };

int run_kinds(Database& db, Output output, std::ostream& out);

struct GetOptions {
  std::string kind;                   ///< KIND[.GROUP]
  std::optional<std::string> object;  ///< SLUG|ID; all objects of the kind when empty
  Output output = Output::table;
  std::string selector;              ///< -l: a label selector, Kubernetes syntax
  std::optional<std::string> owner;  ///< --owner KIND[.GROUP]/SLUG|ID
  std::size_t limit = 0;             ///< --limit: a page of at most this many (0: all)
  std::string continue_token;        ///< --continue: the page after the one it ended
  /// A listing narrowed or paged (-l, --owner, --limit, --continue).
  bool selecting() const { return !selector.empty() || owner || limit || !continue_token.empty(); }
};
/// Throws UsageError for a malformed selector or continue token, or a name combined with
/// a selection; main calls it before opening the database.
void check_get_usage(const GetOptions& o);
int run_get(Database& db, const GetOptions& o, std::ostream& out);

struct DescribeOptions {
  std::string kind;
  std::string object;
  int events = 20;  ///< newest event runs shown
};
int run_describe(Database& db, const DescribeOptions& o, std::ostream& out);

struct EventsOptions {
  /// KIND[.GROUP]; alone and all digits, an object id of any kind (the older `events ID`).
  std::string kind;
  std::optional<std::string> object;  ///< SLUG|ID
  std::optional<std::string> category;
  int limit = 0;  ///< 0 = all
  Output output = Output::table;
};
/// Throws UsageError when `o` names no object (a lone token that is not an id). main calls
/// it before opening the database, so that the status is 2 whatever the file.
void check_events_usage(const EventsOptions& o);
int run_events(Database& db, const EventsOptions& o, std::ostream& out);

struct WatchOptions {
  std::string kind;
  std::chrono::milliseconds interval{200};
  std::optional<std::chrono::milliseconds> for_;  ///< stop after this long
  std::optional<int> max_changes;                 ///< stop after this many change lines
  /// Start after this resource version, without the EXISTING rows.
  std::optional<std::int64_t> resume_from;
};
/// Runs until SIGINT/SIGTERM or a bound; 0 in each case.
int run_watch(Database& db, const WatchOptions& o, std::ostream& out);

struct ApplyOptions {
  std::string file;  ///< "-": standard input
  std::string text;  ///< what read_apply_input read from it
};
/// Reads and checks the input before the store is opened: an input that cannot be read
/// or does not parse changes nothing, not even an older schema's version.
void read_apply_input(ApplyOptions& o);
int run_apply(WriteSession& ws, const ApplyOptions& o, std::ostream& out);

/// An object named on the command line, for the write commands.
struct ObjectName {
  std::string kind;    ///< KIND[.GROUP] or its plural, resolved as for reads
  std::string object;  ///< SLUG|ID
  std::optional<std::int64_t> resource_version;  ///< precondition: conflict otherwise
};
int run_delete(WriteSession& ws, const ObjectName& o, std::ostream& out);
/// With `reset_backoff`, the controller also forgets the object's retry backoff.
int run_requeue(WriteSession& ws, const ObjectName& o, bool reset_backoff, std::ostream& out);

struct LabelOptions {
  ObjectName target;
  std::vector<std::string> changes;  ///< "k=v" sets k, "k-" removes k
};
/// Throws UsageError for a change that is neither k=v nor k-, or a bad key or value.
void check_label_usage(const LabelOptions& o);
int run_label(WriteSession& ws, const LabelOptions& o, std::ostream& out);

}  // namespace beehive::ctl
