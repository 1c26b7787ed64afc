// beehive-ctl: inspects a beehive database (a SQLite file, or a PostgreSQL schema) while
// the application runs (kinds, get, describe, events, watch: read-only), and writes to it
// through the library (apply, delete, label, requeue), which a running application picks
// up from the change log.
//
// Exit status: 0 success; 1 not found, conflict or another runtime error (message on
// stderr); 2 usage, a malformed label selector or continue token included.

#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include <beehive/errors.hpp>

#include "commands.hpp"
#include "database.hpp"
#include "duration.hpp"
#include "failure.hpp"
#include "selector.hpp"
#include "terminal_text.hpp"
#include "writer.hpp"

namespace ctl = beehive::ctl;

namespace {

const std::map<std::string, ctl::Output>& output_names() {
  static const std::map<std::string, ctl::Output> names{{"table", ctl::Output::table},
                                                        {"json", ctl::Output::json}};
  return names;
}

const std::map<std::string, ctl::Naming>& naming_names() {
  static const std::map<std::string, ctl::Naming> names{
      {"either", ctl::Naming::either}, {"id", ctl::Naming::id}, {"slug", ctl::Naming::slug}};
  return names;
}

/// One of `names` (any case), turned into its enum's number for CLI11 to store; the
/// numbers themselves are not names (CLI11's CheckedTransformer takes them too).
template <class E>
CLI::Validator one_of(const std::map<std::string, E>& names) {
  std::string list;
  for (auto& [name, value] : names) list += (list.empty() ? "" : ", ") + name;
  return CLI::Validator(
      [&names, list](std::string& text) -> std::string {
        std::string lower = text;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto it = names.find(lower);
        if (it == names.end()) return "\"" + text + "\" is not one of " + list;
        text = std::to_string(static_cast<int>(it->second));
        return {};
      },
      "{" + list + "}");
}

CLI::Option* add_output(CLI::App* cmd, ctl::Output& output) {
  return cmd->add_option("-o,--output", output, "table (default) or json")
      ->transform(one_of(output_names()));
}

/// A whole number from `min` to `max`, checked before CLI11 converts it: its own checks
/// read the text as a double (a range printed to 300 digits), and a number past the
/// option's type would be stored saturated, another number than the one typed.
CLI::Validator whole_number(std::int64_t min, std::int64_t max) {
  auto range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        auto [stop, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || stop != end || ec == std::errc::invalid_argument)
          return "\"" + text + "\" is not a whole number";
        if (ec == std::errc::result_out_of_range || v < min || v > max)
          return text + " is out of range (" + range + ")";
        return {};
      },
      "INT " + range);
}

constexpr auto int_max = std::numeric_limits<int>::max();
constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();

/// KIND SLUG|ID [--resource-version RV], the arguments of delete, label and requeue.
void add_object_name(CLI::App* cmd, ctl::ObjectName& o, bool resource_version) {
  cmd->add_option("kind", o.kind, "KIND[.GROUP] or its plural, case-insensitive")->required();
  cmd->add_option("object", o.object, "SLUG or ID")->required();
  if (resource_version)
    cmd->add_option("--resource-version", o.resource_version,
                    "only if the object is still at this version (exit 1, conflict, otherwise)")
        ->check(whole_number(0, int64_max));
}

/// What the message says besides the library's explanation, for the errors a script
/// tells apart by it.
std::string error_text(const beehive::Error& e) {
  auto text = e.message().empty() ? std::string(e.what()) : e.message();
  using beehive::errc;
  if (e.code() == make_error_code(errc::conflict)) return "conflict: " + text;
  if (e.code() == make_error_code(errc::watch_too_old)) return "watch_too_old: " + text;
  if (e.code() == make_error_code(errc::watch_too_new)) return "watch_too_new: " + text;
  if (e.code() == make_error_code(errc::invalid_argument)) return "invalid argument: " + text;
  return text;
}

