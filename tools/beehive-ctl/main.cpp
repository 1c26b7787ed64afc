// beehive-ctl: inspects a beehive database file, read-only, while the application runs.
//
// Exit status: 0 success, 1 not found or runtime error (message on stderr), 2 usage.

#include <iostream>

#include <CLI/CLI.hpp>

#include <beehive/errors.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "duration.hpp"
#include "failure.hpp"
#include "selector.hpp"

namespace ctl = beehive::ctl;

namespace {

const std::map<std::string, ctl::Output>& output_names() {
  static const std::map<std::string, ctl::Output> names{{"table", ctl::Output::table},
                                                        {"json", ctl::Output::json}};
  return names;
}

CLI::Option* add_output(CLI::App* cmd, ctl::Output& output) {
  return cmd->add_option("-o,--output", output, "table (default) or json")
      ->transform(CLI::CheckedTransformer(output_names(), CLI::ignore_case));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Inspects a beehive database without writing to it; safe while the "
      "application runs."};
  app.name("beehive-ctl");
  app.require_subcommand(1);
  // --db may follow the command too: `beehive-ctl get Widget --db app.db`.
  app.fallthrough();

  std::string db_file;
  std::string busy_timeout = "5s";
  app.add_option("--db", db_file, "the database file")->required()->envname("BEEHIVE_DB");
  app.add_option("--busy-timeout", busy_timeout,
                 "how long a read waits for a lock SQLite reports busy (default 5s)");

  ctl::Output kinds_output = ctl::Output::table;
  auto* kinds = app.add_subcommand("kinds", "Kinds present, with object counts");
  add_output(kinds, kinds_output);

  ctl::GetOptions get;
  auto* get_cmd = app.add_subcommand("get", "A table of objects, or the objects as JSON");
  get_cmd->add_option("kind", get.kind, "KIND[.GROUP] or its plural, case-insensitive")->required();
  get_cmd->add_option("object", get.object, "SLUG or ID (default: every object of the kind)");
  add_output(get_cmd, get.output);

  ctl::DescribeOptions describe;
  auto* describe_cmd = app.add_subcommand(
      "describe", "One object: spec, status, conditions, finalizers, relations, events");
  describe_cmd->add_option("kind", describe.kind, "KIND[.GROUP] or its plural, case-insensitive")
      ->required();
  describe_cmd->add_option("object", describe.object, "SLUG or ID")->required();
  describe_cmd->add_option("--events", describe.events, "newest event runs shown (default 20)")
      ->check(CLI::NonNegativeNumber);

  ctl::EventsOptions events;
  auto* events_cmd = app.add_subcommand("events", "An object's event runs, newest first");
  events_cmd
      ->add_option("kind", events.kind,
                   "KIND[.GROUP] or its plural, case-insensitive (alone: an object ID)")
      ->required();
  events_cmd->add_option("object", events.object, "SLUG or ID");
  events_cmd->add_option("--category", events.category, "only this timeline");
  events_cmd->add_option("--limit", events.limit, "at most this many runs")
      ->check(CLI::NonNegativeNumber);
  add_output(events_cmd, events.output);

  ctl::WatchOptions watch;
  std::string interval = "200ms", for_duration;
  auto* watch_cmd = app.add_subcommand(
      "watch",
      "The kind's objects (EXISTING), then a row per change (ADDED/MODIFIED/DELETED) in one "
      "table: EVENT ID SLUG GENERATION OBSERVED READY DELETING RESOURCE-VERSION");
  watch_cmd->add_option("kind", watch.kind, "KIND[.GROUP] or its plural, case-insensitive")
      ->required();
  watch_cmd->add_option("--interval", interval, "polling period (default 200ms)");
  watch_cmd->add_option("--for", for_duration, "stop after this long (e.g. 5s)");
  watch_cmd->add_option("--max-changes", watch.max_changes, "stop after this many changes")
      ->check(CLI::PositiveNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the help, or the error with a hint
    return e.get_exit_code() == 0 ? 0 : 2;
  }

  try {
    auto timeout = ctl::parse_duration(busy_timeout);
    if (*watch_cmd) {
      watch.interval = ctl::parse_duration(interval);
      if (watch.interval.count() == 0) throw ctl::UsageError("--interval must be positive");
      if (!for_duration.empty()) watch.for_ = ctl::parse_duration(for_duration);
    }
    // Usage errors before the file is opened: status 2 whatever the file.
    if (*get_cmd) ctl::check_kind_text(get.kind);
    if (*describe_cmd) ctl::check_kind_text(describe.kind);
    if (*events_cmd) ctl::check_events_usage(events);
    if (*watch_cmd) ctl::check_kind_text(watch.kind);
    ctl::Database db(db_file, timeout);
    if (*kinds) return ctl::run_kinds(db, kinds_output, std::cout);
    if (*get_cmd) return ctl::run_get(db, get, std::cout);
    if (*describe_cmd) return ctl::run_describe(db, describe, std::cout);
    if (*events_cmd) return ctl::run_events(db, events, std::cout);
    if (*watch_cmd) return ctl::run_watch(db, watch, std::cout);
    return 2;
  } catch (const ctl::UsageError& e) {
    std::cerr << "beehive-ctl: " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  } catch (const beehive::Error& e) {
    std::cerr << "beehive-ctl: " << (e.message().empty() ? e.what() : e.message()) << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "beehive-ctl: " << e.what() << '\n';
    return 1;
  }
}
