// One rank of the process-based fault tests: joins the group through env://, streams its `comm`
// telemetry on stdout, and runs all_reduce until told to stop, or until its communicator fails
// (then it prints the error on stderr and exits 1, as a worker does). A chosen rank can misbehave:
// exit after K operations, or sleep for S seconds after K operations. SIGKILL comes from the test.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "comm/host_values.h"
#include "comm/process_group.h"
#include "train/comm_telemetry.h"

int main(int argc, char** argv) {
  using namespace ringmaster;
  CLI::App app{"comm fault-test rank"};
  int64_t ops = 1'000'000, elements = 1 << 16, exit_after = -1, sleep_after = -1;
  double sleep_s = 0, timeout_s = 60;
  app.add_option("--ops", ops);
  app.add_option("--elements", elements);
  app.add_option("--exit-after", exit_after, "exit(0) after this many operations");
  app.add_option("--sleep-after", sleep_after, "sleep --sleep-s seconds after this many");
  app.add_option("--sleep-s", sleep_s);
  app.add_option("--timeout-s", timeout_s, "per-operation timeout");
  CLI11_PARSE(app, argc, argv);

  TelemetryWriter telemetry(stdout, std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0"));
  try {
    ProcessGroupOptions options;
    options.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    options.comm.watchdog_period = std::chrono::milliseconds(100);
    options.comm.observer = std::make_shared<TelemetryCommObserver>(telemetry);
    options.init.timeout = std::chrono::seconds(60);
    auto comm = initProcessGroup(options);
    fmt::print(stderr, "backend: {}\n", comm->backendName());
    Tensor t = makeHostTensor(DType::kF32, elements, [](int64_t) { return 1.0; });
    for (int64_t op = 0; op < ops; ++op) {
      if (op == exit_after) {
        fmt::print(stderr, "fault: exiting after {} operations\n", op);
        std::exit(0);
      }
      if (op == sleep_after) {
        fmt::print(stderr, "fault: sleeping {} s after {} operations\n", sleep_s, op);
        std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
      }
      comm->allReduce(t, ReduceOp::max())->wait();
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
