// The crash test's writer process: writes of every kind to a beehive store, one at a
// time, each described on stdout before it is made and acknowledged once it returned.
// The test kills it with SIGKILL at a random moment. Protocol: tests/crash/protocol.hpp.

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <beehive/beehive.hpp>

#include "protocol.hpp"

namespace {

using namespace beehive;
using namespace beehive::crash;

/// Writes all of `s` to stdout with write(2): one call for anything up to PIPE_BUF, so
/// the reader never sees half a description.
void emit(const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::_Exit(4);  // the test went away
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void fail(const std::string& what) {
  std::string msg = what;
  for (auto& c : msg)
    if (c == '\n') c = ' ';
  emit("F " + msg + "\n");
  std::_Exit(3);
}

struct Item {
  ObjectID id = 0;
  std::string slug;
  ItemSpec spec;
  std::int64_t generation = 1;
  bool hold = false;    // carries crash_finalizer
  bool pinned = false;  // created by a within block of this run: never removed here
};

const char* const colors[] = {"red", "green", "blue", "amber", "teal"};
const char* const condition_types[] = {"Ready", "Synced", "Healthy"};
const char* const categories[] = {"main", "audit"};

class Writer {
 public:
  Writer(std::uint64_t seed, int cycle, Client<ItemSpec, ItemStatus> items,
         ControllerClient<ItemStatus> cc)
      : rng_(seed), cycle_(cycle), items_(std::move(items)), cc_(std::move(cc)) {}

  void adopt(const Object<ItemSpec, ItemStatus>& o) {
    if (!o.slug) return;  // the writer names everything; anything else is not ours
    Item it{o.id, *o.slug, o.spec, o.generation, false, false};
    for (auto& f : o.finalizers)
      if (f == crash_finalizer) it.hold = true;
    if (!o.deletion_requested_at)
      live_.push_back(it);
    else if (it.hold)
      held_.push_back(it);  // waits for unfin; without a finalizer GC collects it
  }

  [[noreturn]] void run() {
    for (;;) step();
  }

  [[noreturn]] void run_bulk() {
    for (;;) bulk();
  }

  /// One bulk block, then idle: what is acknowledged must already be durable, with no
  /// later write of this process to push it out.
  [[noreturn]] void run_bulk_then_idle() {
    if (live_.empty()) create();
    auto started = std::chrono::steady_clock::now();
    bulk();
    auto took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
    emit("I " + std::to_string(took.count()) + "\n");
    for (;;) ::pause();
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(int percent) { return pick(100) < percent; }
  std::string color() { return colors[pick(5)]; }

  void step() {
    std::size_t live = live_.size();
    int w_create = live < 20 ? 40 : 14;
    int w_update = live ? 14 : 0;
    int w_status = live ? 14 : 0;
    int w_cond = live ? 12 : 0;
    int w_event = live ? 14 : 0;
    int w_remove = live == 0 ? 0 : live > 150 ? 40 : live > 60 ? 10 : 4;
    int w_unfin = held_.empty() ? 0 : 6;
    int w_within = 8;
    int total = w_create + w_update + w_status + w_cond + w_event + w_remove + w_unfin + w_within;
    int r = pick(total);
    if ((r -= w_create) < 0) return create();
    if ((r -= w_update) < 0) return update(live_[pick(int(live))]);
    if ((r -= w_status) < 0) return status(live_[pick(int(live))]);
    if ((r -= w_cond) < 0) return cond(live_[pick(int(live))]);
    if ((r -= w_event) < 0) return event(live_[pick(int(live))]);
    if ((r -= w_remove) < 0) return remove();
    if ((r -= w_unfin) < 0) return unfin();
    return within();
  }

  // Each op: the description (without "B <seq> ") and the write itself, made with the
  // given context; ops are also used inside within blocks.

  std::string create_desc(Item& it) {
    return "create " + it.slug + " " + it.spec.color + " " + std::to_string(it.spec.size) + " " +
           (it.hold ? "1" : "0");
  }
  void do_create(const Context& ctx, Item& it) {
    auto o = it.hold ? items_.create(ctx, it.spec, with_slug(it.slug),
                                     with_finalizers({crash_finalizer}))
                     : items_.create(ctx, it.spec, with_slug(it.slug));
    it.id = o.id;
    it.generation = o.generation;
  }
  Item new_item(std::string slug) {
    Item it;
    it.slug = std::move(slug);
    it.spec = {color(), pick(1000)};
    it.hold = chance(50);
    return it;
  }

  std::string update_desc(const Item& it, const ItemSpec& spec) {
    return "update " + it.slug + " " + spec.color + " " + std::to_string(spec.size);
  }
  ItemSpec next_spec(const Item& it) {
    if (chance(15)) return it.spec;  // re-applying the stored spec writes nothing
    return {chance(50) ? it.spec.color : color(), it.spec.size + 1 + pick(3)};
  }

  std::string status_desc(const Item& it, std::int64_t og, std::int64_t seq) {
    return "status " + it.slug + " " + std::to_string(og) + " " + std::to_string(seq) + " h";
  }
  std::int64_t observed(const Item& it) {
    return it.generation > 1 && chance(20) ? it.generation - 1 : it.generation;
  }

  Condition some_condition(std::int64_t seq) {
    static const ConditionStatus statuses[] = {ConditionStatus::True, ConditionStatus::False,
                                               ConditionStatus::Unknown};
    // Few reasons and messages, so that identical (no-op) conditions happen too.
    return {condition_types[pick(3)], statuses[pick(3)], "R" + std::to_string(pick(3)),
            "m" + std::to_string(chance(50) ? seq : 0)};
  }
  std::string cond_desc(const Item& it, const Condition& c) {
    return "cond " + it.slug + " " + c.type + " " + to_string(c.status) + " " + c.reason + " " +
           c.message;
  }

  EventSpec some_event(std::int64_t seq) {
    EventSpec e;
    e.category = categories[pick(2)];
    e.type = chance(70) ? EventType::Normal : EventType::Warning;
    e.reason = "E" + std::to_string(pick(3));
    e.message = "m" + std::to_string(seq);
    e.detail = nlohmann::json{{"seq", seq}};
    return e;
  }
  std::string event_desc(const Item& it, const EventSpec& e) {
    return "event " + it.slug + " " + e.category + " " + to_string(e.type) + " " + e.reason + " " +
           e.message;
  }

  // --- single writes ---------------------------------------------------------------

  void begin(const std::string& desc) { emit("B " + std::to_string(seq_) + " " + desc + "\n"); }
  void ack(std::optional<std::int64_t> generation = std::nullopt) {
    emit("A " + std::to_string(seq_) +
         (generation ? " " + std::to_string(*generation) : std::string()) + "\n");
    ++seq_;
  }

  void create() {
    Item it = new_item("c" + std::to_string(cycle_) + "-o" + std::to_string(seq_));
    begin(create_desc(it));
    do_create(ctx_, it);
    ack(it.generation);
    live_.push_back(it);
  }

  void update(Item& it) {
    auto spec = next_spec(it);
    begin(update_desc(it, spec));
    auto o = items_.update(ctx_, it.id, spec);
    ack(o.generation);
    it.spec = spec;
    it.generation = o.generation;
  }

  void status(Item& it) {
    auto og = observed(it);
    begin(status_desc(it, og, seq_));
    cc_.update_status(ctx_, it.id, og, ItemStatus{seq_, "h"});
    ack();
  }

  void cond(Item& it) {
    auto c = some_condition(seq_);
    begin(cond_desc(it, c));
    cc_.set_condition(ctx_, it.id, c);
    ack();
  }

  void event(Item& it) {
    auto e = some_event(seq_);
    begin(event_desc(it, e));
    cc_.record_event(ctx_, it.id, e);
    ack();
  }

  void remove() {
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < live_.size(); ++i)
      if (!live_[i].pinned) candidates.push_back(i);
    if (candidates.empty()) return create();
    auto i = candidates[pick(int(candidates.size()))];
    Item it = live_[i];
    begin("remove " + it.slug);
    items_.remove(ctx_, it.id);
    ack();
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    if (it.hold) held_.push_back(it);  // otherwise GC may collect it at any moment
  }

  void unfin() {
    auto i = static_cast<std::size_t>(pick(int(held_.size())));
    Item it = held_[i];
    begin("unfin " + it.slug);
    cc_.remove_finalizer(ctx_, it.id, crash_finalizer);
    ack();
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  // A within block: three new objects "c<cycle>-w<n>-a/b/c", each with the condition
  // Grouped; sometimes also status on the first, and an update and an event on an
  // existing object. All or nothing.
  void within() {
    std::string n = "c" + std::to_string(cycle_) + "-w" + std::to_string(seq_);
    std::vector<Item> made;
    for (const char* suffix : {"-a", "-b", "-c"}) {
      made.push_back(new_item(n + suffix));
      made.back().pinned = true;
    }
    Condition grouped{"Grouped", ConditionStatus::True, "Within", "w" + std::to_string(seq_)};
    bool with_status = chance(50);
    Item* other = !live_.empty() && chance(60) ? &live_[pick(int(live_.size()))] : nullptr;
    ItemSpec other_spec = other ? next_spec(*other) : ItemSpec{};
    EventSpec other_event = some_event(seq_);

    std::string desc = "B " + std::to_string(seq_) + " within " + std::to_string(seq_) + "\n";
    auto sub = [&](const std::string& d) { desc += "S " + std::to_string(seq_) + " " + d + "\n"; };
    for (auto& it : made) sub(create_desc(it));
    for (auto& it : made) sub(cond_desc(it, grouped));
    if (with_status) sub(status_desc(made[0], 1, seq_));
    if (other) {
      sub(update_desc(*other, other_spec));
      sub(event_desc(*other, other_event));
    }
    emit(desc);

    std::int64_t other_generation = 0;
    cc_.within(ctx_, [&](const Context& tx) {
      for (auto& it : made) do_create(tx, it);
      for (auto& it : made) cc_.set_condition(tx, it.id, grouped);
      if (with_status) cc_.update_status(tx, made[0].id, 1, ItemStatus{seq_, "h"});
      if (other) {
        other_generation = items_.update(tx, other->id, other_spec).generation;
        cc_.record_event(tx, other->id, other_event);
      }
    });
    ack();
    if (other) {
      other->spec = other_spec;
      other->generation = other_generation;
    }
    for (auto& it : made) live_.push_back(it);
  }

  // A within block that outgrows SQLite's page cache (protocol.hpp): an update of one
  // object, bulk_creates new objects "c<cycle>-b<n>-<i>", an update of the first again.
  void bulk() {
    if (live_.empty()) return create();
    auto anchor = static_cast<std::size_t>(pick(int(live_.size())));
    const Item before = live_[anchor];
    ItemSpec first{color(), before.spec.size + 1};
    ItemSpec second{color(), before.spec.size + 2};
    std::string prefix = "c" + std::to_string(cycle_) + "-b" + std::to_string(seq_);
    std::vector<Item> made(bulk_creates);
    for (int i = 0; i < bulk_creates; ++i) {
      auto& it = made[static_cast<std::size_t>(i)];
      it.slug = prefix + "-" + std::to_string(i);
      it.spec = {bulk_color(it.slug, bulk_bytes), i};
      it.pinned = true;
    }
    const std::string b = "B " + std::to_string(seq_) + " ",
                      sub = "S " + std::to_string(seq_) + " ";
    emit(b + "within " + std::to_string(seq_) + "\n" + sub + update_desc(before, first) + "\n" +
         sub + "bulk " + prefix + " " + std::to_string(bulk_creates) + " " +
         std::to_string(bulk_bytes) + "\n" + sub + update_desc(before, second) + "\n");

    std::int64_t generation = 0;
    cc_.within(ctx_, [&](const Context& tx) {
      items_.update(tx, before.id, first);
      for (auto& it : made) do_create(tx, it);
      generation = items_.update(tx, before.id, second).generation;
    });
    ack();
    live_[anchor].spec = second;
    live_[anchor].generation = generation;
    live_.insert(live_.end(), made.begin(), made.end());
  }

  std::mt19937_64 rng_;
  int cycle_;
  Client<ItemSpec, ItemStatus> items_;
  ControllerClient<ItemStatus> cc_;
  Context ctx_;
  std::int64_t seq_ = 1;
  std::vector<Item> live_;
  std::vector<Item> held_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 6 ? argv[5] : "mixed";
  if ((argc != 5 && argc != 6) || (mode != "mixed" && mode != "bulk" && mode != "bulk-idle")) {
    std::fprintf(stderr,
                 "usage: %s <db-file> <normal|full> <seed> <cycle> [mixed|bulk|bulk-idle]\n",
                 argv[0]);
    return 2;
  }
  // Never outlive the test that started us.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 5;

  try {
    sqlite::Options opts;
    opts.synchronous =
        std::string(argv[2]) == "full" ? sqlite::Synchronous::full : sqlite::Synchronous::normal;
    auto store = sqlite::open(argv[1], opts);
    Beehive bh(store);
    auto cc = register_controller<ItemSpec, ItemStatus>(
        bh, crash_kind,
        [](const Context&, ControllerClient<ItemStatus>&, const Object<ItemSpec, ItemStatus>&) {
          return Result{};
        });
    Client<ItemSpec, ItemStatus> items(bh, crash_kind);
    auto stop = bh.start(Context{});
    Writer w(std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]), items, cc);
    for (auto& o : items.list(Context{})) w.adopt(o);
    emit("R\n");
    if (mode == "bulk") w.run_bulk();
    if (mode == "bulk-idle") w.run_bulk_then_idle();
    w.run();
  } catch (const std::exception& e) {
    fail(e.what());
  } catch (...) {
    fail("unknown exception");
  }
}
