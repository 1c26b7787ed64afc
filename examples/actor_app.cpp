// actor_app: a CAF application that runs beehive inside its own actor system and talks
// to it only with typed messages. An "operator" actor creates a few objects through the
// store_writer, watches the kind through the watch_hub, and asks the controller to
// requeue one; it quits once the controller has reported status for every object.

#include <filesystem>
#include <iostream>
#include <set>

#include <caf/all.hpp>

#include <beehive/actors.hpp>
#include <beehive/beehive.hpp>

struct JobSpec {
  std::string command;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobSpec, command)

struct JobStatus {
  int runs = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobStatus, runs)

const beehive::GroupKind job_kind{"example.org", "Job"};

// The application's configuration: beehive's message types added in one line.
struct AppConfig : caf::actor_system_config {
  AppConfig() { beehive::add_message_types(*this); }
};

caf::behavior operator_actor(caf::event_based_actor* self, beehive::store_writer_actor writer,
                             beehive::watch_hub_actor hub, beehive::controller_actor controller,
                             int jobs) {
  auto done = std::make_shared<std::set<beehive::ObjectID>>();
  // Subscribe first, then create: every creation arrives as a change.
  self->request(hub, caf::infinite, beehive::watch_request{job_kind, std::nullopt, self})
      .then(
          [=](std::uint64_t subscription) {
            std::cout << "watching Jobs (subscription " << subscription << ")\n";
            for (int i = 0; i < jobs; ++i) {
              // The typed helper encodes the spec; the writer sets its schema version.
              auto create = beehive::make_create(job_kind, JobSpec{"echo " + std::to_string(i)},
                                                 "job-" + std::to_string(i));
              self->request(writer, caf::infinite, std::move(create))
                  .then(
                      [=](const beehive::ObjectRow& row) {
                        std::cout << "created " << *row.meta.slug << " as " << row.meta.id << "\n";
                        if (i == 0)  // a manual nudge, as an operator would after fixing something
                          self->request(controller, caf::infinite,
                                        beehive::requeue_request{row.meta.id})
                              .then([](bool) { std::cout << "requeued job-0\n"; },
                                    [=](caf::error& e) { self->quit(e); });
                      },
                      [=](caf::error& e) { self->quit(e); });
            }
          },
          [=](caf::error& e) { self->quit(e); });
  return {
      [=](const beehive::object_change& change) {
        auto job = beehive::decode_row<JobSpec, JobStatus>(change.row);
        if (job.status && job.observed_generation == job.generation &&
            done->insert(job.id).second) {
          std::cout << "job " << job.id << " (" << job.spec.command << ") settled after "
                    << job.status->runs << " run(s)\n";
          if (static_cast<int>(done->size()) == jobs) self->quit();
        }
      },
      [=](const beehive::watch_ended&) {  // the beehive stopped before every job settled
        self->quit(beehive::make_error(beehive::errc::stopped, "the watch ended early"));
      },
  };
}

int main() {
  // Recreate the database (and its -wal and -shm files) so that reruns start from nothing.
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(std::string("var/actor_app.db") + suffix);
  AppConfig cfg;
  caf::actor_system sys{cfg};
  {
    beehive::Beehive bh(sys, beehive::sqlite::open("var/actor_app.db"));
    // The controller itself is ordinary blocking code on beehive's worker threads.
    beehive::register_controller<JobSpec, JobStatus>(
        bh, job_kind,
        [](const beehive::Context& ctx, beehive::ControllerClient<JobStatus>& client,
           const beehive::Object<JobSpec, JobStatus>& job) {
          int runs = job.status ? job.status->runs + 1 : 1;
          client.update_status(ctx, job.id, job.generation, JobStatus{runs});
          return beehive::Result{};
        });
    beehive::Context ctx;
    auto stop = bh.start(ctx);
    auto app =
        sys.spawn(operator_actor, bh.store_writer(), bh.watch_hub(), *bh.controller(job_kind), 3);
    // Wait for the operator to finish, bounded.
    caf::scoped_actor self{sys};
    self->monitor(app);
    bool finished = false;
    caf::error failure;
    self->receive(
        [&](const caf::down_msg& m) {
          finished = true;
          failure = m.reason;
        },
        caf::after(std::chrono::seconds(20)) >> [] {});
    // Stop: reconciles in flight finish, bounded by the deadline; past it, deadline_exceeded
    // (the beehive is stopped all the same).
    try {
      stop(ctx.with_timeout(std::chrono::seconds(10)));
    } catch (const beehive::Error& e) {
      std::cerr << "beehive: shutdown did not drain cleanly: " << e.what() << "\n";
      return 1;
    }
    if (!finished) {
      std::cerr << "the operator did not finish in time\n";
      return 1;
    }
    if (failure) {  // a request the operator sent failed
      std::cerr << "the operator failed: " << sys.render(failure) << "\n";
      return 1;
    }
  }
  std::cout << "done\n";
  return 0;
}
