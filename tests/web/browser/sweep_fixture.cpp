// The sweep page test's way to record a sweep in a real database (issue 37), through the storage's
// own functions as the sweep runner calls them; the members' runs are real `ringmaster run`s the
// test starts itself. No SQL of its own. The sweep's driver is recorded as the process DRIVER_PID
// (the test itself), so that no command taking the sweep for one whose driver died marks it
// interrupted while the test drives it.
//   sweep_fixture DB create NAME SPEC_PATH DRIVER_PID PLAN_JSON OVERRIDES_JSON...
//                                                       prints the new sweep's id
//   sweep_fixture DB started SWEEP_ID POSITION RUN_ID                   the member's run exists
//   sweep_fixture DB finish SWEEP_ID STATUS                             completed, cancelled, ...
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "db/database.h"
#include "process/process_identity.h"
#include "recorder/sweep_records.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int usage(const char* program) {
  std::fprintf(
      stderr,
      "usage: %s DB create NAME SPEC_PATH DRIVER_PID PLAN_JSON OVERRIDES_JSON... | DB started "
      "SWEEP_ID POSITION RUN_ID | DB finish SWEEP_ID STATUS\n",
      program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringmaster::storage;
  const std::string command = argc > 2 ? argv[2] : "";
  try {
    if (command == "create" && argc >= 8) {
      Database db(argv[1]);
      std::stringstream spec;
      spec << std::ifstream(argv[4]).rdbuf();
      NewSweep sweep{.name = argv[3],
                     .spec_path = argv[4],
                     .spec_json = spec.str(),
                     .plan_json = argv[6],
                     .member_overrides_json = std::vector<std::string>(argv + 7, argv + argc),
                     .created_at = now()};
      const int64_t sweep_id = createSweep(db, sweep);
      const std::optional<ringmaster::ProcessIdentity> driver =
          ringmaster::processIdentity(static_cast<pid_t>(std::stol(argv[5])));
      if (!driver) throw std::runtime_error(std::string("no process ") + argv[5]);
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      recordSweepDriver(db, sweep_id,
                        {.pid = driver->pid,
                         .start_time = static_cast<int64_t>(driver->start_time),
                         .boot_id = driver->boot_id,
                         .host = host});
      std::printf("%lld\n", static_cast<long long>(sweep_id));
      return 0;
    }
    if (command == "started" && argc == 6) {
      Database db(argv[1]);
      recordSweepMemberStarted(db, std::stoll(argv[3]), std::stoi(argv[4]), std::stoll(argv[5]));
      return 0;
    }
    if (command == "finish" && argc == 5) {
      Database db(argv[1]);
      finishSweep(db, std::stoll(argv[3]), argv[4], now());
      return 0;
    }
    return usage(argv[0]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "sweep_fixture: %s\n", error.what());
    return 1;
  }
}
