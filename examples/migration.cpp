// Schema migration: changing the shape of a spec without rewriting the database.
//
// Release 1 of an application stores contacts as {"name": "Ada Lovelace", "email": ...}
// (spec schema version 1). Release 2 splits the name: {"first_name", "last_name", "email"}
// (spec schema version 2). Its Migrator converts old blobs on read, before they are decoded;
// nothing is converted in bulk. A blob is re-stamped at the new version only when it is
// written again, and each column (spec, status) keeps its own version.
//
// The program plays three "processes" over one file, ./var/migration.db (recreated on every
// run): release 1 writes, release 2 reads and writes, and release 1 comes back to show which
// rows were rewritten (a row written by release 2 is refused by release 1: a downgrade).

#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <beehive/beehive.hpp>

using namespace std::chrono_literals;

const beehive::GroupKind contact_kind{"example.com", "Contact"};

// --- release 1 --------------------------------------------------------------------------

struct ContactV1 {
  std::string name;
  std::string email;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ContactV1, name, email)

struct ContactStatus {  // unchanged between the releases
  std::string greeting;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ContactStatus, greeting)

// Version 0 means "written without a migrator"; once a migrator is attached, its converters
// must accept from == 0. Release 1 versioned its kind from the start, so 0 never occurs in
// practice and passes through.
class MigratorV1 : public beehive::Migrator {
 public:
  int schema_version_spec() const override { return 1; }
  int schema_version_status() const override { return 1; }
  nlohmann::json convert_spec(int, nlohmann::json raw) const override { return raw; }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }
};

// --- release 2 --------------------------------------------------------------------------

struct ContactV2 {
  std::string first_name;
  std::string last_name;
  std::string email;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ContactV2, first_name, last_name, email)

// Called on every read of an older blob, from several threads: keep it pure (the counter is
// only here to show when conversion happens).
class MigratorV2 : public beehive::Migrator {
 public:
  int schema_version_spec() const override { return 2; }
  int schema_version_status() const override { return 1; }  // status did not change

  nlohmann::json convert_spec(int from, nlohmann::json raw) const override {
    ++conversions;
    if (from <= 1) {  // versions 0 and 1: {"name": "First Last", "email": ...}
      auto name = raw.at("name").get<std::string>();
      auto space = name.find(' ');
      raw["first_name"] = name.substr(0, space);
      raw["last_name"] = space == std::string::npos ? "" : name.substr(space + 1);
      raw.erase("name");
    }
    return raw;
  }
  nlohmann::json convert_status(int, nlohmann::json raw) const override { return raw; }

  mutable std::atomic<int> conversions{0};
};

// --- helpers ----------------------------------------------------------------------------

const std::filesystem::path db_file = "var/migration.db";

std::string show(const ContactV2& c) {
  return c.first_name + " / " + c.last_name + " <" + c.email + ">";
}

// Every controller here does the same: greet the contact, settling its generation.
template <class Spec>
beehive::Result greet(const beehive::Context& ctx, beehive::ControllerClient<ContactStatus>& cc,
                      const beehive::Object<Spec, ContactStatus>& o) {
  std::string name;
  if constexpr (requires { o.spec.first_name; })
    name = o.spec.first_name;
  else
    name = o.spec.name;
  cc.update_status(ctx, o.id, o.generation, ContactStatus{"Hello, " + name});
  return {};
}

// --- the three processes ----------------------------------------------------------------

void release_1_writes() {
  std::cout << "== release 1: writes spec version 1\n";
  auto store = beehive::sqlite::open(db_file);
  beehive::Beehive bh(store);
  // A migrator is attached where the controller is registered.
  beehive::register_controller<ContactV1, ContactStatus>(
      bh, contact_kind, greet<ContactV1>, beehive::with_migrator(std::make_shared<MigratorV1>()));
  beehive::Client<ContactV1, ContactStatus> contacts(bh, contact_kind);
  beehive::Context ctx;
  for (auto [slug, name, email] : {std::tuple{"ada", "Ada Lovelace", "ada@example.com"},
                                   std::tuple{"grace", "Grace Hopper", "grace@example.com"},
                                   std::tuple{"alan", "Alan Turing", "alan@example.com"}}) {
    contacts.create(ctx, {name, email}, beehive::with_slug(slug));
    std::cout << "  created " << slug << ": {\"name\": \"" << name << "\", ...}\n";
  }
}

