// The browser test's way to make a run handed to Slurm in a real database (issue 35), through the
// storage's own functions as the Slurm launch calls them: no Slurm, no SQL of its own.
//   scheduler_run_fixture DB create NAME JOB_ID STATE REASON NODES   prints the new run's id
//   scheduler_run_fixture DB state RUN_ID STATE REASON NODES         records Slurm's state now
#include <cstdio>
#include <exception>
#include <string>

#include "db/database.h"
#include "recorder/run_lifecycle.h"

int main(int argc, char** argv) {
  using namespace ringmaster::storage;
  const std::string command = argc > 2 ? argv[2] : "";
  const bool create = command == "create" && argc == 8;
  if (!create && !(command == "state" && argc == 7)) {
    std::fprintf(stderr,
                 "usage: %s DB create NAME JOB_ID STATE REASON NODES | DB state RUN_ID STATE "
                 "REASON NODES\n",
                 argv[0]);
    return 2;
  }
  try {
    Database db(argv[1]);
    const int next = create ? 5 : 4;  // the first of STATE REASON NODES
    const SchedulerJob job{.state = argv[next], .reason = argv[next + 1], .nodes = argv[next + 2]};
    int64_t run_id = 0;
    if (create) {
      run_id =
          createRun(db, {.name = argv[3], .spec_json = "{}", .strategy = "ddp", .world_size = 4});
      // Detached, as a job in Slurm's hands goes on with no recorder: a command that opens the
      // database later never takes it for interrupted.
      markRunDetached(db, run_id,
                      {std::string(argv[1]) + "-runs/run-" + std::to_string(run_id) + "/job"});
      recordSchedulerJob(db, run_id, "slurm", argv[4]);
      std::printf("%lld\n", static_cast<long long>(run_id));
    } else {
      run_id = std::stoll(argv[3]);
    }
    recordSchedulerState(db, run_id, job);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "scheduler_run_fixture: %s\n", error.what());
    return 1;
  }
}