/// $BEEHIVE_DB and $BEEHIVE_PG stand in for --db and --pg when neither is given: an
/// explicit flag wins over the other backend's variable, so that an exported default does
/// not turn every explicit choice of the other backend into an error. A flag given empty
/// (a script's unset variable) is refused: the environment would otherwise pick a
/// database, maybe of the other backend. Returns whether the database came from the
/// environment.
bool database_from_env(const CLI::App& app, std::string& db_file, std::string& conninfo) {
  bool db_given = app.get_option("--db")->count() > 0;
  bool pg_given = app.get_option("--pg")->count() > 0;
  if (db_given && db_file.empty()) throw ctl::UsageError("--db: the file name is empty");
  if (pg_given && conninfo.empty()) throw ctl::UsageError("--pg: the connection string is empty");
  if (db_given || pg_given) return false;
  if (const char* v = std::getenv("BEEHIVE_DB")) db_file = v;
  if (const char* v = std::getenv("BEEHIVE_PG")) conninfo = v;
  return true;
}

/// Whether `flag` is on the command line itself (as `--flag VALUE` or `--flag=VALUE`),
/// not filled in from its environment variable.
bool typed(int argc, char** argv, std::string_view flag) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == flag ||
        (a.size() > flag.size() && a.substr(0, flag.size()) == flag && a[flag.size()] == '='))
      return true;
  }
  return false;
}