void release_2_reads_and_writes() {
  std::cout << "\n== release 2: reads version 1, writes spec version 2\n";
  auto store = beehive::sqlite::open(db_file);
  beehive::Beehive bh(store);
  auto migrator = std::make_shared<MigratorV2>();
  beehive::register_controller<ContactV2, ContactStatus>(bh, contact_kind, greet<ContactV2>,
                                                         beehive::with_migrator(migrator));
  beehive::Client<ContactV2, ContactStatus> contacts(bh, contact_kind);
  beehive::Context ctx;

  // Lazy conversion: every read of a version-1 blob converts it, and reading writes nothing.
  for (const auto& c : contacts.list(ctx))
    std::cout << "  read " << c.slug.value_or("-") << ": " << show(c.spec) << "\n";
  contacts.get_by_slug(ctx, "ada");
  std::cout << "  conversions so far: " << migrator->conversions << " (3 listed + 1 get)\n";

  // A write re-stamps the spec at version 2; from then on the row needs no conversion.
  auto grace = contacts.get_by_slug(ctx, "grace");
  contacts.update(ctx, grace.id, {"Grace", "Hopper", "grace@navy.mil"});
  // Re-writing the converted spec unchanged is a real write too (the stored bytes and
  // version differ): the way to migrate a row eagerly, if you want to.
  auto alan = contacts.get_by_slug(ctx, "alan");
  auto rewritten = contacts.update(ctx, alan.id, alan.spec);
  std::cout << "  rewrote grace (new email) and alan (same spec, generation " << alan.generation
            << " -> " << rewritten.generation << ")\n";
  int before = migrator->conversions;
  contacts.get(ctx, grace.id);
  contacts.get(ctx, rewritten.id);
  std::cout << "  reading grace and alan again converted " << migrator->conversions - before
            << " blob(s)\n";

  // The controller decodes through the migrator too. Its status writes re-stamp the status
  // column only: ada's spec stays at version 1.
  auto stop = bh.start(ctx);
  auto changes = contacts.watch_list(ctx.with_timeout(5s));
  for (int greeted = 0; greeted < 3;) {
    auto change = changes.next();
    if (!change) throw std::runtime_error("the contacts were not greeted within 5 s");
    const auto& c = change->object;
    if (c.status && c.observed_generation == c.generation) {
      std::cout << "  status of " << c.slug.value_or("-") << ": " << c.status->greeting << "\n";
      ++greeted;
    }
  }
  stop(beehive::Context{}.with_timeout(10s));
}

void release_1_comes_back() {
  std::cout << "\n== release 1 again (a rollback): which rows did release 2 rewrite?\n";
  auto store = beehive::sqlite::open(db_file);
  beehive::Beehive bh(store);
  beehive::register_controller<ContactV1, ContactStatus>(
      bh, contact_kind, greet<ContactV1>, beehive::with_migrator(std::make_shared<MigratorV1>()));
  beehive::Client<ContactV1, ContactStatus> contacts(bh, contact_kind);
  beehive::Context ctx;
  for (const char* slug : {"ada", "grace", "alan"}) {
    try {
      auto c = contacts.get_by_slug(ctx, slug);
      std::cout << "  " << slug << ": still version 1, reads as {\"name\": \"" << c.spec.name
                << "\"}, status \"" << c.status->greeting << "\"\n";
    } catch (const beehive::Error& e) {
      if (e.code() != beehive::errc::schema_version_downgrade) throw;
      std::cout << "  " << slug << ": " << beehive::to_string(e.value())
                << " (written at spec version 2, newer than this build)\n";
    }
  }
}

int main() {
  try {
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(db_file.string() + suffix);
    release_1_writes();
    release_2_reads_and_writes();
    release_1_comes_back();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "migration: " << e.what() << "\n";
    return 1;
  }
}
