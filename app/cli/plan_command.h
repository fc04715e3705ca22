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
};

// Runs it: prints the table (plan::planJson with --json); exit code 0.
int planCommand(const PlanCommandOptions& options);

// `plan`.
void addPlanCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
