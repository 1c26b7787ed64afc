#include "database.hpp"

#include "failure.hpp"

namespace beehive::ctl {

std::string Location::name() const {
  return postgres() ? "schema \"" + schema + "\"" : file.string();
}

void require_store(const Location& where) {
  if (where.postgres()) return require_postgres_store(where);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(where.file, ec))
    throw NotFound("no such database file: " + where.file.string());
}

void require_schema_version(const std::string& name, int version, int latest) {
  if (version > latest)
    throw std::runtime_error(name + " was written by a newer beehive (schema " +
                             std::to_string(version) + ", this build reads " +
                             std::to_string(latest) + ")");
  // The tool is newer than the application that wrote the store: the way to read it is
  // the application's own beehive-ctl. Migrating is one-way (the older application could
  // no longer open it), so it is named as such, not advised.
  if (version < latest)
    throw std::runtime_error(
        name + " has the older schema " + std::to_string(version) + " (this beehive-ctl reads " +
        std::to_string(latest) +
        "): read it with the beehive-ctl of the application's own build. The read commands "
        "never write; opening it with a newer application, or with a write command of this "
        "tool, migrates it for good, and the older application could no longer open it");
}

std::string migration_refusal(const std::string& name, int version, int latest) {
  return name + " has the older schema " + std::to_string(version) + " (this build writes " +
         std::to_string(latest) +
         ") and a process runs on it (an application, or another beehive-ctl): a write "
         "command would migrate it, and an application of the older build could then no "
         "longer write; stop it first, or use the beehive-ctl of its own build";
}

std::unique_ptr<Database> Database::open(const Location& where) {
  require_store(where);
  return where.postgres() ? open_postgres_database(where) : open_sqlite_database(where);
}

}  // namespace beehive::ctl
