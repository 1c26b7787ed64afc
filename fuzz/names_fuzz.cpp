// The strings a user names things with (group, kind, slug, finalizer) go to SQLite as
// bound parameters: anything valid UTF-8 without a NUL character is stored and read back
// verbatim (group, kind and slug up to 512 bytes), anything else is refused with
// invalid_argument before it is written.

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <beehive/beehive.hpp>
#include <beehive/client.hpp>
#include <beehive/sqlite.hpp>

#include "fuzz.hpp"

namespace {

using beehive::errc;
using beehive::Error;
using Json = nlohmann::json;
namespace fuzz = beehive::fuzz;

/// One store for the whole run. Never destroyed: CAF 0.17 cannot destroy an actor system
/// from exit handlers; the directory is removed at exit instead.
struct Hive {
  std::filesystem::path dir;
  std::shared_ptr<beehive::Store> store;
  std::unique_ptr<beehive::Beehive> bh;

  Hive() {
    auto tmp = std::filesystem::temp_directory_path() / "beehive-fuzz-XXXXXX";
    std::string buf = tmp.string();
    if (!mkdtemp(buf.data())) fuzz::fail("mkdtemp");
    dir = buf;
    store = beehive::sqlite::open((dir / "names.db").string());
    bh = std::make_unique<beehive::Beehive>(store);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(instance().dir, ec);
    });
  }
  static Hive& instance() {
    static auto* hive = new Hive;
    return *hive;
  }
};

/// Aborts unless `call` refuses the input with invalid_argument.
template <class Call>
void expect_refused(Call call, const char* what) {
  try {
    call();
  } catch (const Error& e) {
    fuzz::expect_code(e, {errc::invalid_argument});
    return;
  }
  fuzz::fail(std::string(what) + " accepted a slug that is not a name");
}

bool storable_text(const std::string& s) {
  try {
    beehive::detail::require_text(s, "text");
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& hive = Hive::instance();
  static int serial = 0;
  auto f = fuzz::fields(data, size, 4);
  auto &group = f[0], &kind = f[1], &slug = f[2], &finalizer = f[3];
  // A fresh slug per run, so that an input seen twice is not an already_exists.
  slug.append("#").append(std::to_string(++serial));
  auto name = [](const std::string& n) { return storable_text(n) && n.size() <= 512; };
  bool valid = name(group) && name(kind) && name(slug) && storable_text(finalizer);
  beehive::Context ctx;
  std::vector<std::string> finalizers;
  if (!finalizer.empty()) finalizers.push_back(finalizer);
  std::optional<beehive::Client<Json, Json>> client;
  beehive::Object<Json, Json> made;
  try {
    client.emplace(*hive.bh, beehive::GroupKind{group, kind});
    made = client->create(ctx, Json{{"n", serial}}, beehive::with_slug(slug),
                          beehive::with_finalizers(finalizers));
  } catch (const Error& e) {
    fuzz::expect_code(e, {errc::invalid_argument});
    if (valid) fuzz::fail(std::string("valid names refused: ") + e.what());
    // Every call that takes a slug refuses it alike, reads and the idempotent remove too.
    if (client && !name(slug)) {
      expect_refused([&] { client->remove_by_slug(ctx, slug); }, "remove_by_slug");
      expect_refused([&] { client->get_by_slug(ctx, slug); }, "get_by_slug");
    }
    return 0;
  }
  if (!valid) fuzz::fail("invalid UTF-8 was written");
  auto got = client->get_by_slug(ctx, slug);
  if (got.id != made.id || got.slug != slug || got.finalizers != finalizers ||
      got.spec != made.spec)
    fuzz::fail("the stored names differ from what was written");
  return 0;
}