/// A command's status, unless what it printed could not be written (a full disk, a
/// closed pipe): a script reading its output must not take a cut-off one for the whole.
int finish(int status) {
  std::cout.flush();
  if (std::cout) return status;
  std::cerr << "beehive-ctl: cannot write the output\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Inspects a beehive database, a SQLite file (--db) or a PostgreSQL schema (--pg), "
      "read-only (kinds, get, describe, events, watch), and writes to it (apply, delete, "
      "label, requeue); safe while the application runs."};
  app.name("beehive-ctl");
  app.set_version_flag(
      "--version", std::string("beehive-ctl ") + BEEHIVE_VERSION + " (schema versions: SQLite " +
                       std::to_string(ctl::sqlite_schema_version()) + ", PostgreSQL " +
                       std::to_string(ctl::postgres_schema_version()) + ")");
  app.require_subcommand(1);
  // --db may follow the command too: `beehive-ctl get Widget --db app.db`.
  app.fallthrough();

  ctl::Location where;
  std::string db_file;
  std::string busy_timeout = "5s";
  // Not CLI11's envname: it would fill --pg from $BEEHIVE_PG beside an explicit --db
  // (see database_from_env).
  app.add_option("--db", db_file, "the database file (SQLite); default $BEEHIVE_DB");
  app.add_option("--pg", where.conninfo,
                 "instead of --db: a PostgreSQL database, as a libpq connection string "
                 "(keywords or postgresql:// URI); default $BEEHIVE_PG");
  app.add_option("--schema", where.schema,
                 "with --pg: the schema holding the store (default beehive)")
      ->envname("BEEHIVE_PG_SCHEMA");
  app.add_option("--by", where.naming,
                 "how SLUG|ID arguments are read: either (an id when one of the kind has it, "
                 "else a slug; refused when it names one object by id and another by slug), "
                 "id or slug")
      ->transform(one_of(naming_names()));
  app.add_option("--busy-timeout", busy_timeout,
                 "how long a read waits for a lock SQLite reports busy; with --pg, how long "
                 "a connection attempt may take (default 5s)");

  ctl::Output kinds_output = ctl::Output::table;
  auto* kinds = app.add_subcommand("kinds", "Kinds present, with object counts");
  add_output(kinds, kinds_output);

  ctl::GetOptions get;
  auto* get_cmd = app.add_subcommand("get", "A table of objects, or the objects as JSON");
  get_cmd->add_option("kind", get.kind, "KIND[.GROUP] or its plural, case-insensitive")->required();
  get_cmd->add_option("object", get.object, "SLUG or ID (default: every object of the kind)");
  get_cmd->add_option("-l,--selector", get.selector,
                      "label selector: a=b, a!=b, a in (x,y), a notin (x), a, !a; comma = AND");
  get_cmd->add_option("--owner", get.owner, "only objects owned by KIND[.GROUP]/SLUG|ID");
  get_cmd->add_option("--limit", get.limit, "at most N objects; the continue token goes to stderr")
      ->check(whole_number(1, int64_max));
  get_cmd->add_option("--continue", get.continue_token, "the page after the one TOKEN ended");
  add_output(get_cmd, get.output);

  ctl::DescribeOptions describe;
  auto* describe_cmd = app.add_subcommand(
      "describe", "One object: spec, status, conditions, finalizers, relations, events");
  describe_cmd->add_option("kind", describe.kind, "KIND[.GROUP] or its plural, case-insensitive")
      ->required();
  describe_cmd->add_option("object", describe.object, "SLUG or ID")->required();
  describe_cmd->add_option("--events", describe.events, "newest event runs shown (default 20)")
      ->check(whole_number(0, int_max));

  ctl::EventsOptions events;
  auto* events_cmd = app.add_subcommand("events", "An object's event runs, newest first");
  events_cmd
      ->add_option("kind", events.kind,
                   "KIND[.GROUP] or its plural, case-insensitive (alone: an object ID)")
      ->required();
  events_cmd->add_option("object", events.object, "SLUG or ID");
  events_cmd->add_option("--category", events.category, "only this timeline");
  events_cmd->add_option("--limit", events.limit, "at most this many runs")
      ->check(whole_number(1, int_max));
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
      ->check(whole_number(1, int_max));
  watch_cmd
      ->add_option("--resume-from", watch.resume_from,
                   "the changes after this resource version, without the EXISTING rows")
      ->check(whole_number(0, int64_max));

  ctl::ApplyOptions apply;
  auto* apply_cmd = app.add_subcommand("apply",
                                       "Creates or updates objects by slug from JSON {group, kind, "
                                       "slug, spec, spec_version, labels} "
                                       "documents (one, or an array)");
  apply_cmd->add_option("-f,--filename", apply.file, "the JSON file, - for standard input")
      ->required();

  ctl::ObjectName remove;
  auto* delete_cmd = app.add_subcommand("delete", "Requests an object's deletion");
  add_object_name(delete_cmd, remove, true);

  ctl::ObjectName requeue;
  auto* requeue_cmd = app.add_subcommand(
      "requeue", "Asks the kind's controller, wherever it runs, to reconcile the object");
  add_object_name(requeue_cmd, requeue, false);
  bool reset_backoff = false;
  requeue_cmd->add_flag("--reset-backoff", reset_backoff,
                        "and forget the object's retry backoff (its next failure waits the "
                        "first step again)");

  ctl::LabelOptions label;
  auto* label_cmd =
      app.add_subcommand("label", "Sets (KEY=VALUE) and removes (KEY-) an object's labels");
  add_object_name(label_cmd, label.target, true);
  label_cmd->add_option("changes", label.changes, "KEY=VALUE or KEY-")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    // A word where the command goes ("gett"): name it, rather than CLI11's "A subcommand
    // is required".
    if (auto extra = app.remaining(); !extra.empty() && app.get_subcommands().empty()) {
      std::cerr << "beehive-ctl: unknown command \"" << beehive::printable(extra.front(), true)
                << "\"\nRun with --help for more information.\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the help, or the error with a hint
    return e.get_exit_code() == 0 ? 0 : 2;
  }

  try {
    bool from_env = database_from_env(app, db_file, where.conninfo);
    where.timeout = ctl::parse_duration(busy_timeout);
    // SQLite's busy timeout and libpq's waits are ints of milliseconds; a connection
    // attempt needs at least one.
    if (where.timeout.count() > int_max)
      throw ctl::UsageError("--busy-timeout: at most 2147483647ms (about 24.8 days)");
    if (!where.conninfo.empty() && where.timeout.count() == 0)
      throw ctl::UsageError(
          "--busy-timeout: with --pg, at least 1ms (a connection attempt's limit)");
    if (db_file.empty() == where.conninfo.empty())
      throw ctl::UsageError(db_file.empty() ? "name the database: --db FILE or --pg CONNINFO"
                            : from_env
                                ? "$BEEHIVE_DB and $BEEHIVE_PG name two databases: unset one, "
                                  "or give --db or --pg"
                                : "--db and --pg name two databases: give one");
    // A schema typed beside a SQLite file was meant for something: say it is not used
    // (one from $BEEHIVE_PG_SCHEMA is the environment's, for PostgreSQL only).
    if (!db_file.empty() && typed(argc, argv, "--schema"))
      throw ctl::UsageError(
          "--schema names a PostgreSQL schema; a SQLite database (--db) has none");
    where.file = db_file;
    if (where.postgres()) ctl::check_postgres_location(where);
    if (*watch_cmd) {
      watch.interval = ctl::parse_duration(interval);
      if (watch.interval.count() == 0) throw ctl::UsageError("--interval must be positive");
      // Given empty (a script's unset variable) it is refused, not read as "forever".
      if (watch_cmd->get_option("--for")->count() > 0)
        watch.for_ = ctl::parse_duration(for_duration);
    }
    // Usage errors before the file is opened: status 2 whatever the file.
    if (*get_cmd) ctl::check_get_usage(get);
    if (*delete_cmd) ctl::check_kind_text(remove.kind);
    if (*requeue_cmd) ctl::check_kind_text(requeue.kind);
    if (*label_cmd) ctl::check_label_usage(label);
    // The write commands open the file writable, through the library; the others never do.
    if (*apply_cmd || *delete_cmd || *requeue_cmd || *label_cmd) {
      // A reader that went (`| head`) must not end the writes halfway: the report's lost
      // lines are a failed write to std::cout, which finish() reports.
      std::signal(SIGPIPE, SIG_IGN);
      if (*apply_cmd) ctl::read_apply_input(apply);  // before opening migrates anything
      ctl::WriteSession ws(where);
      if (*apply_cmd) return finish(ctl::run_apply(ws, apply, std::cout));
      if (*delete_cmd) return finish(ctl::run_delete(ws, remove, std::cout));
      if (*requeue_cmd) return finish(ctl::run_requeue(ws, requeue, reset_backoff, std::cout));
      return finish(ctl::run_label(ws, label, std::cout));
    }
    if (*describe_cmd) ctl::check_kind_text(describe.kind);
    if (*events_cmd) {
      ctl::check_events_usage(events);
      // `events ID` reads an id, whatever --by says: a slug needs its kind.
      if (!events.object && where.naming == ctl::Naming::slug)
        throw ctl::UsageError("events " + events.kind +
                              " reads an object id; with --by slug, give KIND SLUG");
    }
    if (*watch_cmd) ctl::check_kind_text(watch.kind);
    auto db = ctl::Database::open(where);
    // A read's output is written once its snapshot has ended: a pager that stops reading
    // must not hold the application's database (a SQLite log that cannot be checkpointed,
    // a PostgreSQL transaction holding back vacuum).
    auto printed = [](auto run) {
      std::ostringstream text;
      int status = run(text);
      std::cout << text.str();
      return finish(status);
    };
    if (*kinds) return printed([&](auto& out) { return ctl::run_kinds(*db, kinds_output, out); });
    if (*get_cmd) return printed([&](auto& out) { return ctl::run_get(*db, get, out); });
    if (*describe_cmd)
      return printed([&](auto& out) { return ctl::run_describe(*db, describe, out); });
    if (*events_cmd) return printed([&](auto& out) { return ctl::run_events(*db, events, out); });
    if (*watch_cmd) return finish(ctl::run_watch(*db, watch, std::cout));
    return 2;
  } catch (const ctl::UsageError& e) {
    std::cerr << "beehive-ctl: " << beehive::printable(e.what(), true)
              << "\nRun with --help for more information.\n";
    return 2;
  } catch (const beehive::Error& e) {
    std::cerr << "beehive-ctl: " << beehive::printable(error_text(e), true) << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "beehive-ctl: " << beehive::printable(e.what(), true) << '\n';
    return 1;
  }
}
