// `ringmaster plan SPEC` (issue 37): the layout advisor's table. Every valid layout of the spec's
// world (session/plan/layout_plan.h) with its memory estimate and predicted step time split into
// compute, communication per mesh dimension and bubble, best predicted rate first with the top K
// marked; the layouts dropped for memory with why, and the combinations the spec refused. The
// hosts' throughput and bandwidths are measured once and kept beside the run database.
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"

namespace ringmaster::cli {

struct PlanCommandOptions {
  std::string spec_path;
  std::vector<std::string> overrides;  // --set FIELD=VALUE on the base spec (launch.hosts, ...)
  int top = 4;
  bool json = false;
  bool remeasure = false;
  std::string device_memory;  // "2G": per rank, instead of the host's memory over its ranks
  std::string db_path;
  // --trials K: the top K layouts run as a sweep of short trials (--trial-steps each), then
  // predicted against measured per term and the rank correlation of the two orderings.
  int trials = 0;
  int trial_steps = 20;
  // --launch: the winner (the trials' fastest measured, else the best predicted) run as an
  // ordinary run of the spec's own length.
  bool launch = false;
  double grace_s = 5;
};

// Runs it: prints the table (plan::planJson with --json); with --trials the trials' comparison
// after it (JSON: "trials"); with --launch the winner's run. Exit code 0, or the trial sweep's /
// the launched run's (sweepCommand's / runCommand's) when that is not 0.
int planCommand(const PlanCommandOptions& options);

// `plan`.
void addPlanCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
