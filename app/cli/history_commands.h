// The commands that read the run database: `runs` (the table of past runs), `show RUN` (a run's
// report: summary, ranks, communication, errors) and `compare RUN RUN...`. Each prints an aligned
// table for people or, with --json, one JSON document for scripts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "db/database.h"
#include "query/runs.h"

namespace ringmaster::cli {

int runsCommand(const storage::Database& db, const storage::RunFilter& filter, bool json);
int showCommand(const storage::Database& db, int64_t run_id, bool json);
// `metrics` (--metric): each overlaid across the runs as well (cli/metric_overlay.h).
int compareCommand(const storage::Database& db, const std::vector<int64_t>& run_ids, bool json,
                   const std::vector<std::string>& metrics = {});
// `compare RUNS --x KEY --y KEY`: a point per run, X and Y each a run figure (query/figures.h) or a
// spec field (query/compare_axes.h), as a table or JSON; an unknown key is kInvalidArgument.
int compareAxesCommand(const storage::Database& db, const std::vector<int64_t>& run_ids,
                       const std::string& x, const std::string& y, bool json);

// The report `show` prints, also printed at the end of `run`.
void printRunReport(const storage::Database& db, int64_t run_id, bool json, std::FILE* out);

// `runs`, `show RUN` and `compare RUN RUN...` over the run database.
void addHistoryCommands(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
