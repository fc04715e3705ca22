// `ringmaster-node bench-comm`: the collective benchmark in the manner of nccl-tests. With --ranks
// N it launches N local ranks of itself (hosting their store, as torchrun's agent does) and
// supervises them; otherwise it is one rank of a group described by the torchrun environment.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ringmaster {

struct BenchCommArgs {
  std::string ops = "all_reduce";
  std::string min_bytes = "32M";
  std::string max_bytes = "32M";
  double step_factor = 2;
  std::string step_bytes = "0";
  int iters = 20;
  int warmup = 5;
  std::string dtype = "float32";
  std::string redop = "sum";
  double premul_factor = 0.5;
  int root = 0;
  bool check = false;
  std::string backend = "gloo";
  int ranks = 0;  // 0: this process is one rank (RANK / WORLD_SIZE from the environment)
  double timeout_s = 120;
};

// Adds the subcommand and its options (nccl-tests' short flags) to `app`.
CLI::App* addBenchCommCommand(CLI::App& app, BenchCommArgs& args);

// Runs it; `argv` is this process's command line, re-used for the ranks --ranks launches.
// Returns the exit code.
int runBenchComm(const BenchCommArgs& args, const std::vector<std::string>& argv);

}  // namespace ringmaster
