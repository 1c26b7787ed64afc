#pragma once

// The beehive-ctl commands. Each reads through `db`, writes its result to `out` and
// returns the exit status; failures are thrown (failure.hpp) and turned into messages
// and statuses by main.

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace beehive::ctl {

class Database;

enum class Output { table, json };

int run_kinds(Database& db, Output output, std::ostream& out);

struct GetOptions {
  std::string kind;                   ///< KIND[.GROUP]
  std::optional<std::string> object;  ///< SLUG|ID; all objects of the kind when empty
  Output output = Output::table;
};
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
};
/// Runs until SIGINT/SIGTERM or a bound; 0 in each case.
int run_watch(Database& db, const WatchOptions& o, std::ostream& out);

}  // namespace beehive::ctl
